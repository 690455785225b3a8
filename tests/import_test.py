"""Importing the package and the Model Garden logs no errors."""

import re
import subprocess
import sys

import tensorflow as tf

# C++ log lines start with their severity letter; Python logs say ERROR.
_ERROR_LINE = re.compile(r'^(E\d{4} |.*\bE external/|.*\bERROR\b|Traceback)', re.M)


class ImportTest(tf.test.TestCase):

  def test_import_logs_no_errors(self):
    proc = subprocess.run(
        [sys.executable, '-c',
         'import official.vision; import official_seg.train_and_eval'],
        capture_output=True, text=True, timeout=300, check=False)
    self.assertEqual(proc.returncode, 0, proc.stderr)
    self.assertIsNone(_ERROR_LINE.search(proc.stderr), proc.stderr)


if __name__ == '__main__':
  tf.test.main()
