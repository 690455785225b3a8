"""Tests for runner: the one-trainer binary and its plain-argument run()."""

import os
import subprocess
import sys

import tensorflow as tf

from benchmarks import measure
from benchmarks import runner
from tests import testing_utils
from tests import tool_testing

# The binary's module with its flags, which it defines only as a program.
runner_binary = tool_testing.load('runner', 'benchmarks', 'define_binary_flags')


def _runner(args, timeout_secs=300):
  """Runs `python -m benchmarks.runner args` from the repository."""
  return subprocess.run([sys.executable, '-m', 'benchmarks.runner'] + args,
                        cwd=testing_utils.REPO, capture_output=True, text=True,
                        timeout=timeout_secs, check=False)


class RunnerTest(testing_utils.TinyDataTestCase):

  num_train = 8

  def test_unknown_trainer_raises(self):
    with self.assertRaisesRegex(ValueError, "Unknown trainer 'keras'"):
      runner.run('keras', ['experiments/quickstart.gin'], [],
                 self.create_tempdir().full_path, train_steps=2,
                 warmup_steps=1)

  def test_unknown_trainer_of_time_to_miou_raises(self):
    with self.assertRaisesRegex(ValueError, "Unknown trainer 'keras'"):
      runner.run_time_to_miou('keras', [], [], '/tmp/unused', 0.9, 10)

  def test_binary_needs_a_model_dir(self):
    # A process: app.run prints the usage error on stderr and exits.
    process = _runner(['--gin_file=experiments/quickstart.gin'])
    self.assertNotEqual(process.returncode, 0)
    self.assertIn('--model_dir is required', process.stderr)

  def test_binary_prints_the_result_of_its_flags(self):
    model_dir = os.path.join(self.create_tempdir().full_path, 'run')
    params = testing_utils.tiny_bindings(self.data_dir)
    run = tool_testing.run(
        runner_binary, trainer='official_seg',
        gin_file=['gin/experiments/quickstart.gin'], model_dir=model_dir,
        train_steps=3, warmup_steps=1, input_batches=1, eval_batches=2,
        gin_param=params)
    self.assertEqual(run.status, 0, run.stderr[-3000:])
    result = measure.parse_result(run.stdout)
    self.assertEqual(
        (result['trainer'], result['train_steps'], result['batch_size'],
         result['crop_size']), ('official_seg', 3, 2, [33, 33]))
    self.assertTrue(tf.io.gfile.glob(model_dir + '/model.ckpt-3.index'))


if __name__ == '__main__':
  tf.test.main()
