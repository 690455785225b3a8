"""Real local clusters of the binary on 127.0.0.1 through launch_local_cluster."""

import contextlib
import glob
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf

from official_seg.commands import launch_local_cluster as launcher
from tests import testing_utils

_REPO = testing_utils.REPO
# The launcher stops its cluster after _CLUSTER_SECS; the test stops the
# launcher (and, failing that, every task it started) after _TEST_SECS.
# Synchronised batch norm on two trainers took about 4 minutes on a busy
# 2-core machine.
_CLUSTER_SECS = 420
_TEST_SECS = 480
_TRAIN_STEPS = 2
# One synchronous step already all-reduces the loss, the gradients and the
# batch-norm statistics of both workers.
_SYNC_TRAIN_STEPS = 1


def _kill_group(pid):
  with contextlib.suppress(ProcessLookupError):
    os.killpg(pid, signal.SIGKILL)


def _stop(process):
  """Stops a launcher that overran: SIGTERM (it stops its tasks), then SIGKILL.

  Returns:
    The launcher's output.
  """
  process.send_signal(signal.SIGTERM)
  try:
    output, _ = process.communicate(timeout=30)
  except subprocess.TimeoutExpired:
    _kill_group(process.pid)
    output, _ = process.communicate()
  # Whatever tasks the launcher could not stop.
  for pid in re.findall(r'\(pid (\d+)\)', output):
    _kill_group(int(pid))
  return output


def _run_cluster(model_dir, platform, bindings, *launcher_args, layers=()):
  """Runs the quickstart on a local cluster; returns (status, output).

  `layers` are more gin files, after the platform's.
  """
  command = [sys.executable, '-m', launcher.__name__,
             '--gin_file=gin/experiments/quickstart.gin',
             f'--gin_file=gin/platforms/{platform}',
             *[f'--gin_file=gin/{layer}' for layer in layers],
             f'--model_dir={model_dir}', f'--timeout_secs={_CLUSTER_SECS}',
             *launcher_args] + [f'--gin_param={b}' for b in bindings]
  process = subprocess.Popen(command, cwd=_REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             errors='replace', start_new_session=True)
  try:
    output, _ = process.communicate(timeout=_TEST_SECS)
  except subprocess.TimeoutExpired:
    raise AssertionError('The cluster overran its time:\n' +
                         _stop(process)[-5000:]) from None
  return process.returncode, output


def _checkpoint_steps(model_dir):
  state = tf.train.get_checkpoint_state(model_dir)
  return sorted(int(path.rsplit('-', 1)[1])
                for path in state.all_model_checkpoint_paths)


# Weight averaging under both strategies: it has broken under Estimator
# strategies before. The decay keeps an average visibly apart from its weight.
_AVERAGING = 'ModelFnOptions.moving_average_decay = 0.5'
_KERNEL = 'segmentation_output/kernel'


def _kernel_and_average(model_dir):
  """The head's kernel and its moving average in the latest checkpoint."""
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
  name, = [key for key in reader.get_variable_to_shape_map()
           if key.endswith(_KERNEL)]
  return (reader.get_tensor(name),
          reader.get_tensor(name + '/ExponentialMovingAverage'))


def _task_lines(output, task, pattern):
  return re.findall(rf'^\[{re.escape(task)}\] .*{pattern}.*$', output,
                    re.MULTILINE)


class LocalClusterTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # One dataset for both clusters.
    cls.data_dir = tempfile.mkdtemp()
    testing_utils.write_tiny_dataset(cls.data_dir, num_train=6, num_val=5)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.data_dir, ignore_errors=True)
    super().tearDownClass()

  def _bindings(self, extra=(), train_steps=_TRAIN_STEPS):
    return testing_utils.tiny_bindings(
        self.data_dir, train_steps,
        extra=['continuous_eval.min_interval_secs = 1'] + list(extra))

  def _assert_all_exited_zero(self, status, output, tasks):
    # The launcher's own lines and each task's first error lines, then the
    # tail: a failing task's cause may lie far above the others' last logs.
    said = [line for line in output.splitlines() if
            line.startswith('[launcher]') or re.search(
                r'Error|error:|exited with status [1-9]', line)]
    self.assertEqual(status, 0, '\n'.join(said[:60]) + '\n...\n' +
                     output[-3000:])
    for task in tasks:
      self.assertIn(f'[launcher] {task} exited with status 0.', output)

  def test_parameter_servers_chief_worker_and_evaluator(self):
    model_dir = os.path.join(self.create_tempdir().full_path, 'model')
    # Checkpoints at the start and the end only: asynchronous trainers may
    # pass TRAIN_STEPS by a step each, so a periodic checkpoint at
    # TRAIN_STEPS could precede the final one, and the evaluator stops after
    # the first checkpoint at or past TRAIN_STEPS.
    status, output = _run_cluster(
        model_dir, 'parameter_server.gin',
        self._bindings(['build_run_config.save_checkpoints_steps = 1000',
                        _AVERAGING]),
        '--workers=1', '--ps=1', '--evaluator')
    self._assert_all_exited_zero(
        status, output, ['ps:0', 'chief:0', 'worker:0', 'evaluator:0'])
    self.assertNotEmpty(_task_lines(output, 'ps:0', 'All 2 trainers finished'))

    final = _checkpoint_steps(model_dir)[-1]
    # Each trainer but the last to stop may add one step past TRAIN_STEPS.
    self.assertBetween(final, _TRAIN_STEPS, _TRAIN_STEPS + 1)
    records = testing_utils.eval_records(model_dir)
    steps = [record['global_step'] for record in records]
    self.assertIn(final, steps)
    self.assertLen(steps, len(set(steps)))
    self.assertEqual(records[-1]['num_images'], 5)
    self.assertEqual({r['weights'] for r in records}, {'moving_average'})
    kernel, average = _kernel_and_average(model_dir)
    self.assertNotAllClose(kernel, average)
    self.assertLen(glob.glob(os.path.join(model_dir, '*.tfevents.*.v2')), 1)
    # Only the evaluator evaluated.
    for task in ('chief:0', 'worker:0'):
      self.assertEmpty(_task_lines(output, task, 'Evaluation at step'))

  def test_two_workers_under_multi_worker_mirrored_strategy(self):
    model_dir = os.path.join(self.create_tempdir().full_path, 'model')
    # As multi_worker.gin ships: synchronised batch norm on; with averaging,
    # and semi-supervised (PseudoSeg's unlabeled stream, classifier and
    # refinement): one cluster covers both.
    status, output = _run_cluster(
        model_dir, 'multi_worker.gin',
        self._bindings([_AVERAGING, "UNLABELED_SPLIT = 'train'"],
                       _SYNC_TRAIN_STEPS),
        '--workers=1', layers=['semi_supervised/pseudoseg.gin'])
    self._assert_all_exited_zero(status, output, ['chief:0', 'worker:0'])
    self.assertEqual(_checkpoint_steps(model_dir)[-1], _SYNC_TRAIN_STEPS)
    # Training summaries come from the chief alone.
    self.assertLen(glob.glob(os.path.join(model_dir, '*.tfevents.*.v2')), 1)
    # One synchronous step for both: the same all-reduced loss.
    losses = [re.search(r'Loss for final step: (\S+)', line).group(1)
              for task in ('chief:0', 'worker:0')
              for line in _task_lines(output, task, 'Loss for final step')]
    self.assertLen(losses, 2)
    self.assertEqual(losses[0], losses[1])
    kernel, average = _kernel_and_average(model_dir)
    self.assertNotAllClose(kernel, average)
    for task in ('chief:0', 'worker:0'):
      self.assertNotEmpty(_task_lines(output, task,
                                      'All 2 trainers finished'))
    self.assertIn('semi/consistency_loss',
                  testing_utils.scalar_tags(model_dir))
    # The worker's own copy (tmp_worker_0) of the batch-norm statistics is
    # the chief's: both were computed over the global batch, of which each
    # worker read a different half.
    chief = tf.train.load_checkpoint(model_dir)
    worker = tf.train.load_checkpoint(
        tf.train.latest_checkpoint(os.path.join(model_dir, 'tmp_worker_0')))
    names = [name for name in chief.get_variable_to_shape_map()
             if re.search(r'moving_(mean|variance)$', name)]
    self.assertNotEmpty(names)
    for name in names:
      self.assertAllClose(worker.get_tensor(name), chief.get_tensor(name),
                          rtol=1e-5, atol=1e-6, msg=name)
    # They trained: no moving variance is still at its initial 1.
    for name in names:
      if name.endswith('variance'):
        value = chief.get_tensor(name)
        self.assertNotAllClose(value, np.ones_like(value), msg=name)


class LauncherTest(tf.test.TestCase):

  def test_tf_configs(self):
    configs = dict(launcher.tf_configs(2, 1, True, [1001, 1002, 1003, 1004]))
    self.assertEqual(list(configs),
                     ['ps:0', 'chief:0', 'worker:0', 'worker:1',
                      'evaluator:0'])
    cluster = {'chief': ['127.0.0.1:1001'],
               'worker': ['127.0.0.1:1002', '127.0.0.1:1003'],
               'ps': ['127.0.0.1:1004']}
    for config in configs.values():
      self.assertEqual(config['cluster'], cluster)
    self.assertEqual(configs['worker:1']['task'],
                     {'type': 'worker', 'index': 1})
    self.assertEqual(configs['evaluator:0']['task'],
                     {'type': 'evaluator', 'index': 0})

  def test_free_ports_are_distinct(self):
    ports = launcher.free_ports(5)
    self.assertLen(set(ports), 5)

  def test_arguments_after_the_separator_go_to_every_task(self):
    args, extra = launcher.parse_args(
        ['--model_dir=/m', '--workers', '2', '--gin_file=a.gin',
         '--gin_file', 'b.gin', '--', '--dry_run'])
    command = launcher.task_command(args, extra)
    self.assertEqual(command[1:], [
        '-m', 'official_seg.train_and_eval', '--model_dir=/m',
        '--mode=train_and_eval', '--gin_file=a.gin', '--gin_file=b.gin',
        '--dry_run'])
    self.assertEqual(args.workers, 2)

  def _run(self, tasks, timeout_secs):
    """Runs (name, python code) tasks; returns (status, exit codes, output)."""
    cluster = launcher.Cluster()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      try:
        for name, code in tasks:
          cluster.start(name, {'task': {'type': name}},
                        [sys.executable, '-c', code])
        status = cluster.wait(timeout_secs)
      finally:
        cluster.stop(grace_secs=10)
    codes = {name: process.returncode for name, process, _ in cluster.tasks}
    return status, codes, out.getvalue()

  def test_a_failing_task_stops_the_others(self):
    status, codes, output = self._run(
        [('sleeper', 'import time; time.sleep(300)'),
         ('failer', 'import os, sys; print(os.environ["TF_CONFIG"]); '
                    'sys.exit(3)')], timeout_secs=120)
    self.assertEqual(status, 3)
    self.assertEqual(codes, {'sleeper': -signal.SIGTERM, 'failer': 3})
    self.assertIn('[failer] {"task": {"type": "failer"}}\n', output)
    self.assertIn('[launcher] failer exited with status 3.', output)

  def test_timeout_stops_every_task(self):
    status, codes, _ = self._run(
        [('sleeper', 'import time; time.sleep(300)'), ('quick', 'pass')],
        timeout_secs=3)
    self.assertEqual(status, 124)
    self.assertEqual(codes, {'sleeper': -signal.SIGTERM, 'quick': 0})


if __name__ == '__main__':
  tf.test.main()
