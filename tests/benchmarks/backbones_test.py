"""Tests of the backbone benchmark's FLOPs, timing, ratios and table."""

import time

import gin
import tensorflow as tf
from official.vision.modeling import backbones as garden_backbones

from benchmarks import backbones

_THIN = ['backbones.MobileNet.filter_size_scale = 0.35',
         'decoders.ASPP.num_filters = 8',
         'heads.SegmentationHead.num_filters = 8']


class _OneConv(tf.keras.Model):

  def __init__(self):
    super().__init__()
    self.conv = tf.keras.layers.Conv2D(4, 3, padding='same', use_bias=False)

  def call(self, inputs, training=None):  # pylint: disable=arguments-differ
    del training  # Unused.
    return self.conv(inputs)


def _sleeper(seconds):
  def function(images):
    time.sleep(seconds)
    return images[:1, 0, 0, 0]
  return function


class BackbonesTest(tf.test.TestCase):

  def tearDown(self):
    gin.clear_config()
    super().tearDown()

  def test_flops_of_one_convolution(self):
    model = _OneConv()
    model(tf.zeros([1, 8, 6, 3]))
    # 2 FLOPs per multiply-add: 3x3 taps of 3 channels, per output value.
    self.assertEqual(backbones.count_flops(model, (8, 6)),
                     2 * 3 * 3 * 3 * 4 * 8 * 6)

  def test_images_per_sec_times_each_function(self):
    rates = backbones.images_per_sec(
        {'fast': _sleeper(0.01), 'slow': _sleeper(0.04)},
        tf.zeros([2, 4, 4, 3]), rounds=2, iterations=2)
    # Two images a call; a call takes at least its sleep.
    self.assertLessEqual(rates['fast'], 2 / 0.01)
    self.assertLessEqual(rates['slow'], 2 / 0.04)
    self.assertLess(rates['slow'], rates['fast'])

  def test_ratios_and_table_against_the_reference(self):
    rows = backbones.add_ratios([
        {'file': 'mobilenet_v2.gin', 'backbone_params': 2e6,
         'model_params': 3e6, 'gflops': 2.0, 'images_per_sec': 10.0},
        {'file': 'big.gin', 'backbone_params': 4e7, 'model_params': 4.5e7,
         'gflops': 6.0, 'images_per_sec': 2.5},
        {'file': 'uncounted.gin', 'backbone_params': 1e6,
         'model_params': 2e6, 'gflops': None, 'images_per_sec': 20.0}])
    self.assertEqual([r['speed_ratio'] for r in rows], [1.0, 0.25, 2.0])
    self.assertEqual([r['flops_ratio'] for r in rows], [1.0, 3.0, None])
    lines = backbones.table(rows).splitlines()
    self.assertEqual(lines[3],
                     '| big.gin | 40.00 | 45.00 | 6.00 | 3.00 | 2.50 | 0.25 |')
    self.assertEqual(lines[4],
                     '| uncounted.gin | 1.00 | 2.00 | - | - | 20.00 | 2.00 |')

  def test_measures_the_files_model(self):
    rows = backbones.measure(['mobilenet_v2.gin'], (33, 33), rounds=1,
                             iterations=1, gin_params=_THIN)
    # The file's backbone, built directly from the Model Garden.
    garden = garden_backbones.MobileNet(
        model_id='MobileNetV2', filter_size_scale=0.35, output_stride=16)
    self.assertEqual(rows[0]['backbone_params'], garden.count_params())
    self.assertGreater(rows[0]['model_params'], rows[0]['backbone_params'])
    self.assertGreater(rows[0]['gflops'], 0)
    self.assertGreater(rows[0]['images_per_sec'], 0)

  def test_the_reference_is_shipped(self):
    self.assertIn(backbones.REFERENCE, backbones.backbone_files())


if __name__ == '__main__':
  tf.test.main()
