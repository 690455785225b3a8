"""What the dataset tools need to know of a dataset: from its gin macros or flags."""

import collections

import gin

from official_seg.runtime import gin_config

# class_names: tuple of num_classes str; split_sizes: dict of split name to
# its expected number of images (may be empty); data_dir, train_split and
# eval_split: None when not known.
DatasetInfo = collections.namedtuple('DatasetInfo', [
    'num_classes', 'ignore_label', 'class_names', 'split_sizes', 'data_dir',
    'train_split', 'eval_split'])


def make_info(num_classes, ignore_label=255, class_names=None,
              split_sizes=None, data_dir=None, train_split=None,
              eval_split=None):
  """Builds a `DatasetInfo`; class names default to class_0, class_1, ...

  Raises:
    ValueError: the class names do not number `num_classes`, or the labels
      cannot be stored in 8-bit PNGs.
  """
  names = tuple(class_names or (f'class_{i}' for i in range(num_classes)))
  if len(names) != num_classes:
    raise ValueError(f'CLASS_NAMES has {len(names)} names but NUM_CLASSES is '
                     f'{num_classes}; give one name per class.')
  if not 0 <= ignore_label <= 255 or num_classes > 256:
    raise ValueError(
        f'NUM_CLASSES={num_classes}, IGNORE_LABEL={ignore_label}: labels are '
        '8-bit PNGs, so classes and the ignore label must lie in 0-255.')
  return DatasetInfo(num_classes, ignore_label, names, dict(split_sizes or {}),
                     data_dir, train_split, eval_split)


def _macro(name, default=None):
  try:
    return gin.query_parameter(f'%{name}')
  except ValueError:
    return default


def from_gin(gin_files, gin_params=()):
  """Reads the dataset macros of gin files (an experiment or a dataset file).

  This replaces the process's gin config (it is cleared first), as the tools
  that call it own their process.

  Args:
    gin_files: list of gin files, as for `gin_config.parse`.
    gin_params: list of binding strings applied after the files.

  Returns:
    A `DatasetInfo` from NUM_CLASSES, IGNORE_LABEL, CLASS_NAMES and, when
    bound, SPLIT_SIZES, DATA_DIR, TRAIN_SPLIT and EVAL_SPLIT.

  Raises:
    ValueError: NUM_CLASSES is not bound by the files; the message names them.
  """
  gin.clear_config()
  gin_config.parse(gin_files, list(gin_params), finalize=False)
  num_classes = _macro('NUM_CLASSES')
  if num_classes is None:
    raise ValueError(f'The gin files {gin_files} do not set NUM_CLASSES; '
                     'include a dataset file such as datasets/pascal_voc.gin.')
  return make_info(num_classes, _macro('IGNORE_LABEL', 255),
                   _macro('CLASS_NAMES'), _macro('SPLIT_SIZES'),
                   _macro('DATA_DIR'), _macro('TRAIN_SPLIT'),
                   _macro('EVAL_SPLIT'))
