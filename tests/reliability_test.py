"""Faults injected into real processes: kill -9, a crash inside a checkpoint save, NaN."""

import os
import signal
import subprocess
import time

import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import split_metadata
from official_seg.runtime import config_checks
from official_seg.runtime import experiment
from tests import testing_utils

_TIMEOUT = testing_utils.BINARY_TIMEOUT_SECS

# Runs the binary with the checkpoint state update of step 4 replaced by a
# SIGKILL: the files of model.ckpt-4 are written, the state file never says so.
_CRASH_IN_SAVE = '''
import os, signal, sys
from unittest import mock
from tensorflow.python.checkpoint import checkpoint_management
real = checkpoint_management.update_checkpoint_state_internal
def crash(save_dir, model_checkpoint_path, *args, **kwargs):
  if model_checkpoint_path.endswith('-4'):
    os.kill(os.getpid(), signal.SIGKILL)
  return real(save_dir, model_checkpoint_path, *args, **kwargs)
checkpoint_management.update_checkpoint_state_internal = crash
from official_seg import train_and_eval
sys.argv = ['train_and_eval'] + sys.argv[1:]
train_and_eval.run()
'''


def _run(model_dir, bindings, mode='train_and_eval', driver=None):
  return testing_utils.run_binary(model_dir, bindings, mode, driver=driver)


def _steps(model_dir):
  return [r['global_step'] for r in testing_utils.eval_records(model_dir)]


def _kept_steps(model_dir):
  state = tf.train.get_checkpoint_state(model_dir)
  return sorted(int(p.rsplit('-', 1)[1]) for p in state.all_model_checkpoint_paths)


class ReliabilityTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.data_dir = self.create_tempdir().full_path
    testing_utils.write_tiny_dataset(self.data_dir, num_train=6, num_val=3)
    self.model_dir = os.path.join(self.create_tempdir().full_path, 'model')

  def _bindings(self, train_steps, extra=()):
    return testing_utils.tiny_bindings(self.data_dir, train_steps, extra=[
        'build_run_config.keep_checkpoint_max = 20', 'run.throttle_secs = 0',
        *extra])

  def _latest_step(self):
    path = tf.train.latest_checkpoint(self.model_dir)
    return int(path.rsplit('-', 1)[1]) if path else None

  def _kill_9_after_step(self, bindings, step):
    """Starts train_and_eval, SIGKILLs it once checkpoint `step` is listed."""
    proc = subprocess.Popen(
        testing_utils.binary_command(self.model_dir, bindings, 'train_and_eval'),
        cwd=testing_utils.REPO,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    deadline = time.time() + _TIMEOUT
    while ((self._latest_step() or 0) < step and proc.poll() is None
           and time.time() < deadline):
      time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=60)
    self.assertEqual(proc.returncode, -signal.SIGKILL, stderr[-3000:])
    return stderr

  def test_crash_in_a_save_then_kill_9_then_rerun_resumes_each_time(self):
    # Three processes, one model dir: a SIGKILL inside the save of step 4
    # (its files written, the state file not updated), a kill -9 of
    # train_and_eval once a later checkpoint is listed, and a rerun.
    bindings = self._bindings(6)
    crashed = _run(self.model_dir, bindings, mode='train', driver=_CRASH_IN_SAVE)
    self.assertEqual(crashed.returncode, -signal.SIGKILL, crashed.stderr[-3000:])
    self.assertEqual(self._latest_step(), 2)
    # The previous checkpoint loads.
    reader = tf.train.load_checkpoint(os.path.join(self.model_dir, 'model.ckpt-2'))
    self.assertEqual(reader.get_tensor('global_step'), 2)

    # It resumes from step 2, not from the unlisted files of step 4.
    killed = self._kill_9_after_step(bindings, 4)
    self.assertIn('model.ckpt-2', killed)

    rerun = _run(self.model_dir, bindings)
    self.assertEqual(rerun.returncode, 0, rerun.stderr[-3000:])
    self.assertEqual(self._latest_step(), 6)
    steps = _steps(self.model_dir)
    # Every kept checkpoint once and in step order, but for the untrained
    # step-0 one, which train_and_eval does not evaluate.
    self.assertEqual(steps, [s for s in _kept_steps(self.model_dir) if s])

  def test_label_value_of_no_class_names_the_example(self):
    # A failed data check (a tf.debugging.Assert in the input pipeline) as
    # the user meets it: exit 1 and one line naming the example. Shards made
    # elsewhere have no metadata, so the check before the run cannot see it.
    for split in ('train', 'val'):
      os.remove(split_metadata.path(self.data_dir, split))
    failed = _run(self.model_dir, self._bindings(2, _BACKGROUND_ONLY),
                  mode='train')
    self.assertEqual(failed.returncode, 1, failed.stderr[-3000:])
    self.assertRegex(failed.stderr,
                     r'Error: Label map of example synthetic_\d+_\d+\.png has values')
    self.assertNotIn('Traceback', failed.stderr)


# Every synthetic image has at least one shape (class 1-3): declaring
# background only makes every image invalid, whichever ones are read.
_BACKGROUND_ONLY = ('NUM_CLASSES = 1', "CLASS_NAMES = ['background']")


class InProcessFaultsTest(testing_utils.TinyDataTestCase):
  """Faults whose report is the library's: `experiment.run` in this process.

  `command_line` maps these exceptions to the exit status and one line
  (tests/train_and_eval_test.py and the process test above show that path).
  """

  num_train = 6
  num_val = 3

  def setUp(self):
    super().setUp()
    self.model_dir = os.path.join(self.create_tempdir().full_path, 'model')

  def _run(self, train_steps, extra=()):
    testing_utils.parse_tiny_quickstart(self.data_dir, train_steps, extra=[
        'build_run_config.keep_checkpoint_max = 20', *extra])
    return experiment.run('train', self.model_dir)

  def test_nan_loss_stops_naming_the_step_and_keeps_the_last_checkpoint(self):
    testing_utils.copy_trained_tiny_model(self.model_dir, train_steps=3)
    # A zero stddev divides the images by zero: the loss is NaN from here on.
    with self.assertRaises(validation.RunError) as caught:
      self._run(6, ['Parser.stddev_rgb = [0.0, 0.0, 0.0]'])
    self.assertRegex(str(caught.exception),
                     r'^(Loss is|Gradients are) NaN or Inf at global step 3\b')
    latest = tf.train.latest_checkpoint(self.model_dir)
    self.assertEqual(latest, os.path.join(self.model_dir, 'model.ckpt-3'))
    reader = tf.train.load_checkpoint(latest)
    for name in reader.get_variable_to_shape_map():
      value = reader.get_tensor(name)
      if np.issubdtype(np.asarray(value).dtype, np.floating):
        self.assertTrue(np.isfinite(value).all(), name)

  def _corrupt_first_train_shard(self):
    shard = sorted(tf.io.gfile.glob(os.path.join(self.data_dir, 'train-*')))[0]
    data = bytearray(open(shard, 'rb').read())
    data[len(data) // 2] ^= 0xFF
    with open(shard, 'wb') as f:
      f.write(bytes(data))
    return shard

  def test_corrupt_shard_is_named_or_skipped(self):
    shard = self._corrupt_first_train_shard()
    with self.assertRaises(validation.RunError) as caught:
      self._run(2)
    self.assertIn(f'Corrupt TFRecord shard(s): {shard}', str(caught.exception))
    self.assertIn('build_dataset.skip_corrupt = True', str(caught.exception))

    # TensorFlow's C++ runtime reports the skipped record on file descriptor 2.
    with testing_utils.captured_stderr_fd() as stderr:
      self._run(2, ['build_dataset.skip_corrupt = True'])
    self.assertIn('corrupted record', stderr.text)
    self.assertEqual(tf.train.latest_checkpoint(self.model_dir),
                     os.path.join(self.model_dir, 'model.ckpt-2'))

  def test_label_value_of_no_class_is_refused_before_any_work(self):
    # With the writer's metadata, the run stops before building anything.
    with self.assertRaises(config_checks.ConfigurationError) as caught:
      self._run(2, _BACKGROUND_ONLY)
    self.assertIn("NUM_CLASSES = 1, but the labels of split 'train' go up to "
                  'class', str(caught.exception))
    self.assertFalse(tf.io.gfile.exists(
        os.path.join(self.model_dir, 'checkpoint')))

  def test_incompatible_checkpoint_in_model_dir_says_so(self):
    testing_utils.copy_trained_tiny_model(self.model_dir, train_steps=3)
    with self.assertRaises(validation.RunError) as caught:
      self._run(4, [
          'NUM_CLASSES = 5',
          "CLASS_NAMES = ['background', 'disk', 'box', 'triangle', 'star']"])
    message = str(caught.exception)
    self.assertIn('was written by another configuration', message)
    self.assertIn('segmentation_output/kernel (checkpoint [1, 1, 16, 4], '
                  'model [1, 1, 16, 5])', message)
    self.assertIn('new --model_dir', message)
    self.assertIn('INIT_CHECKPOINT', message)


if __name__ == '__main__':
  tf.test.main()
