"""Checks of a parsed configuration before any work: macros, values, data facts."""

import numbers

import tensorflow as tf

from official_seg.data import input_fn as input_lib
from official_seg.data import split_metadata
from official_seg.runtime import cluster
from official_seg.runtime import gin_config


class ConfigurationError(ValueError):
  """A configuration the run cannot use; one line per problem, no traceback."""


def _number(value):
  return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _whole(value):
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _positive_whole(value):
  return _whole(value) and value > 0


def _size(value):
  return (isinstance(value, (list, tuple)) and len(value) == 2
          and all(_positive_whole(v) for v in value))


# (binding, gin scope, test, the form expected). Each names the value a
# configurable receives, so a macro, a direct binding and a default are
# checked alike.
_VALUE_CHECKS = (
    ('run.train_steps', None, _positive_whole, 'a positive whole number'),
    ('build_estimator.train_batch_size', None, _positive_whole,
     'a positive whole number'),
    ('build_estimator.eval_batch_size', None, _positive_whole,
     'a positive whole number'),
    ('Parser.crop_size', 'train', _size,
     'two positive whole numbers, [height, width]'),
    ('Parser.crop_size', 'eval', _size,
     'two positive whole numbers, [height, width]'),
    ('Parser.min_scale_factor', 'train', lambda v: _number(v) and v > 0,
     'a positive number'),
    ('Parser.max_scale_factor', 'train', lambda v: _number(v) and v > 0,
     'a positive number'),
    ('Parser.scale_factor_step_size', 'train', lambda v: _number(v) and v >= 0,
     'a number >= 0'),
    ('DatasetInfo.data_dir', None, lambda v: isinstance(v, str) and v,
     'the folder of the TFRecord shards'),
    ('DatasetInfo.num_classes', None, lambda v: _whole(v) and 0 < v <= 256,
     'a whole number from 1 to 256'),
    ('DatasetInfo.ignore_label', None, lambda v: _whole(v) and 0 <= v <= 255,
     'a whole number from 0 to 255'),
    ('build_run_config.save_checkpoints_steps', None, _positive_whole,
     'a positive whole number'),
    ('build_run_config.keep_checkpoint_max', None,
     lambda v: _whole(v) and v >= 0, 'a whole number >= 0'),
    ('predict_probabilities.eval_scales', None,
     lambda v: isinstance(v, (list, tuple)) and v and all(
         _number(s) and s > 0 for s in v), 'a list of positive numbers'),
)
# Macros whose consumers vary with the included files (the schedules).
_MACRO_CHECKS = (
    ('BASE_LEARNING_RATE', lambda v: _number(v) and v >= 0, 'a number >= 0'),
    ('WARMUP_STEPS', lambda v: _whole(v) and v >= 0, 'a whole number >= 0'),
    ('SLOW_START_STEPS', lambda v: _whole(v) and v >= 0,
     'a whole number >= 0'),
)
_UNSET = object()
# All-reduces that sum every replica's tensors in one op (strategy_problems).
_MERGING_ALL_REDUCES = (tf.distribute.HierarchicalCopyAllReduce,
                        tf.distribute.ReductionToOneDevice)
# Where gin/platforms/sync_batch_norm.gin turns synchronised batch norm on.
_SYNC_BN_BINDINGS = tuple(f'{layer}.use_sync_bn' for layer in (
    'backbones.MobileNet', 'backbones.ResNet', 'backbones.DilatedResNet',
    'decoders.ASPP', 'heads.SegmentationHead'))


def _name(selector, scope):
  binding = f'{scope}/{selector}' if scope else selector
  macro = gin_config.macro_of(selector, scope)
  return f'{macro} ({binding})' if macro else binding


def value_problems():
  """One line per shared macro or common binding of the wrong form.

  Returns:
    list of str: the binding (and the macro it came from), the value given,
    and the form expected.
  """
  lines = []
  for selector, scope, test, form in _VALUE_CHECKS:
    try:
      value = gin_config.binding(selector, scope, default=_UNSET)
    except (TypeError, ValueError):  # A macro set nowhere: see missing_macros.
      continue
    if value is not _UNSET and not test(value):
      lines.append(f'{_name(selector, scope)} = {value!r}: expected {form}.')
  low, high = (gin_config.binding(f'Parser.{side}_scale_factor', 'train',
                                  default=1.0) for side in ('min', 'max'))
  if _number(low) and _number(high) and low > high:
    lines.append(f'train/Parser.min_scale_factor = {low!r} is larger than '
                 f'train/Parser.max_scale_factor = {high!r}: expected '
                 'min <= max.')
  for macro, test, form in _MACRO_CHECKS:
    value = gin_config.macro_value(macro, default=_UNSET)
    if value is not _UNSET and not test(value):
      lines.append(f'{macro} = {value!r}: expected {form}.')
  return lines


def check_configuration(gin_files, gin_params):
  """Raises `ConfigurationError` listing every macro and value problem.

  Args:
    gin_files: the parsed gin files, as given to `gin_config.parse`.
    gin_params: the bindings parsed after them.
  """
  lines = gin_config.missing_macros()
  lines += gin_config.unused_macros(gin_files, gin_params) + value_problems()
  if lines:
    raise ConfigurationError('\n'.join(lines))


def check_platform(tpu, tpu_zone, gcp_project):
  """Raises `ConfigurationError` for a platform without what it needs.

  Args:
    tpu, tpu_zone, gcp_project: the binary's TPU flags (None when unset).
  """
  lines = []
  if not tpu and (tpu_zone or gcp_project):
    lines.append('--tpu_zone or --gcp_project is set but --tpu names no TPU: '
                 'add --tpu=<name> (with gin/platforms/tpu.gin), or drop them.')
  parameter_servers = gin_config.binding(
      'build_run_config.max_worker_delay_secs', default=None) is not None
  if parameter_servers and 'ps' not in cluster.cluster_spec().jobs:
    lines.append('gin/platforms/parameter_server.gin needs a TF_CONFIG '
                 'cluster with "ps" tasks (docs/distributed.md); TF_CONFIG '
                 'names none.')
  lines += strategy_problems()
  if lines:
    raise ConfigurationError('\n'.join(lines))


def strategy_problems():
  """One line if MirroredStrategy's all-reduce cannot serve sync batch norm.

  Synchronised batch norm all-reduces its moments inside the step, under a
  `custom_gradient`. In a graph (Estimator's) that wrapper looks up every
  variable between the all-reduce's inputs and outputs by name; the sums of
  `HierarchicalCopyAllReduce` and `ReductionToOneDevice` read every
  replica's moments, so the lookup reaches the other replicas' variables
  (`.../replica_1`), which are not in the global collection, and building
  the step fails with `Unsuccessful at finding variable`. Collective and
  NCCL all-reduces give each replica an op of its own input.

  Returns:
    list of str: empty, or one line naming both bindings and the way out.
  """
  ops = gin_config.binding('tf.distribute.MirroredStrategy.cross_device_ops',
                           default=None)
  if not isinstance(ops, _MERGING_ALL_REDUCES):
    return []
  synced = [name for name in _SYNC_BN_BINDINGS
            if gin_config.binding(name, default=False)]
  if not synced:
    return []
  return [f'tf.distribute.MirroredStrategy.cross_device_ops = '
          f'{type(ops).__name__}() cannot build a step with synchronised '
          f'batch norm ({_name(synced[0], None)} = True): set '
          'USE_SYNC_BN = False, or keep the default all-reduce '
          '(docs/distributed.md).']


def check_data(dataset, eval_parser, splits):
  """Raises `ConfigurationError` when the split metadata contradicts the run.

  Splits without a metadata file (shards made elsewhere) are logged: the
  dry run computes their facts.

  Raises:
    FileNotFoundError: a split has no shards; the message names the pattern.
    ConfigurationError: the facts contradict the configuration.

  Args:
    dataset: the run's `DatasetInfo`.
    eval_parser: the eval `preprocess.Parser`.
    splits: the split names the run reads.
  """
  known = {}
  for split in sorted(set(splits)):
    # A split with no shards stops here, naming the pattern, not after
    # training has run up to the first evaluation.
    input_lib.list_shards(dataset.data_dir, split)
    try:
      metadata = split_metadata.read(dataset.data_dir, split)
    except ValueError as error:
      raise ConfigurationError(str(error)) from error
    if metadata is None:
      tf.compat.v1.logging.info(
          'No %s beside the shards of split %r: its sizes and labels are '
          'not checked before the run; train_and_eval --dry_run checks them.',
          split_metadata.path(dataset.data_dir, split), split)
    else:
      known[split] = metadata
  lines = data_problems(dataset, eval_parser, known)
  if lines:
    raise ConfigurationError('\n'.join(lines))


def _largest_eval_size(metadata, eval_parser):
  """The largest (height, width) the eval parser makes of the split's images.

  None when the parser resizes without a bound on the longer side, as the
  size then depends on each image's aspect.
  """
  size = (metadata['max_height'], metadata['max_width'])
  min_size, max_size, factor = eval_parser.resize_range
  if min_size is None:
    return size
  if max_size is None:
    return None
  # resize_to_range_size makes the longer side at most max_size, turned into
  # factor * k + 1 downwards, and never rounds a side above it.
  bound = max_size - (max_size - 1) % factor if factor else max_size
  return (bound, bound)


def data_problems(dataset, eval_parser, metadata_by_split):
  """One line per data fact that the configuration contradicts.

  Args:
    dataset: the run's `DatasetInfo`.
    eval_parser: the eval `preprocess.Parser`.
    metadata_by_split: dict of split name to its `split_metadata` dict, for
      the splits whose metadata is known.

  Returns:
    list of str.
  """
  lines = []
  for split, metadata in sorted(metadata_by_split.items()):
    if not metadata['num_images']:
      lines.append(f'split {split!r} in {dataset.data_dir} has no images.')
      continue
    seen = split_metadata.num_classes_seen(metadata, dataset.ignore_label)
    if seen > dataset.num_classes:
      lines.append(
          f'NUM_CLASSES = {dataset.num_classes}, but the labels of split '
          f'{split!r} go up to class {seen - 1} (IGNORE_LABEL = '
          f'{dataset.ignore_label}); set NUM_CLASSES to at least {seen}.')
  metadata = metadata_by_split.get(dataset.eval_split)
  largest = metadata and metadata['num_images'] and _largest_eval_size(
      metadata, eval_parser)
  crop = tuple(eval_parser.crop_size)
  # With sliding windows (WINDOW_SIZE) the parser pads larger images.
  if (largest and not eval_parser.pads_larger_images and
      (largest[0] > crop[0] or largest[1] > crop[1])):
    lines.append(
        f'EVAL_CROP_SIZE (eval/Parser.crop_size) = {list(crop)} is smaller '
        f'than the largest image of split {dataset.eval_split!r}, '
        f'{list(largest)} (height, width): set it to at least '
        f'{[max(a, b) for a, b in zip(crop, largest)]}, or set WINDOW_SIZE '
        '(sliding windows, docs/large_images.md).')
  return lines
