"""Checks of a parsed configuration before any work: macros, values, data facts."""

import inspect
import numbers

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.data import input_fn as input_lib
from official_seg.data import split_metadata
from official_seg.runtime import gin_config


# Our error for a user's mistake (exit status 2); its home is at the bottom
# of the package, so that every configurable can raise it.
ConfigurationError = validation.ConfigurationError


def _number(value):
  return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _whole(value):
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


# Macros whose consumers vary with the included files (the schedules) and
# are external configurables (Keras's schedules), which own no checks.
_MACRO_CHECKS = (
    ('BASE_LEARNING_RATE', lambda v: _number(v) and v >= 0, 'a number >= 0'),
    ('WARMUP_STEPS', lambda v: _whole(v) and v >= 0, 'a whole number >= 0'),
    ('SLOW_START_STEPS', lambda v: _whole(v) and v >= 0,
     'a whole number >= 0'),
)
_UNSET = validation.UNSET
# All-reduces that sum every replica's tensors in one op (strategy_problems).
_MERGING_ALL_REDUCES = (tf.distribute.HierarchicalCopyAllReduce,
                        tf.distribute.ReductionToOneDevice)


def _configurables():
  """gin's registered configurables (its registry has no public listing)."""
  registry = gin.config._REGISTRY  # pylint: disable=protected-access
  return [configurable for _, configurable in registry.items()]


def configurable_name(configurable):
  """How gin files name a configurable: 'Parser', 'backbones.MobileNet'."""
  wrapped = configurable.wrapped
  if configurable.module == getattr(wrapped, '__module__', None):
    return configurable.name
  return f'{configurable.module}.{configurable.name}'


def bound_scopes(target):
  """Each gin scope in which `target` has bindings, and what they bind.

  Args:
    target: a configurable's undecorated function or class.

  Returns:
    list of (name, scope, parameters): e.g. ('Parser', 'train',
    {'crop_size'}); scope None for unscoped bindings.
  """
  found = []
  config = gin.config._CONFIG  # pylint: disable=protected-access
  for configurable in _configurables():
    if configurable.wrapped is not target:
      continue
    found += [(configurable_name(configurable), scope or None,
               set(config[(scope, selector)]))
              for scope, selector in sorted(config)
              if selector == configurable.selector]
  return found


def with_parameter(parameter):
  """Names of the configurables that take `parameter`, e.g. 'use_sync_bn'."""
  names = []
  for configurable in _configurables():
    target = configurable.wrapped
    function = target.__init__ if isinstance(target, type) else target
    try:
      parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # A builtin without a signature.
      continue
    if parameter in parameters:
      names.append(configurable_name(configurable))
  return sorted(set(names))


def _name(selector, scope):
  binding = f'{scope}/{selector}' if scope else selector
  macro = gin_config.macro_of(selector, scope)
  return f'{macro} ({binding})' if macro else binding


def _default(target, parameter):
  """The signature default of `parameter`, or UNSET (none, or REQUIRED)."""
  function = target.__init__ if inspect.isclass(target) else target
  default = inspect.signature(function).parameters[parameter].default
  if default in (inspect.Parameter.empty, gin.REQUIRED):
    return _UNSET
  return default


def _bound_values(target, name, scope):
  """What each checked parameter of `target` receives when called in scope."""
  values = {}
  for parameter in validation.checked_parameters(target):
    try:
      values[parameter] = gin_config.binding(
          f'{name}.{parameter}', scope, default=_default(target, parameter))
    except (TypeError, ValueError):  # A macro set nowhere: missing_macros.
      values[parameter] = _UNSET
    if values[parameter] is gin.REQUIRED:  # gin names it when finalizing.
      values[parameter] = _UNSET
  return values


def value_problems():
  """One line per bound value that its configurable's own checks reject.

  Every configurable with checks (`validation.checked`) is checked in each
  gin scope that binds it, with the values its call there would receive.

  Returns:
    list of str: the binding (and the macro it came from), the value given,
    and the form expected.
  """
  lines = []
  for target in validation.checked_targets():
    for name, scope, bound in bound_scopes(target):
      lines += validation.problems(
          target, _bound_values(target, name, scope),
          lambda p, n=name, s=scope: _name(f'{n}.{p}', s), reported=bound)
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
  lines += strategy_problems()
  if lines:
    raise ConfigurationError('\n'.join(lines))


def check_checkpoint(path):
  """Raises `ConfigurationError` if --checkpoint names no checkpoint.

  Args:
    path: the binary's --checkpoint flag, or None (the latest).
  """
  if path and not tf.io.gfile.exists(f'{path}.index'):
    raise ConfigurationError(
        f'--checkpoint={path} names no checkpoint ({path}.index does not '
        'exist): give a prefix such as <model_dir>/model.ckpt-300, or leave '
        'it out for the latest.')


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
  synced = [f'{name}.use_sync_bn'
            for name in with_parameter('use_sync_bn')
            if gin_config.binding(f'{name}.use_sync_bn', default=False)]
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
    ConfigurationError: a split has no shards (the message names the
      pattern), its metadata file is malformed, or the facts contradict
      the configuration.

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
    metadata = split_metadata.read(dataset.data_dir, split)
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


def eval_size_problems(dataset, eval_parser, metadata):
  """One line if the eval crop cannot hold the eval split's largest image.

  Args:
    dataset: the run's `DatasetInfo`.
    eval_parser: the eval `preprocess.Parser`.
    metadata: the eval split's `split_metadata` dict, or None.

  Returns:
    list of str, empty or one line.
  """
  if not metadata or not metadata['num_images']:
    return []
  largest = eval_parser.largest_size(metadata['max_height'],
                                     metadata['max_width'])
  crop = tuple(eval_parser.crop_size)
  # With sliding windows (WINDOW_SIZE) the parser pads larger images.
  if (not largest or eval_parser.pads_larger_images or
      (largest[0] <= crop[0] and largest[1] <= crop[1])):
    return []
  return [f'EVAL_CROP_SIZE (eval/Parser.crop_size) = {list(crop)} is smaller '
          f'than the largest image of split {dataset.eval_split!r}, '
          f'{list(largest)} (height, width): set it to at least '
          f'{[max(a, b) for a, b in zip(crop, largest)]}, or set WINDOW_SIZE '
          '(sliding windows, docs/large_images.md).']


# Channel counts a JPEG or PNG decodes between (grey repeated, alpha dropped).
_CONVERTIBLE = (1, 3, 4)


def image_problems(dataset, split, metadata):
  """One line if a split's images cannot decode as the dataset says.

  Args:
    dataset: the run's `DatasetInfo`.
    split: str, the split's name.
    metadata: its `split_metadata` dict; one without 'channels' (written
      before they were recorded) is not checked.

  Returns:
    list of str, empty or one line.
  """
  if 'channels' not in metadata:
    return []
  stored = (metadata['channels'], metadata['bit_depth'])
  wanted = (dataset.image_channels, dataset.image_bit_depth)
  convertible = {stored[0], wanted[0]} <= set(_CONVERTIBLE)
  if stored[1] == wanted[1] and (stored[0] == wanted[0] or convertible):
    return []
  return [f'IMAGE_CHANNELS = {wanted[0]} and IMAGE_BIT_DEPTH = {wanted[1]}, '
          f'but the images of split {split!r} have {stored[0]} channels of '
          f'{stored[1]} bits; set them so (the dataset gin build_tfrecords '
          'writes does).']


def _bit_mask_problems(dataset, split, seen, label_values):
  """A line if a sigmoid kind's bit-mask labels name a class beyond C."""
  if seen <= label_values:
    return []
  return [f'NUM_CLASSES = {dataset.num_classes}, but the labels of split '
          f'{split!r} hold the bit mask {seen - 1} (IGNORE_LABEL = '
          f'{dataset.ignore_label}): the sigmoid output kind reads bit c as '
          f'class c; set NUM_CLASSES to the mask classes.']


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
    lines += image_problems(dataset, split, metadata)
    seen = split_metadata.num_classes_seen(metadata, dataset.ignore_label)
    if eval_parser.label_values not in (None, dataset.num_classes):
      lines += _bit_mask_problems(dataset, split, seen,
                                  eval_parser.label_values)
    elif seen > dataset.num_classes:
      lines.append(
          f'NUM_CLASSES = {dataset.num_classes}, but the labels of split '
          f'{split!r} go up to class {seen - 1} (IGNORE_LABEL = '
          f'{dataset.ignore_label}); set NUM_CLASSES to at least {seen}.')
  return lines + eval_size_problems(
      dataset, eval_parser, metadata_by_split.get(dataset.eval_split))
