"""Tests for tools/benchmark.py: the flag errors of --time_to_miou."""

import json
import subprocess
import sys

import tensorflow as tf

from tests import testing_utils

# Loads the tool (its flags) and parses each argv, printing the error.
_DRIVER = """
import importlib.util, json, sys
from absl import flags
spec = importlib.util.spec_from_file_location('tool', 'tools/benchmark.py')
spec.loader.exec_module(importlib.util.module_from_spec(spec))
errors = []
for argv in json.loads(sys.argv[1]):
  try:
    flags.FLAGS(['benchmark', '--gin_file=g.gin'] + argv)
    errors.append(None)
  except flags.IllegalFlagValueError as error:
    errors.append(str(error))
  flags.FLAGS.unparse_flags()
print(json.dumps(errors))
"""

_CASES = [
    (['--time_to_miou=1.5'], '--time_to_miou must be a mean IoU in (0, 1]'),
    (['--time_to_miou=0'], '--time_to_miou must be a mean IoU in (0, 1]'),
    (['--time_to_miou=0.9', '--eval_every_steps=0'],
     '--eval_every_steps must be at least 1'),
    (['--time_to_miou=0.9', '--max_steps=0'], '--max_steps must be at least 1'),
    (['--time_to_miou=0.9', '--layer_gin_file=semi_supervised/pseudoseg.gin'],
     '--time_to_miou compares trainers (--peer), not --layer_gin_file'),
    (['--time_to_miou=1', '--eval_every_steps=5', '--max_steps=7', '--peer'],
     None),
]


class BenchmarkFlagsTest(tf.test.TestCase):

  def test_time_to_miou_flag_errors_name_the_flag(self):
    process = subprocess.run(
        [sys.executable, '-c', _DRIVER,
         json.dumps([argv for argv, _ in _CASES])],
        cwd=testing_utils.REPO, capture_output=True, text=True, timeout=300,
        check=False)
    self.assertEqual(process.returncode, 0, process.stderr[-3000:])
    errors = json.loads(process.stdout.splitlines()[-1])
    for (argv, expected), error in zip(_CASES, errors):
      if expected is None:
        self.assertIsNone(error, argv)
      else:
        self.assertIn(expected, error or '', argv)


if __name__ == '__main__':
  tf.test.main()
