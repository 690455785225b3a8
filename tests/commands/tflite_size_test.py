"""tflite_size on a tiny float32 and int8 pair; a mistake a process."""

import os

import tensorflow as tf

from official_seg.commands import tflite_size
from tests import testing_utils
from tests.commands import command_testing


class TfliteSizeToolTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    model, _ = testing_utils.tiny_conv_model()
    root = self.create_tempdir().full_path
    self.sizes, self.paths = [], []
    for name, int8 in (('f.tflite', False), ('q.tflite', True)):
      content = testing_utils.convert_to_tflite(model, int8=int8)
      self.paths.append(os.path.join(root, name))
      self.sizes.append(len(content))
      with open(self.paths[-1], 'wb') as f:
        f.write(content)

  def test_prints_each_part_and_the_share(self):
    result = command_testing.run(tflite_size, tflite=self.paths)
    self.assertEqual(result.status, 0, result.stderr)
    printed = result.stdout
    share = 100 * self.sizes[1] / self.sizes[0]
    self.assertRegex(printed, rf'share of first\s+100\.0%\s+{share:.1f}%')
    self.assertRegex(printed, rf'total\s+{self.sizes[0]}\s+{self.sizes[1]}')
    self.assertRegex(printed, r'quantization_zero_points\s+0\s+\d+')
    self.assertIn('q.tflite:\nCONV_2D 3x3: 1 layers, 16 output channels',
                  printed)

  def test_a_missing_file_is_named(self):
    # A process: the exit status and stderr of a mistake.
    missing = os.path.join(self.get_temp_dir(), 'absent.tflite')
    result = command_testing.run_process(tflite_size,
                                         tflite=[self.paths[0], missing])
    self.assertEqual(result.returncode, 2, result.stderr)
    self.assertEqual(result.stderr.splitlines()[-2:], [
        'Invalid configuration:', f'--tflite={missing}: no such file.'])


if __name__ == '__main__':
  tf.test.main()
