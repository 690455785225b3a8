"""input_fn for Estimator and TPUEstimator: shards to batched (features, labels)."""

import gin
import tensorflow as tf

from official_seg.data import preprocess
from official_seg.data import tfexample

AUTOTUNE = tf.data.AUTOTUNE


def list_shards(data_dir, split):
  """Returns the sorted shard paths of `split`.

  Raises:
    FileNotFoundError: no shard matches; the message names the pattern.
  """
  pattern = tfexample.shard_pattern(data_dir, split)
  files = sorted(tf.io.gfile.glob(pattern))
  if not files:
    raise FileNotFoundError(
        f'No TFRecord shards match {pattern!r} (DATA_DIR={data_dir!r}, '
        f'split {split!r}). Set DATA_DIR with --gin_param="DATA_DIR=\'...\'" '
        'or write the data with tools/make_synthetic_dataset.py or '
        'tools/build_tfrecords.py.')
  return files


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


@gin.configurable(denylist=['batch_size', 'is_training', 'input_context'])
def build_dataset(batch_size,
                  is_training,
                  input_context=None,
                  data_dir=gin.REQUIRED,
                  split=gin.REQUIRED,
                  ignore_label=gin.REQUIRED,
                  shuffle_buffer_size=256,
                  cycle_length=8):
  """Builds the dataset of one split.

  Args:
    batch_size: int, examples per call (the per-replica or per-host batch).
    is_training: bool; training repeats, shuffles and augments, evaluation
      reads each example exactly once and pads the last batch.
    input_context: optional `tf.distribute.InputContext`; shards files per
      input pipeline.
    data_dir: str, folder holding `<split>-NNNNN-of-NNNNN.tfrecord` shards.
    split: str, the split name.
    ignore_label: int, label value that counts nowhere.
    shuffle_buffer_size: int, examples in the shuffle buffer (training).
    cycle_length: int, shards read in parallel.

  Returns:
    A `tf.data.Dataset` of (features, labels) with static shapes.

  Raises:
    FileNotFoundError: no shard of the split exists in `data_dir`.
  """
  files = list_shards(data_dir, split)
  dataset = tf.data.Dataset.from_tensor_slices(files)
  if input_context and input_context.num_input_pipelines > 1:
    dataset = dataset.shard(input_context.num_input_pipelines,
                            input_context.input_pipeline_id)
  if is_training:
    dataset = dataset.shuffle(len(files)).repeat()
  dataset = dataset.interleave(
      tf.data.TFRecordDataset, cycle_length=min(cycle_length, len(files)),
      num_parallel_calls=AUTOTUNE, deterministic=not is_training)
  if is_training:
    dataset = dataset.shuffle(shuffle_buffer_size)
  decoder = tfexample.Decoder()
  parser = preprocess.Parser(is_training=is_training)
  dataset = dataset.map(lambda record: parser(decoder.decode(record)),
                        num_parallel_calls=AUTOTUNE,
                        deterministic=not is_training)
  dataset = dataset.batch(batch_size, drop_remainder=is_training)
  if not is_training:
    dataset = dataset.map(
        lambda f, l: pad_batch(f, l, batch_size, ignore_label))
  return dataset.prefetch(AUTOTUNE)


def make_input_fn(is_training):
  """Returns an input_fn that follows the TPUEstimator contract.

  The returned function reads `params['batch_size']` as the batch of one call
  and builds the dataset inside the `train/` or `eval/` gin scope, so the two
  pipelines are configured separately (split, crop size, augmentation).
  """
  scope = 'train' if is_training else 'eval'

  def input_fn(params, input_context=None):
    with gin.config_scope(scope):
      return build_dataset(params['batch_size'], is_training, input_context)

  return input_fn
