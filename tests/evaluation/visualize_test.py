"""Palettes, colourised labels, overlays, raw label PNGs and charts."""

import os

from absl.testing import parameterized
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.data import encode
from official_seg.evaluation import visualize


class PaletteTest(tf.test.TestCase, parameterized.TestCase):

  def test_pascal_voc_spreads_label_bits_over_rgb(self):
    palette = visualize.get_palette('pascal_voc')
    self.assertAllEqual(palette[:6], [[0, 0, 0], [128, 0, 0], [0, 128, 0],
                                      [128, 128, 0], [0, 0, 128],
                                      [128, 0, 128]])
    self.assertAllEqual(palette[15], [192, 128, 128])  # person
    self.assertAllEqual(palette[255], [224, 224, 192])  # VOC's ignore label
    self.assertLen(np.unique(palette, axis=0), 256)

  def test_cityscapes_train_id_colours(self):
    palette = visualize.get_palette('cityscapes')
    self.assertAllEqual(palette[0], [128, 64, 128])  # road
    self.assertAllEqual(palette[1], [244, 35, 232])  # sidewalk
    self.assertAllEqual(palette[10], [70, 130, 180])  # sky
    self.assertAllEqual(palette[18], [119, 11, 32])  # bicycle
    self.assertLen(np.unique(palette[:19], axis=0), 19)
    self.assertAllEqual(palette[19:], np.zeros((237, 3)))

  def test_ade20k_colours(self):
    palette = visualize.get_palette('ade20k')
    self.assertAllEqual(palette[:4], [[0, 0, 0], [120, 120, 120],
                                      [180, 120, 120], [6, 230, 230]])
    self.assertAllEqual(palette[150], [92, 0, 255])  # flag
    # 151 listed colours: the first one past them is black again.
    self.assertAllEqual(palette[151], [0, 0, 0])
    self.assertGreater(len(np.unique(palette[:151], axis=0)), 140)

  def test_unknown_palette_lists_the_known_ones(self):
    with self.assertRaisesRegex(ValueError, "'voc'.*pascal_voc.*cityscapes"):
      visualize.get_palette('voc')


class ColourTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.labels = rng.integers(0, 19, (7, 9))
    self.labels[0, 0] = 255
    self.image = rng.integers(0, 256, (7, 9, 3)).astype(np.uint8)

  @parameterized.parameters(*visualize.PALETTE_NAMES)
  def test_colorize_uses_the_palette_colours(self, name):
    palette = visualize.get_palette(name)
    colored = visualize.colorize(self.labels, palette)
    self.assertEqual(colored.dtype, np.uint8)
    self.assertEqual(colored.shape, (7, 9, 3))
    for (row, column), label in np.ndenumerate(self.labels):
      self.assertAllEqual(colored[row, column], palette[label])

  def test_colorize_rejects_labels_outside_8_bits(self):
    with self.assertRaisesRegex(ValueError, '0-255.*-1'):
      visualize.colorize(np.array([[0, -1]]), visualize.pascal_voc_palette())

  @parameterized.parameters(0.0, 0.5, 1.0)
  def test_overlay_blends_image_and_colours(self, alpha):
    palette = visualize.get_palette('cityscapes')
    got = visualize.overlay(self.image, self.labels, palette, alpha)
    expected = np.round((1 - alpha) * self.image.astype(np.float64)
                        + alpha * palette[self.labels]).astype(np.uint8)
    self.assertEqual(got.shape, self.image.shape)
    self.assertAllEqual(got, expected)

  def test_overlay_rejects_other_sizes(self):
    with self.assertRaisesRegex(ValueError, r'\(7, 9\).*\(7, 8\)'):
      visualize.overlay(self.image, self.labels[:, :8],
                        visualize.pascal_voc_palette())

  def test_raw_label_png_round_trips_class_ids(self):
    path = os.path.join(self.create_tempdir().full_path, 'labels.png')
    labels = np.arange(7 * 9).reshape(7, 9) * 4 % 256
    visualize.write_label_png(path, labels)
    with Image.open(path) as image:
      self.assertEqual(image.mode, 'L')
      self.assertEqual(image.size, (9, 7))
    self.assertAllEqual(encode.read_label(path), labels)
    decoded = tf.io.decode_png(tf.io.read_file(path)).numpy()
    self.assertAllEqual(decoded[..., 0], labels)

  def test_rgb_png_keeps_colours(self):
    path = os.path.join(self.create_tempdir().full_path, 'colored.png')
    visualize.write_rgb_png(path, self.image)
    with Image.open(path) as image:
      self.assertAllEqual(np.asarray(image.convert('RGB')), self.image)

  def test_charts_are_written(self):
    folder = self.create_tempdir().full_path
    names = ['background', 'disk', 'box']
    visualize.save_confusion_heatmap([[5, 1, 0], [2, 7, 0], [0, 0, 0]], names,
                                     os.path.join(folder, 'cm.png'), 'title')
    visualize.save_iou_chart({'background': 0.5, 'disk': 0.7, 'box': None},
                             0.6, os.path.join(folder, 'iou.png'))
    for name in ('cm.png', 'iou.png'):
      with Image.open(os.path.join(folder, name)) as image:
        self.assertEqual(image.format, 'PNG')
        self.assertGreater(min(image.size), 200)


if __name__ == '__main__':
  tf.test.main()
