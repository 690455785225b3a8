"""What the colours of the shipped datasets' colour masks stand for."""

from official_seg.data import palettes
from official_seg.datasets import colour_masks

# Colours the shipped datasets' own colour masks give pixels of no class,
# read as the ignore label: VOC's object borders (its index 255), and the
# Cityscapes colours of the label ids whose train id is 255 (labels.py:
# unlabeled and the other void ids, parking, rail track, guard rail, bridge,
# tunnel, caravan, trailer). Polegroup and license plate share the colours
# of pole and car, so a Cityscapes colour mask reads them as those classes.
_MASK_IGNORE_COLOURS = {
    'pascal_voc': ((224, 224, 192),),
    'cityscapes': (
        (0, 0, 0), (111, 74, 0), (81, 0, 81), (250, 170, 160),
        (230, 150, 140), (180, 165, 180), (150, 100, 100), (150, 120, 90),
        (0, 0, 90), (0, 0, 110)),
}


def mask_colours(name, info):
  """What the colours of a shipped dataset's colour masks stand for.

  The official ADE20K colours give road (7) and skyscraper (49) the same
  grey, (140, 140, 140); a colour mask cannot tell them apart, and it reads
  as road, the first.

  Args:
    name: one of `palettes.PALETTE_NAMES`.
    info: the `DatasetInfo` of `datasets/<name>.gin`: classes, names and
      ignore label.

  Returns:
    A `colour_masks.ColourMap` whose palette is `name`.

  Raises:
    ValueError: an unknown name.
  """
  return colour_masks.colour_map(
      f'palette {name!r}', info.class_names,
      palettes.get_palette(name)[:info.num_classes], info.ignore_label, name,
      _MASK_IGNORE_COLOURS.get(name, ()), shared_colours='first')


class _Classes:
  """Class facts as a `DatasetInfo` names them."""

  def __init__(self, class_names, ignore_label):
    self.class_names = tuple(class_names)
    self.num_classes = len(self.class_names)
    self.ignore_label = ignore_label


def colours_of_classes(palette, class_names, ignore_label):
  """What the colours of colour masks stand for, given a dataset's classes.

  Args:
    palette: a `DatasetInfo.palette` value (None, a name, or a list of
      [r, g, b]), e.g. an export's.
    class_names: N str, class i the i-th.
    ignore_label: int.

  Returns:
    A `colour_masks.ColourMap`: `mask_colours` of a shipped palette's name,
    with the colours its masks give pixels of no class; else class i has
    the i-th colour of `palettes.resolve(palette)`.

  Raises:
    validation.ConfigurationError: `palette` is not a list of colours.
  """
  if isinstance(palette, str) and palette in palettes.PALETTE_NAMES:
    return mask_colours(palette, _Classes(class_names, ignore_label))
  colours = palettes.resolve(palette)[:len(class_names)]
  return colour_masks.colour_map(
      'the palette of the model\'s classes', class_names, colours,
      ignore_label, palette, shared_colours='first')
