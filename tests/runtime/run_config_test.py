"""The run config's session: thread counts over Estimator's defaults."""

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
