"""The run config: thread counts over Estimator's defaults, checkpoint and summary cadences."""

import glob
import os

import gin
import tensorflow as tf

from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import run_config as run_config_lib
from tests import testing_utils


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
    testing_utils.parse_tiny_quickstart(data_dir)
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    # No thread counts: the Estimator's own default session config.
    self.assertIsNone(config.session_config)

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

  def test_estimator_and_run_config_must_agree(self):
    data_dir = self.create_tempdir().full_path
    testing_utils.parse_tiny_quickstart(
        data_dir, extra=['build_estimator.use_tpu_estimator = True'])
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    with self.assertRaisesRegex(ValueError, 'set the macro USE_TPU_ESTIMATOR'):
      estimator_lib.build_estimator(config)


if __name__ == '__main__':
  tf.test.main()
