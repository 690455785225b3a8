"""The run config: thread counts over Estimator's defaults, checkpoint and summary cadences."""

import glob
import os
import subprocess
import sys

import gin
import numpy as np
import tensorflow as tf

from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import run_config as run_config_lib
from tests import testing_utils

_TWO_CPUS = "tf.distribute.MirroredStrategy.devices = ['/cpu:0', '/cpu:1']"
# Generous for a shared two-core machine; a run whose all-reduce waits for a
# replica that never comes ends here as a failure instead of blocking.
_MIRRORED_TIMEOUT_SECS = 300
# A ResNet-10 a quarter wide: a two-replica graph (two model copies, an
# all-reduce per gradient and per synchronised batch norm) builds in a
# fraction of the quickstart MobileNetV2's time.
_RESNET10 = ['build_model.backbone = @backbones.ResNet',
             'backbones.ResNet.model_id = 10',
             'backbones.ResNet.depth_multiplier = 0.25']


class RunConfigTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_thread_counts_keep_estimators_session_defaults(self):
    data_dir = self.create_tempdir().full_path
    testing_utils.parse_tiny_quickstart(
        data_dir, extra=['build_run_config.inter_op_threads = 1'])
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    self.assertEqual(config.session_config.inter_op_parallelism_threads, 1)
    self.assertEqual(config.session_config.intra_op_parallelism_threads, 0)
    self.assertTrue(config.session_config.allow_soft_placement)
    testing_utils.parse_tiny_quickstart(
        data_dir, extra=['build_run_config.graph_rewrites = True'])
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    # No session option set: the Estimator's own default session config.
    self.assertIsNone(config.session_config)

  def test_graph_rewrites_off_keeps_estimators_session_defaults(self):
    testing_utils.parse_tiny_quickstart(
        self.create_tempdir().full_path,
        extra=['build_run_config.graph_rewrites = False'])
    session = run_config_lib.build_run_config(
        self.create_tempdir().full_path).session_config
    self.assertTrue(session.graph_options.rewrite_options.disable_meta_optimizer)
    self.assertEqual(session.inter_op_parallelism_threads, 0)
    self.assertTrue(session.allow_soft_placement)

  def _train_trivial(self, bindings, steps=4):
    """Trains a one-variable Estimator `steps` steps; returns its model dir."""
    gin.parse_config(bindings)
    model_dir = self.create_tempdir().full_path
    config = run_config_lib.build_run_config(model_dir)

    def model_fn(features, labels, mode):
      del features, labels  # Unused.
      weight = tf.compat.v1.get_variable('w', initializer=1.0)
      loss = tf.square(weight)
      step = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
          loss, tf.compat.v1.train.get_or_create_global_step())
      return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=step)

    estimator = tf.estimator.Estimator(model_fn, config=config)
    estimator.train(lambda: tf.data.Dataset.from_tensors((0.0, 0.0)).repeat(),
                    max_steps=steps)
    return model_dir

  def _kept_steps(self, model_dir):
    return sorted(int(path.split('-')[-1].split('.')[0]) for path in
                  glob.glob(os.path.join(model_dir, 'model.ckpt-*.index')))

  def test_keep_checkpoint_every_n_hours_keeps_old_checkpoints(self):
    cadence = ['build_run_config.save_checkpoints_steps = 1',
               'build_run_config.keep_checkpoint_max = 1']
    self.assertEqual(self._kept_steps(self._train_trivial(cadence)), [4])
    gin.clear_config()
    # One checkpoint per ~0 hours: every checkpoint is kept beyond the max.
    kept = self._kept_steps(self._train_trivial(
        cadence + ['build_run_config.keep_checkpoint_every_n_hours = 1e-9']))
    self.assertEqual(kept, [0, 1, 2, 3, 4])

  def test_summary_cadence_is_independent_of_checkpoints(self):
    model_dir = self._train_trivial(
        ['build_run_config.save_checkpoints_steps = 4',
         'build_run_config.save_summary_steps = 1'])
    steps = [event.step
             for path in glob.glob(os.path.join(model_dir, 'events.*'))
             for event in tf.compat.v1.train.summary_iterator(path)
             if any(value.tag == 'loss' for value in event.summary.value)]
    self.assertEqual(sorted(steps), [1, 2, 3, 4])
    self.assertEqual(self._kept_steps(model_dir), [0, 4])

  def _graph_files(self, model_dir):
    events = [event for path in glob.glob(os.path.join(model_dir, 'events.*'))
              for event in tf.compat.v1.train.summary_iterator(path)]
    metas = sorted(os.path.basename(path) for path in
                   glob.glob(os.path.join(model_dir, 'model.ckpt-*.meta')))
    return (os.path.exists(os.path.join(model_dir, 'graph.pbtxt')),
            any(event.HasField('graph_def') for event in events), metas)

  def test_save_graph_def_writes_graph_pbtxt_and_metas_or_neither(self):
    cadence = ['build_run_config.save_checkpoints_steps = 2']
    self.assertEqual(
        self._graph_files(self._train_trivial(cadence)),
        (True, True, ['model.ckpt-0.meta', 'model.ckpt-2.meta',
                      'model.ckpt-4.meta']))
    gin.clear_config()
    model_dir = self._train_trivial(
        cadence + ['build_run_config.save_graph_def = False'])
    # The summary writer still records the graph for the Graphs dashboard.
    self.assertEqual(self._graph_files(model_dir), (False, True, []))
    self.assertEqual(self._kept_steps(model_dir), [0, 2, 4])

  def test_session_has_every_cpu_the_strategy_names(self):
    data_dir = self.create_tempdir().full_path
    testing_utils.parse_tiny_platform(data_dir, 'multi_gpu.gin', extra=[
        _TWO_CPUS, 'build_run_config.inter_op_threads = 1'])
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    session = config.session_config
    self.assertEqual(session.device_count['CPU'], 2)
    self.assertEqual(session.inter_op_parallelism_threads, 1)
    self.assertTrue(session.allow_soft_placement)
    # A strategy on CPU:0 alone (or on GPUs) leaves Estimator's default.
    testing_utils.parse_tiny_platform(data_dir, 'multi_gpu.gin', extra=[
        "tf.distribute.MirroredStrategy.devices = ['/cpu:0']",
        'build_run_config.graph_rewrites = True'])
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    self.assertIsNone(config.session_config)

  def test_tpu_run_config_only_for_the_tpu_estimator(self):
    data_dir = self.create_tempdir().full_path
    model_dir = self.create_tempdir().full_path
    testing_utils.parse_tiny_quickstart(data_dir)
    self.assertIs(type(run_config_lib.build_run_config(model_dir)),
                  tf.estimator.RunConfig)
    with self.assertRaisesRegex(ValueError, '--tpu names a TPU, but '
                                'USE_TPU_ESTIMATOR is False'):
      run_config_lib.build_run_config(
          model_dir, run_config_lib.TpuAddress('a-tpu', None, None))
    testing_utils.parse_tiny_platform(data_dir, 'tpu.gin')
    self.assertIsInstance(run_config_lib.build_run_config(model_dir),
                          tf.compat.v1.estimator.tpu.RunConfig)

  def test_estimator_follows_the_run_config(self):
    data_dir = self.create_tempdir().full_path
    testing_utils.parse_tiny_quickstart(data_dir,
                                        extra=['USE_TPU_ESTIMATOR = True'])
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    self.assertIsInstance(estimator_lib.build_estimator(config).estimator,
                          tf.compat.v1.estimator.tpu.TPUEstimator)


class MirroredTrainingTest(testing_utils.TinyDataTestCase):
  """multi_gpu.gin trains through the binary on two CPU devices."""

  def test_binary_trains_with_mirrored_strategy_and_sync_batch_norm(self):
    model_dir = self.create_tempdir().full_path
    bindings = testing_utils.tiny_bindings(self.data_dir, train_steps=3,
                                           extra=[_TWO_CPUS] + _RESNET10)
    command = testing_utils.binary_command(model_dir, bindings, 'train') + [
        '--gin_file=gin/platforms/multi_gpu.gin']
    try:
      proc = subprocess.run(command, cwd=testing_utils.REPO,
                            capture_output=True, text=True,
                            timeout=_MIRRORED_TIMEOUT_SECS, check=False)
    except subprocess.TimeoutExpired as error:  # Killed; output in bytes.
      self.fail(f'No end in {_MIRRORED_TIMEOUT_SECS} s: ' + (
          error.stderr or b'').decode(errors='replace')[-3000:])
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    output = proc.stdout + proc.stderr
    self.assertIn("Using MirroredStrategy with devices ('/job:localhost/"
                  "replica:0/task:0/device:CPU:0', '/job:localhost/replica:0/"
                  "task:0/device:CPU:1')", output)
    self.assertIn('group_size = 2', output)  # The collective all-reduce.
    final = tf.train.load_checkpoint(os.path.join(model_dir, 'model.ckpt-3'))
    first = tf.train.load_checkpoint(os.path.join(model_dir, 'model.ckpt-0'))
    self.assertEqual(final.get_tensor('global_step'), 3)
    names = list(final.get_variable_to_shape_map())
    # Synchronised batch norm updated its statistics, the optimizer the
    # weights; the first replica's host_call wrote the step's summaries.
    for kind in ('moving_mean', 'moving_variance', 'kernel'):
      changed = [name for name in names if name.endswith(kind) and
                 not np.array_equal(final.get_tensor(name),
                                    first.get_tensor(name))]
      self.assertNotEmpty(changed, kind)
    self.assertContainsSubset({'loss/total', 'gradient_norm'},
                              testing_utils.scalar_tags(model_dir))

  def test_merging_all_reduce_cannot_build_sync_batch_norm(self):
    # Why config_checks.strategy_problems refuses this pair: the library run
    # without the binary's checks fails while building the step. Should a
    # TensorFlow build the step, this test fails and the check can go.
    bindings = testing_utils.tiny_bindings(self.data_dir, extra=[
        _TWO_CPUS, 'tf.distribute.MirroredStrategy.cross_device_ops = '
        '@tf.distribute.HierarchicalCopyAllReduce()'] + _RESNET10)
    script = (
        'import sys\n'
        'from official_seg.runtime import experiment, gin_config\n'
        "gin_config.parse(['experiments/quickstart.gin', "
        f"'platforms/multi_gpu.gin'], {bindings!r}, finalize=False)\n"
        'try:\n'
        f"  experiment.run('train', {self.create_tempdir().full_path!r})\n"
        'except Exception as error:  # An autograph StagingError.\n'
        '  print(error, file=sys.stderr)\n'
        '  sys.exit(3)\n')
    proc = subprocess.run([sys.executable, '-c', script],
                          cwd=testing_utils.REPO, capture_output=True,
                          text=True, timeout=_MIRRORED_TIMEOUT_SECS,
                          check=False)
    self.assertEqual(proc.returncode, 3, proc.stderr[-3000:])
    self.assertRegex(proc.stderr,
                     r'Unsuccessful at finding variable \S+/replica_1')


if __name__ == '__main__':
  tf.test.main()
