"""tools/benchmark_tiling.py: its main() in-process on a tiny model and image."""

import json

import tensorflow as tf

from tests import testing_utils
from tests import tool_testing

benchmark_tiling = tool_testing.load('benchmark_tiling')


class BenchmarkTilingTest(tf.test.TestCase):

  def test_reports_pixel_and_time_ratios_of_each_arm(self):
    run = tool_testing.run(
        benchmark_tiling, height=37, width=45, window=17,
        overlaps=['0', '1/3'], blendings=['gaussian'], rounds=2,
        gin_param=testing_utils.tiny_bindings('/nonexistent'))
    self.assertEqual(run.status, 0, run.stderr[-3000:])
    result = json.loads(run.stdout.splitlines()[-1])
    self.assertGreater(result['whole_seconds'], 0)
    # Strides 17 and 17 - 5: 3 x 3 and 3 x 4 windows of 17 x 17 pixels
    # over 37 x 45.
    pixels = {'overlap=0,gaussian': 9 * 17 * 17 / (37 * 45),
              'overlap=1/3,gaussian': 12 * 17 * 17 / (37 * 45)}
    self.assertCountEqual(result['windowed'], pixels)
    for name, row in result['windowed'].items():
      self.assertAllClose(row['pixel_ratio'], pixels[name])
      self.assertLen(row['paired_ratios'], 2)
      self.assertAllClose(row['time_ratio'],
                          sum(row['paired_ratios']) / 2)
      self.assertAllClose(row['over_pixels'],
                          row['time_ratio'] / pixels[name])
      self.assertIn(f'{name}: pixel_ratio {pixels[name]:.3f}', run.stdout)

  def test_a_window_larger_than_the_image_is_one_window(self):
    self.assertEqual(benchmark_tiling.pixel_ratio((10, 12), 17, 12), 1.0)
    self.assertEqual(benchmark_tiling.stride(513, '1/3'), 342)


if __name__ == '__main__':
  tf.test.main()
