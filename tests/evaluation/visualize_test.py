"""Colourised labels, overlays, raw label PNGs and charts."""

import os

from absl.testing import parameterized
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.data import encode
from official_seg.data import palettes
from official_seg.evaluation import results
from official_seg.evaluation import visualize


class ColourTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.labels = rng.integers(0, 19, (7, 9))
    self.labels[0, 0] = 255
    self.image = rng.integers(0, 256, (7, 9, 3)).astype(np.uint8)

  @parameterized.parameters(*palettes.PALETTE_NAMES)
  def test_colorize_uses_the_palette_colours(self, name):
    palette = palettes.get_palette(name)
    colored = visualize.colorize(self.labels, palette)
    self.assertEqual(colored.dtype, np.uint8)
    self.assertEqual(colored.shape, (7, 9, 3))
    for (row, column), label in np.ndenumerate(self.labels):
      self.assertAllEqual(colored[row, column], palette[label])

  def test_colorize_rejects_labels_outside_8_bits(self):
    with self.assertRaisesRegex(ValueError, '0-255.*-1'):
      visualize.colorize(np.array([[0, -1]]), palettes.pascal_voc_palette())

  @parameterized.parameters(0.0, 0.5, 1.0)
  def test_overlay_blends_image_and_colours(self, alpha):
    palette = palettes.get_palette('cityscapes')
    got = visualize.overlay(self.image, self.labels, palette, alpha)
    expected = np.round((1 - alpha) * self.image.astype(np.float64)
                        + alpha * palette[self.labels]).astype(np.uint8)
    self.assertEqual(got.shape, self.image.shape)
    self.assertAllEqual(got, expected)

  def test_overlay_rejects_other_sizes(self):
    with self.assertRaisesRegex(ValueError, r'\(7, 9\).*\(7, 8\)'):
      visualize.overlay(self.image, self.labels[:, :8],
                        palettes.pascal_voc_palette())

  def test_colorize_rejects_labels_above_8_bits(self):
    with self.assertRaisesRegex(ValueError, '0-255.*got 0 to 256'):
      visualize.colorize(np.array([[0, 256]]), palettes.pascal_voc_palette())

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
    visualize.save_class_share_chart([60.0, 30.0, 10.0], names,
                                     os.path.join(folder, 'shares.png'), 'T')
    record = results.record_from_confusion(
        [[5, 1, 0], [2, 7, 0], [0, 0, 0]], [[3, 6], [1, 4], [0, 0]], names,
        2, 3)
    visualize.save_scores_chart(record, os.path.join(folder, 'scores.png'))
    for name in ('cm.png', 'iou.png', 'shares.png', 'scores.png'):
      with Image.open(os.path.join(folder, name)) as image:
        self.assertEqual(image.format, 'PNG')
        self.assertGreater(min(image.size), 200)


if __name__ == '__main__':
  tf.test.main()
