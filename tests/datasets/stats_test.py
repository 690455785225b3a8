"""Tests for dataset statistics, class weights and the report."""

import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import tfexample
from official_seg.datasets import stats
from official_seg.modeling import losses  # pylint: disable=unused-import

IGNORE = 255


def _write_split(data_dir, labels):
  examples = [tfexample.make_example(
      tf.io.encode_png(np.zeros(label.shape + (3,), np.uint8)).numpy(),
      tf.io.encode_png(label[..., None]).numpy(), f'{i}.png', 'png',
      *label.shape) for i, label in enumerate(labels)]
  tfexample.write_shards(examples, data_dir, 'train', 2)


class StatsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    rng = np.random.default_rng(0)
    self.data_dir = self.create_tempdir().full_path
    self.labels = [rng.choice(np.array(values, np.uint8), size=size)
                   for values, size in (([0, 1, IGNORE], (20, 30)),
                                        ([0, 2], (20, 30)),
                                        ([0, 1, 2], (33, 24)))]
    _write_split(self.data_dir, self.labels)
    self.stats = stats.compute_stats(self.data_dir, 'train', 4, IGNORE)

  def test_counts_match_numpy(self):
    every = np.concatenate([label.ravel() for label in self.labels])
    self.assertEqual(self.stats.num_images, 3)
    self.assertAllEqual(self.stats.class_pixels,
                        np.bincount(every, minlength=256)[:4])
    self.assertEqual(self.stats.ignore_pixels, int((every == IGNORE).sum()))
    valid = [int((label != IGNORE).sum()) for label in self.labels]
    present = [sum(v for v, label in zip(valid, self.labels)
                   if (label == c).any()) for c in range(4)]
    self.assertAllEqual(self.stats.present_pixels, present)
    self.assertEqual(self.stats.sizes, {(20, 30): 2, (33, 24): 1})

  def test_image_labels_are_each_records_values(self):
    self.assertEqual(self.stats.image_labels,
                     {f'{i}.png': sorted(np.unique(label).tolist())
                      for i, label in enumerate(self.labels)})

  def test_median_frequency_weights(self):
    freq = self.stats.class_pixels[:3] / self.stats.present_pixels[:3]
    weights = stats.median_frequency_weights(self.stats)
    self.assertAllClose(weights, list(np.median(freq) / freq) + [1.0])

  def test_ignore_label_that_is_a_class_counts_in_no_class(self):
    ade = stats.compute_stats(self.data_dir, 'train', 3, 0)
    self.assertEqual(ade.class_pixels[0], 0)
    self.assertEqual(ade.ignore_pixels, int(self.stats.class_pixels[0]))
    self.assertEqual(stats.median_frequency_weights(ade)[0], 1.0)

  def test_report_has_gin_snippet_and_histogram(self):
    weights = np.array([0.5, 1.25, 2.0, 1.0])
    text = stats.format_report(self.stats, ['bg', 'a', 'b', 'c'], weights, 'T')
    self.assertIn(
        'segmentation_loss.class_weights = [0.5000, 1.2500, 2.0000, 1.0000]',
        text)
    self.assertIn('  20x30: 2', text)
    self.assertRegex(text, r'0-99\s+3 ###\n')
    # The last line binds the loss's weights as it stands.
    gin.parse_config(text.splitlines()[-1])
    self.assertEqual(gin.query_parameter('segmentation_loss.class_weights'),
                     [0.5, 1.25, 2.0, 1.0])

  def test_label_that_is_not_png_names_the_file(self):
    image = np.zeros((4, 5, 3), np.uint8)
    example = tfexample.make_example(
        tf.io.encode_png(image).numpy(), tf.io.encode_jpeg(image).numpy(),
        'jpeg_label.png', 'png', 4, 5)
    tfexample.write_shards([example], self.data_dir, 'bad', 1)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                '(?s)not a PNG.*jpeg_label.png'):
      stats.compute_stats(self.data_dir, 'bad', 4, IGNORE)

  def test_missing_shards_name_the_pattern(self):
    with self.assertRaisesRegex(validation.MissingFileError,
                                'val-.....-of-.....'):
      stats.compute_stats(self.data_dir, 'val', 4, IGNORE)


if __name__ == '__main__':
  tf.test.main()
