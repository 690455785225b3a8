"""tools/tflite_size.py on a tiny float32 and int8 pair; a mistake a process."""

import os
import subprocess
import sys

import tensorflow as tf

from tests import testing_utils
from tests import tool_testing

_TOOL = os.path.join(testing_utils.REPO, 'tools', 'tflite_size.py')
tflite_size = tool_testing.load('tflite_size')


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
    result = tool_testing.run(tflite_size, model=self.paths)
    self.assertEqual(result.status, 0, result.stderr)
    printed = result.stdout
    share = 100 * self.sizes[1] / self.sizes[0]
    self.assertRegex(printed, rf'share of first\s+100\.0%\s+{share:.1f}%')
    self.assertRegex(printed, rf'total\s+{self.sizes[0]}\s+{self.sizes[1]}')
    self.assertRegex(printed, r'quantization_zero_points\s+0\s+\d+')
    self.assertIn('q.tflite:\nCONV_2D 3x3: 1 layers, 16 output channels',
                  printed)

  def test_a_missing_file_is_named(self):
    # A process: the exit status and stderr of a usage error.
    missing = os.path.join(self.get_temp_dir(), 'absent.tflite')
    result = subprocess.run(
        [sys.executable, _TOOL, f'--model={self.paths[0]}',
         f'--model={missing}'],
        capture_output=True, text=True, cwd=testing_utils.REPO, check=False)
    self.assertNotEqual(result.returncode, 0)
    self.assertIn(f'--model={missing}: no such file', result.stderr)


if __name__ == '__main__':
  tf.test.main()
