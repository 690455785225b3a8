"""The shipped datasets' colour masks read against their published colours."""

import gin
import numpy as np
import tensorflow as tf

from official_seg.data import palettes
from official_seg.datasets import colour_masks
from official_seg.datasets import shipped_masks
from official_seg.runtime import gin_config
from tests.data import palettes_test

# cityscapesScripts' labels.py: the colours of the label ids whose train id is
# 255, and the two of them that repeat a class's colour (polegroup is pole's
# grey, license plate car's blue).
_CITYSCAPES_VOID = {
    'unlabeled': (0, 0, 0), 'dynamic': (111, 74, 0), 'ground': (81, 0, 81),
    'parking': (250, 170, 160), 'rail track': (230, 150, 140),
    'guard rail': (180, 165, 180), 'bridge': (150, 100, 100),
    'tunnel': (150, 120, 90), 'caravan': (0, 0, 90), 'trailer': (0, 0, 110)}


class MaskColoursTest(tf.test.TestCase):
  """What the colours of the shipped datasets' colour masks stand for."""

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def _ids(self, name, rgb):
    info = gin_config.read_dataset([f'datasets/{name}.gin'])
    colours = shipped_masks.mask_colours(name, info)
    self.assertEqual(colours.class_names, info.class_names)
    self.assertEqual(colours.palette, name)
    return colour_masks.to_class_ids(np.array([rgb], np.uint8), colours, 'm')[0]

  def test_pascal_voc_classes_and_border(self):
    self.assertAllEqual(
        self._ids('pascal_voc',
                  list(palettes_test.VOC_COLOURS) + [(224, 224, 192)]),
        list(range(21)) + [255])
    with self.assertRaisesRegex(ValueError, r'\(1, 2, 3\) in 1 pixels'):
      self._ids('pascal_voc', [(1, 2, 3)])

  def test_cityscapes_train_ids_and_void_colours(self):
    train = palettes.get_palette('cityscapes')[:19].tolist()
    self.assertAllEqual(self._ids('cityscapes', train), range(19))
    self.assertAllEqual(
        self._ids('cityscapes', list(_CITYSCAPES_VOID.values())), [255] * 10)
    # polegroup and license plate read as pole (5) and car (13).
    self.assertAllEqual(
        self._ids('cityscapes', [(153, 153, 153), (0, 0, 142)]), [5, 13])

  def test_ade20k_shared_grey_reads_as_road(self):
    ade = palettes.get_palette('ade20k')[:151]
    ids = self._ids('ade20k', ade.tolist())
    expected = np.arange(151)
    expected[49] = 7  # skyscraper's colour is road's.
    self.assertAllEqual(ids, expected)


if __name__ == '__main__':
  tf.test.main()
