"""SIGTERM sent to real trainer and evaluator processes: save or abandon, exit 143, resume."""

import json
import os
import re
import signal
import subprocess
import time

import tensorflow as tf

from official_seg import command_line
from tests import testing_utils

_TIMEOUT = testing_utils.BINARY_TIMEOUT_SECS
# The step in progress, a checkpoint save and the exit; generous for a
# loaded 2-core machine.
_GRACE_SECS = 60
_PREEMPTED = re.compile(
    r'Preempted: SIGTERM at global step (\d+); saved checkpoint (\S+)\.')


def _start(model_dir, bindings, mode):
  return subprocess.Popen(
      testing_utils.binary_command(model_dir, bindings, mode),
      cwd=testing_utils.REPO, stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE, text=True, start_new_session=True)


def _terminate_after(proc, pattern):
  """Reads the log until `pattern`, sends SIGTERM, returns (log, seconds)."""
  lines = []
  for line in proc.stderr:
    lines.append(line)
    if re.search(pattern, line):
      break
  else:
    raise AssertionError('The process ended before ' + pattern + ':\n'
                         + ''.join(lines[-30:]))
  sent = time.monotonic()
  os.kill(proc.pid, signal.SIGTERM)
  lines.append(proc.stderr.read())
  proc.wait(timeout=_TIMEOUT)
  return ''.join(lines), time.monotonic() - sent


def _records(model_dir):
  path = os.path.join(model_dir, 'eval', 'metrics.jsonl')
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f]  # A cut line would fail here.


def _kept_steps(model_dir):
  state = tf.train.get_checkpoint_state(model_dir)
  return sorted(int(p.rsplit('-', 1)[1])
                for p in state.all_model_checkpoint_paths)


class PreemptionTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.data_dir = self.create_tempdir().full_path
    testing_utils.write_tiny_dataset(self.data_dir, num_train=6, num_val=3)
    self.model_dir = os.path.join(self.create_tempdir().full_path, 'model')

  def _bindings(self, train_steps, save_steps):
    return testing_utils.tiny_bindings(self.data_dir, train_steps, extra=[
        'build_run_config.keep_checkpoint_max = 20', 'run.throttle_secs = 0',
        f'build_run_config.save_checkpoints_steps = {save_steps}'])

  def test_trainer_and_evaluator_exit_143_and_the_rerun_ends_at_the_last_step(
      self):
    # No periodic checkpoint, so no evaluation, before the last step: the
    # SIGTERM lands in training.
    bindings = self._bindings(20, save_steps=100)
    trainer = _start(self.model_dir, bindings, 'train_and_eval')
    log, seconds = _terminate_after(trainer, r'loss = .*, step = 2\b')

    self.assertEqual(trainer.returncode, command_line.PREEMPTED, log[-3000:])
    self.assertLess(seconds, _GRACE_SECS)
    match = _PREEMPTED.search(log)
    self.assertIsNotNone(match, log[-3000:])
    step, checkpoint = int(match.group(1)), match.group(2)
    self.assertBetween(step, 3, 19)  # After step 2's log line, before the end.
    self.assertEqual(checkpoint,
                     os.path.join(self.model_dir, f'model.ckpt-{step}'))
    self.assertEqual(tf.train.latest_checkpoint(self.model_dir), checkpoint)
    reader = tf.train.load_checkpoint(checkpoint)
    self.assertEqual(reader.get_tensor('global_step'), step)
    self.assertIn('run the same command again to resume', log)

    # An evaluator preempted in its first evaluation (of step 0) records
    # nothing of it, or the whole record if the evaluation had just ended.
    evaluator = _start(self.model_dir, bindings, 'continuous_eval')
    log, seconds = _terminate_after(evaluator, r'Starting evaluation at')
    self.assertEqual(evaluator.returncode, command_line.PREEMPTED, log[-3000:])
    self.assertLess(seconds, _GRACE_SECS)
    self.assertIn('Preempted: SIGTERM during an evaluation', log)
    self.assertIn([r['global_step'] for r in _records(self.model_dir)],
                  ([], [0]))

    rerun = testing_utils.run_binary(self.model_dir, bindings)
    self.assertEqual(rerun.returncode, 0, rerun.stderr[-3000:])
    self.assertIn(f'Restoring parameters from {checkpoint}', rerun.stderr)
    self.assertEqual(tf.train.latest_checkpoint(self.model_dir),
                     os.path.join(self.model_dir, 'model.ckpt-20'))
    # In step order, each kept checkpoint once; step 0 only if the preempted
    # evaluator had recorded it (train_and_eval never evaluates it).
    steps = [r['global_step'] for r in _records(self.model_dir)]
    self.assertEqual(steps, sorted(set(steps)))
    self.assertEqual([s for s in steps if s],
                     [s for s in _kept_steps(self.model_dir) if s])
    self.assertContainsSubset({step, 20}, steps)

  def test_waiting_evaluator_exits_at_once(self):
    evaluator = _start(self.model_dir, self._bindings(10, 5),
                       'continuous_eval')
    log, seconds = _terminate_after(evaluator, r'Waiting for new checkpoint')
    self.assertEqual(evaluator.returncode, command_line.PREEMPTED, log[-3000:])
    self.assertLess(seconds, _GRACE_SECS)
    self.assertIn('Preempted: SIGTERM outside any training or evaluation',
                  log)
    self.assertEqual(_records(self.model_dir), [])


if __name__ == '__main__':
  tf.test.main()
