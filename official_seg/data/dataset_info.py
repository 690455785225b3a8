"""The one description of a dataset: classes, ignore label, palette, splits, sizes."""

import dataclasses
from typing import Any, Dict, Optional, Sequence

import gin

from official_seg import validation
from official_seg.data import palettes


def _class_names_fit(num_classes, class_names):
  return class_names is None or len(class_names) == num_classes


def _palette_known(palette):
  try:
    palettes.resolve(palette)
  except validation.ConfigurationError:
    return False
  return True


@gin.configurable
@validation.checked(
    num_classes=validation.Expect(
        lambda v: validation.WHOLE_AT_LEAST_0.test(v) and 0 < v <= 256,
        'a whole number from 1 to 256 (labels are 8-bit PNGs)'),
    ignore_label=validation.Expect(
        lambda v: validation.WHOLE_AT_LEAST_0.test(v) and v <= 255,
        'a whole number from 0 to 255 (labels are 8-bit PNGs)'),
    data_dir=validation.Expect(lambda v: isinstance(v, str) and bool(v),
                               'the folder of the TFRecord shards'),
    palette=validation.Expect(
        _palette_known, f'None, one of {palettes.PALETTE_NAMES}, or a list '
        'of [r, g, b] integers in 0-255, one per class'),
    image_channels=validation.Expect(
        lambda v: validation.WHOLE_AT_LEAST_0.test(v) and v >= 1,
        'a whole number of at least 1'),
    image_bit_depth=validation.Expect(lambda v: v in (8, 16), '8 or 16'),
    relations=(validation.Relation(('num_classes', 'class_names'),
                                   _class_names_fit,
                                   'one class name per class'),))
@dataclasses.dataclass(frozen=True)
class DatasetInfo:
  """Facts of one dataset, bound once in gin and handed to whoever needs them.

  `gin/datasets/dataset.gin` binds every field from the dataset macros
  (NUM_CLASSES, CLASS_NAMES, IGNORE_LABEL, DATA_DIR, TRAIN_SPLIT, EVAL_SPLIT,
  SPLIT_SIZES, IMAGE_CHANNELS, IMAGE_BIT_DEPTH); a dataset file may bind `DatasetInfo.palette` directly.
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
    image_channels: int, the channels the images decode to and the model
      reads (the split metadata's `channels`).
    image_bit_depth: 8 or 16, the bits of each stored channel value.
  """

  num_classes: int = gin.REQUIRED
  class_names: Optional[Sequence[str]] = None
  ignore_label: int = 255
  palette: Any = None
  data_dir: Optional[str] = None
  train_split: Optional[str] = None
  eval_split: Optional[str] = None
  split_sizes: Optional[Dict[str, int]] = None
  image_channels: int = 3
  image_bit_depth: int = 8

  def __post_init__(self):
    """Fills defaults and checks the facts agree.

    Raises:
      validation.ConfigurationError: the class names do not number
        `num_classes`, or the labels cannot be stored in 8-bit PNGs.
    """
    given = dataclasses.asdict(self)
    if self.data_dir is None:  # Tools that name no data.
      del given['data_dir']
    validation.check(DatasetInfo, **given)
    names = tuple(self.class_names or
                  (f'class_{i}' for i in range(self.num_classes)))
    # Frozen: the dataclass's own way to set fields in __post_init__.
    object.__setattr__(self, 'class_names', names)
    object.__setattr__(self, 'split_sizes', dict(self.split_sizes or {}))
