"""The shipped palettes against published colours, and custom palettes."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg.data import palettes
from official_seg.runtime import gin_config

# The PASCAL VOC 2012 devkit's colours of its 21 classes (VOClabelcolormap.m).
VOC_COLOURS = (
    (0, 0, 0), (128, 0, 0), (0, 128, 0), (128, 128, 0), (0, 0, 128),
    (128, 0, 128), (0, 128, 128), (128, 128, 128), (64, 0, 0), (192, 0, 0),
    (64, 128, 0), (192, 128, 0), (64, 0, 128), (192, 0, 128), (64, 128, 128),
    (192, 128, 128), (0, 64, 0), (128, 64, 0), (0, 192, 0), (128, 192, 0),
    (0, 64, 128))


class ShippedPaletteTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_pascal_voc_spreads_label_bits_over_rgb(self):
    palette = palettes.get_palette('pascal_voc')
    self.assertAllEqual(palette[:6], [[0, 0, 0], [128, 0, 0], [0, 128, 0],
                                      [128, 128, 0], [0, 0, 128],
                                      [128, 0, 128]])
    self.assertAllEqual(palette[15], [192, 128, 128])  # person
    self.assertAllEqual(palette[255], [224, 224, 192])  # VOC's ignore label
    self.assertLen(np.unique(palette, axis=0), 256)

  def test_pascal_voc_equals_the_devkit_colours(self):
    palette = palettes.pascal_voc_palette()
    self.assertEqual(palette.dtype, np.uint8)
    self.assertEqual(palette.shape, (256, 3))
    self.assertAllEqual(palette[:21], VOC_COLOURS)

  def test_cityscapes_train_id_colours(self):
    palette = palettes.get_palette('cityscapes')
    self.assertAllEqual(palette[0], [128, 64, 128])  # road
    self.assertAllEqual(palette[1], [244, 35, 232])  # sidewalk
    self.assertAllEqual(palette[10], [70, 130, 180])  # sky
    self.assertAllEqual(palette[18], [119, 11, 32])  # bicycle
    self.assertLen(np.unique(palette[:19], axis=0), 19)
    self.assertAllEqual(palette[19:], np.zeros((237, 3)))

  def test_ade20k_colours(self):
    palette = palettes.get_palette('ade20k')
    self.assertAllEqual(palette[:4], [[0, 0, 0], [120, 120, 120],
                                      [180, 120, 120], [6, 230, 230]])
    self.assertAllEqual(palette[150], [92, 0, 255])  # flag
    # 151 listed colours: the first one past them is black again.
    self.assertAllEqual(palette[151], [0, 0, 0])
    self.assertGreater(len(np.unique(palette[:151], axis=0)), 140)

  def test_synthetic_colours(self):
    palette = palettes.get_palette('synthetic')
    self.assertAllEqual(palette[:4], [[0, 0, 0], [255, 215, 0],
                                      [255, 0, 255], [0, 255, 255]])
    self.assertAllEqual(palette[4:], np.zeros((252, 3)))

  def test_unknown_palette_lists_the_known_ones(self):
    with self.assertRaisesRegex(ValueError, "'voc'.*pascal_voc.*cityscapes"):
      palettes.get_palette('voc')

  @parameterized.parameters(*palettes.PALETTE_NAMES)
  def test_each_dataset_gin_file_names_its_palette(self, name):
    info = gin_config.read_dataset([f'datasets/{name}.gin'])
    self.assertEqual(info.palette, name)
    self.assertAllEqual(palettes.resolve(info.palette),
                        palettes.get_palette(name))


class ResolveTest(tf.test.TestCase, parameterized.TestCase):

  def test_none_is_the_pascal_voc_map(self):
    self.assertAllEqual(palettes.resolve(None)[:21], VOC_COLOURS)

  @parameterized.parameters(*palettes.PALETTE_NAMES)
  def test_a_name_is_its_shipped_palette(self, name):
    self.assertAllEqual(palettes.resolve(name), palettes.get_palette(name))

  @parameterized.parameters(list, tuple)
  def test_a_list_colours_its_classes_and_leaves_the_rest_black(self, kind):
    colours = kind([kind([10, 20, 30]), kind([255, 0, 7]), kind([0, 0, 0])])
    palette = palettes.resolve(colours)
    self.assertEqual(palette.dtype, np.uint8)
    self.assertEqual(palette.shape, (256, 3))
    self.assertAllEqual(palette[:3], [[10, 20, 30], [255, 0, 7], [0, 0, 0]])
    self.assertAllEqual(palette[3:], np.zeros((253, 3)))

  def test_256_colours_fill_the_palette(self):
    colours = [[i, 255 - i, i // 2] for i in range(256)]
    self.assertAllEqual(palettes.resolve(colours), colours)

  @parameterized.parameters(
      ([[0, 0]],), ([[0, 0, 256]],), ([[-1, 0, 0]],), ([[0.5, 0, 0]],),
      ([[0, 0, 0]] * 257,), ([],), ([['red', 0, 0]],))
  def test_a_bad_list_is_refused(self, colours):
    with self.assertRaisesRegex(ValueError, r'\[r, g, b\] of integers'):
      palettes.resolve(colours)

  def test_an_unknown_name_is_refused(self):
    with self.assertRaisesRegex(ValueError, 'Unknown palette'):
      palettes.resolve('mine')


class PicturesTest(tf.test.TestCase):

  def test_label_colours_paint_the_ignore_label_white(self):
    colours = palettes.label_colours('cityscapes', 255)
    self.assertAllEqual(colours[:2], [[128, 64, 128], [244, 35, 232]])
    self.assertAllEqual(colours[255], [255, 255, 255])
    self.assertAllEqual(palettes.get_palette('cityscapes')[255], [0, 0, 0])

  def test_large_pictures_are_subsampled(self):
    colours = palettes.label_colours('synthetic', 255)
    labels = np.tile(np.arange(4, dtype=np.int32), [1, 600, 150])
    pictures = self.evaluate(palettes.pictures(
        tf.zeros([1, 600, 600, 3]), tf.constant(labels), tf.constant(labels),
        colours, max_side=256))
    # Stride 3: columns 0, 3, 6, ... are classes 0, 3, 2, 1, 0, ...
    self.assertEqual(pictures['label'].shape, (1, 200, 200, 3))
    self.assertAllEqual(pictures['label'][0, 0, :4],
                        colours[[0, 3, 2, 1]])


  def test_pictures_of_other_channel_counts_are_rgb(self):
    colours = palettes.label_colours('synthetic', 255)
    labels = tf.zeros([1, 2, 2], tf.int32)
    images = np.arange(20, dtype=np.float32).reshape(1, 2, 2, 5)
    five = self.evaluate(palettes.pictures(images, labels, labels, colours))
    first = images[..., :3]
    stretched = (first - first.min()) / (first.max() - first.min()) * 255
    self.assertAllEqual(five['image'], np.round(stretched).astype(np.uint8))
    grey = self.evaluate(palettes.pictures(images[..., :1], labels, labels,
                                           colours))
    self.assertAllEqual(grey['image'][0, :, :, 0], [[0, 85], [170, 255]])
    self.assertAllEqual(grey['image'][..., 1], grey['image'][..., 0])
    self.assertAllEqual(grey['image'][..., 2], grey['image'][..., 0])


if __name__ == '__main__':
  tf.test.main()
