"""The one description of a dataset: classes, ignore label, palette, splits, sizes."""

import dataclasses
from typing import Any, Dict, Optional, Sequence

import gin


@gin.configurable
@dataclasses.dataclass(frozen=True)
class DatasetInfo:
  """Facts of one dataset, bound once in gin and handed to whoever needs them.

  `gin/datasets/dataset.gin` binds every field from the dataset macros
  (NUM_CLASSES, CLASS_NAMES, IGNORE_LABEL, DATA_DIR, TRAIN_SPLIT, EVAL_SPLIT,
  SPLIT_SIZES); a dataset file may bind `DatasetInfo.palette` directly.
  Nothing else binds these values: the input pipeline, the model, the loss,
  the metrics and the exports all take them from this object.

  Attributes:
    num_classes: int, classes including background.
    class_names: `num_classes` str; default class_0, class_1, ...
    ignore_label: int, the label value that counts nowhere.
    palette: None (DeepLab's PASCAL colour map), the name of a shipped
      palette ('pascal_voc', 'cityscapes', 'ade20k', 'synthetic'), or a list
      of [r, g, b] per class.
    data_dir: str or None, the folder of the TFRecord shards.
    train_split: str or None, the split training reads.
    eval_split: str or None, the split evaluation reads.
    split_sizes: dict of split name to its expected number of images; the
      dataset tools note a split of another size.
  """

  num_classes: int = gin.REQUIRED
  class_names: Optional[Sequence[str]] = None
  ignore_label: int = 255
  palette: Any = None
  data_dir: Optional[str] = None
  train_split: Optional[str] = None
  eval_split: Optional[str] = None
  split_sizes: Optional[Dict[str, int]] = None

  def __post_init__(self):
    """Fills defaults and checks the facts agree.

    Raises:
      ValueError: the class names do not number `num_classes`, or the labels
        cannot be stored in 8-bit PNGs.
    """
    names = tuple(self.class_names or
                  (f'class_{i}' for i in range(self.num_classes)))
    if len(names) != self.num_classes:
      raise ValueError(f'CLASS_NAMES has {len(names)} names but NUM_CLASSES '
                       f'is {self.num_classes}; give one name per class.')
    if not 0 <= self.ignore_label <= 255 or not 0 < self.num_classes <= 256:
      raise ValueError(
          f'NUM_CLASSES={self.num_classes}, IGNORE_LABEL={self.ignore_label}: '
          'labels are 8-bit PNGs, so classes and the ignore label must lie '
          'in 0-255.')
    # Frozen: the dataclass's own way to set fields in __post_init__.
    object.__setattr__(self, 'class_names', names)
    object.__setattr__(self, 'split_sizes', dict(self.split_sizes or {}))
