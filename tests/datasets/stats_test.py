"""Tests for dataset statistics, class weights and the report."""

import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import encode
from official_seg.data import preprocess
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



class ChannelStatisticsTest(tf.test.TestCase):
  """Each channel's mean and deviation, in 8-bit units, written as gin."""

  def setUp(self):
    super().setUp()
    gin.clear_config()
    rng = np.random.default_rng(4)
    self.data_dir = self.create_tempdir().full_path
    self.images = [rng.integers(0, 4096, size + (5,)).astype(np.uint16)
                   for size in ((4, 6), (3, 2))]
    self.images[1][..., 4] = 7  # Spread only by the other image.
    examples = []
    for index, pixels in enumerate(self.images):
      stored = encode.stored_pixels(pixels, 'x')
      label = tf.io.encode_png(np.zeros(pixels.shape[:2] + (1,), np.uint8))
      examples.append(tfexample.make_example(
          stored.data, label.numpy(), f'{index}', stored.image_format,
          stored.height, stored.width, stored.channels))
    tfexample.write_shards(examples, self.data_dir, 'train', 2)

  def test_statistics_equal_numpys_over_all_pixels(self):
    mean, std = stats.channel_statistics(self.data_dir, 'train', 5, 16)
    pixels = np.concatenate([p.reshape(-1, 5) for p in self.images]) * (
        255 / 65535)
    self.assertAllClose(mean, pixels.mean(0), rtol=1e-12)
    self.assertAllClose(std, pixels.std(0), rtol=1e-9)

  def test_gin_text_binds_the_parsers_normalization(self):
    text = stats.normalization_gin([1.0, 2.5], [0.5, 0.0], "split 'train'")
    gin.parse_config(text)
    parser = preprocess.Parser(is_training=False, ignore_label=IGNORE,
                               crop_size=(1, 1), image_channels=2)
    normalized = parser.normalize(tf.constant([[[2.0, 3.5]]]))
    # The deviation of a constant channel becomes 1.
    self.assertAllClose(normalized, [[[2.0, 1.0]]])


if __name__ == '__main__':
  tf.test.main()
