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
