"""input_fn for Estimator and TPUEstimator: shards to batched (features, labels)."""

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.data import corrupt_records
from official_seg.data import preprocess
from official_seg.data import repeat_factors
from official_seg.data import tfexample

AUTOTUNE = tf.data.AUTOTUNE


def list_shards(data_dir, split):
  """Returns the sorted shard paths of `split`.

  Raises:
    validation.MissingFileError: no shard matches; the message names the
      pattern.
  """
  pattern = tfexample.shard_pattern(data_dir, split)
  files = sorted(tf.io.gfile.glob(pattern))
  if not files:
    raise validation.MissingFileError(
        f'No TFRecord shards match {pattern!r} (DATA_DIR={data_dir!r}, '
        f'split {split!r}). Set DATA_DIR with --gin_param="DATA_DIR=\'...\'" '
        'or write the data with make_synthetic_dataset or '
        'build_tfrecords.')
  return files


class CorruptDataError(validation.RunError, OSError):
  """Shards whose records fail their checksums; the message names them."""


def find_corrupt_shards(files):
  """Reads every record of each file; returns [(path, error message)].

  TensorFlow's 'corrupted record at <offset>' does not say which file; this
  does, after the fact, at the cost of one read of the files.
  """
  corrupt = []
  for path in files:
    try:
      tf.data.TFRecordDataset(path).reduce(0, lambda count, _: count + 1)
    except tf.errors.DataLossError as error:
      corrupt.append((path, error.message.split('}}')[-1].strip()))
  return corrupt


def explain_data_loss(error, data_dir, splits):
  """A `CorruptDataError` naming the corrupt shards of the run's splits.

  Args:
    error: the `tf.errors.DataLossError` that stopped a run.
    data_dir: str, the folder of the shards.
    splits: the split names the run reads.

  Returns:
    A `CorruptDataError`, or `error` itself when no shard is corrupt (the
    loss was elsewhere, e.g. in a checkpoint).
  """
  files = sorted({path for split in set(splits)
                  for path in list_shards(data_dir, split)})
  corrupt = find_corrupt_shards(files)
  if not corrupt:
    return error
  listing = '; '.join(f'{path} ({message})' for path, message in corrupt)
  return CorruptDataError(
      f'Corrupt TFRecord shard(s): {listing}. Rewrite or remove them, or set '
      'build_dataset.skip_corrupt = True to skip corrupt records.')


def pad_batch(features, labels, batch_size, ignore_label):
  """Pads a partial last batch up to `batch_size` with all-ignore examples.

  Padding examples have 'valid' 0 and labels all `ignore_label`, so they count
  in no metric; every real image counts exactly once and shapes stay static.

  Args:
    features: dict of batched tensors from `Parser`.
    labels: int32 [b, H, W, 1] with b <= batch_size.
    batch_size: int.
    ignore_label: int.

  Returns:
    (features, labels) with leading dimension `batch_size`.
  """
  missing = batch_size - tf.shape(labels)[0]

  def pad(tensor, value=0):
    paddings = [[0, missing]] + [[0, 0]] * (tensor.shape.rank - 1)
    padded = tf.pad(tensor, paddings, constant_values=value)
    padded.set_shape([batch_size] + tensor.shape[1:].as_list())
    return padded

  return ({key: pad(value) for key, value in features.items()},
          pad(labels, ignore_label))


def pipeline_shards(files, input_context):
  """Splits the shards of a split over the input pipelines of a worker set.

  Args:
    files: sorted list of shard paths.
    input_context: optional `tf.distribute.InputContext`.

  Returns:
    (files, record_shard): the files this pipeline reads, and None when it
    reads its own files, or (num_pipelines, pipeline_id) when there are fewer
    files than pipelines, so every pipeline reads all files in one fixed order
    and keeps every num_pipelines-th record.
  """
  if not input_context or input_context.num_input_pipelines <= 1:
    return files, None
  count = input_context.num_input_pipelines
  index = input_context.input_pipeline_id
  if len(files) >= count:
    return files[index::count], None
  return files, (count, index)


def _read_records(files, input_context, is_training, repeat, cycle_length,
                  seed, skip_corrupt):
  """Reads the serialized examples of this input pipeline's share."""
  files, record_shard = pipeline_shards(files, input_context)
  dataset = tf.data.Dataset.from_tensor_slices(files)
  if is_training and not record_shard:
    dataset = dataset.shuffle(len(files), seed=seed)
  if repeat:
    dataset = dataset.repeat()

  def read(path):
    records = tf.data.TFRecordDataset(path)
    # A damaged record ends its shard: TFRecord framing has no way to resync.
    return records.ignore_errors(log_warning=True) if skip_corrupt else records

  dataset = dataset.interleave(
      read, cycle_length=min(cycle_length, len(files)),
      num_parallel_calls=AUTOTUNE,
      deterministic=not is_training or seed is not None or bool(record_shard))
  if record_shard:
    dataset = dataset.shard(*record_shard)
  return dataset


@gin.configurable(denylist=['batch_size', 'parser', 'data_dir', 'split',
                            'input_context'])
def build_dataset(batch_size, parser, data_dir, split, input_context=None,
                  shuffle_buffer_size=256, cycle_length=8, seed=None,
                  cache_decoded=False, cache_filename='', skip_corrupt=False,
                  repeat_factor_threshold=0.0):
  """Builds the dataset of one split.

  Args:
    batch_size: int, examples per call (the per-replica or per-host batch).
    parser: a `preprocess.Parser`; a training parser makes a training
      dataset: it repeats, shuffles and augments, while evaluation reads
      each example exactly once and pads the last batch.
    data_dir: str, folder holding `<split>-NNNNN-of-NNNNN.tfrecord` shards.
    split: str, the split name.
    input_context: optional `tf.distribute.InputContext`; each input pipeline
      reads its own shards (see `pipeline_shards`).
    shuffle_buffer_size: int, examples in the shuffle buffer (training).
    cycle_length: int, shards read in parallel.
    seed: optional int; makes training reproducible: the same seed gives the
      same file order, shuffles, scales, crops and flips (reading then keeps
      a deterministic order, which can be slower).
    cache_decoded: bool, keep decoded examples after the first epoch, in
      memory (about H * W * 4 bytes an image) or in `cache_filename`.
      Training then shuffles decoded images, so the shuffle buffer holds
      decoded images too.
    cache_filename: str; '' caches in memory, else a file path prefix.
    skip_corrupt: bool; drop examples that fail to read or decode instead of
      stopping, and log how many (see `corrupt_records`). A damaged
      record in a shard drops the rest of that shard, logged by tf.data.
    repeat_factor_threshold: float; above 0, training repeats each image by
      LVIS's repeat factor (`repeat_factors`, from the split's
      `image_classes` file) before the shuffle. 0 is off.

  Returns:
    A `tf.data.Dataset` of (features, labels) with static shapes.

  Raises:
    validation.MissingFileError: no shard of the split exists in `data_dir`,
      or the `image_classes` file that `repeat_factor_threshold` needs.
  """
  is_training = parser.is_training
  deterministic = not is_training or seed is not None
  factors = (repeat_factors.split_factors(data_dir, split,
                                          repeat_factor_threshold,
                                          parser.ignore_label)
             if is_training and repeat_factor_threshold > 0 else None)
  records = _read_records(list_shards(data_dir, split), input_context,
                          is_training, is_training and not cache_decoded,
                          cycle_length, seed, skip_corrupt)
  if is_training and not cache_decoded:
    records = repeat_factors.shuffled(records, tfexample.record_filename,
                                      factors, shuffle_buffer_size, seed,
                                      skip_corrupt)
  decoder = tfexample.Decoder(label_optional=parser.label_optional,
                              channels=parser.image_channels,
                              bit_depth=parser.image_bit_depth)
  if skip_corrupt or cache_decoded:
    examples = _decoded(records, decoder, skip_corrupt, cache_decoded,
                        cache_filename, f"split {split!r} of {data_dir}")
    parse = parser
    if is_training and cache_decoded and factors:
      examples = repeat_factors.shuffled(examples.repeat(),
                                         lambda e: e['filename'], factors,
                                         shuffle_buffer_size, seed)
    elif is_training and cache_decoded:
      examples = examples.shuffle(shuffle_buffer_size, seed=seed).repeat()
  else:
    examples = records

    def parse(record, seed=None):
      return parser(decoder.decode(record), seed)
  dataset = _parse_all(examples, parse, seed if is_training else None,
                       input_context, deterministic)
  if parser.pads_larger_images:
    # Images of several sizes: each batch is padded to its largest, as the
    # parser pads (image 0, the mean pixel; labels ignored; 'valid' 0).
    dataset = dataset.padded_batch(batch_size, padding_values=(
        {'image': 0.0, 'height': 0, 'width': 0, 'valid': 0.0},
        parser.ignore_label))
  else:
    dataset = dataset.batch(batch_size, drop_remainder=is_training)
  if not is_training:
    dataset = dataset.map(
        lambda f, l: pad_batch(f, l, batch_size, parser.ignore_label))
  return dataset.prefetch(AUTOTUNE)


def _decoded(records, decoder, skip_corrupt, cache, cache_filename, name):
  """Decodes records, maybe skipping corrupt ones, maybe caching the result."""
  if skip_corrupt:
    examples = corrupt_records.skip_corrupt_examples(records,
                                                     decoder.decode, name)
  else:
    examples = records.map(decoder.decode, num_parallel_calls=AUTOTUNE)
  return examples.cache(cache_filename) if cache else examples


def _parse_all(examples, parse, seed, input_context, deterministic):
  """Maps `parse` over examples; with a seed, each gets its own stateless one.

  The example's seed is (seed, its index in this pipeline's stream, made
  unique across pipelines), so it does not depend on thread scheduling.
  """
  if seed is None:
    return examples.map(parse, num_parallel_calls=AUTOTUNE,
                        deterministic=deterministic)
  pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline = input_context.input_pipeline_id if input_context else 0
  return examples.enumerate().map(
      lambda index, example: parse(example, tf.stack(
          [tf.constant(seed, tf.int64), index * pipelines + pipeline])),
      num_parallel_calls=AUTOTUNE)


def make_input_fn(dataset, is_training, parser, unlabeled=None):
  """Returns the training or evaluation input_fn of a dataset.

  It follows the TPUEstimator contract: the returned function reads
  `params['batch_size']` as the batch of one call and builds the dataset
  inside the `train/` or `eval/` gin scope, so the two pipelines are
  configured separately. It reads `dataset.train_split` or
  `dataset.eval_split` from `dataset.data_dir`.

  Args:
    dataset: a `dataset_info.DatasetInfo`.
    is_training: bool.
    parser: the `preprocess.Parser` of the split (`estimator.make_parser`;
      serving reuses the eval one).
    unlabeled: optional unlabeled stream (training; a
      `semi_supervised.views.UnlabeledStream`): its batches, built in the
      `unlabeled/` scope, zipped in by its `zip_into`.
  """
  scope = 'train' if is_training else 'eval'
  split = dataset.train_split if is_training else dataset.eval_split

  # AutoGraph would rewrite every parsing and augmentation function from its
  # source at each run's start, seconds of CPU before the first step; the
  # pipeline branches on tensors with tf.cond itself, so nothing needs it.
  @tf.autograph.experimental.do_not_convert
  def build(batch_size, input_context):
    with gin.config_scope(scope):
      labeled = build_dataset(batch_size, parser, dataset.data_dir, split,
                              input_context)
    if unlabeled is None:
      return labeled

    def build_unlabeled(unlabeled_batch_size):
      with gin.config_scope('unlabeled'):
        return build_dataset(unlabeled_batch_size, unlabeled.parser,
                             dataset.data_dir, unlabeled.split, input_context)

    return unlabeled.zip_into(labeled, batch_size, build_unlabeled)

  # TPUEstimator reads this signature: it passes params to a function
  # that names them.
  def input_fn(params, input_context=None):
    return build(params['batch_size'], input_context)

  return input_fn
