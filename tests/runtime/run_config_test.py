"""Tests for batch semantics and estimator construction."""

from absl.testing import parameterized
import gin
import tensorflow as tf

from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import run_config as run_config_lib
from tests import testing_utils


class RunConfigTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((8, 1, 8), (8, 2, 4), (12, 4, 3))
  def test_even_split(self, global_batch, replicas, expected):
    self.assertEqual(estimator_lib.per_replica_batch_size(
        global_batch, replicas, 'TRAIN_BATCH_SIZE'), expected)

  def test_uneven_split_names_both_numbers(self):
    with self.assertRaisesRegex(ValueError,
                                r'TRAIN_BATCH_SIZE=10 .* 4 replicas'):
      estimator_lib.per_replica_batch_size(10, 4, 'TRAIN_BATCH_SIZE')

  def test_estimator_with_a_strategy_checks_the_batch(self):
    data_dir = self.create_tempdir().full_path
    testing_utils.parse_tiny_quickstart(data_dir, extra=[
        'TRAIN_BATCH_SIZE = 3',
        'build_run_config.train_distribute = @tf.distribute.MirroredStrategy()',
        "tf.distribute.MirroredStrategy.devices = ['/cpu:0', '/cpu:1']",
    ])
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    with self.assertRaisesRegex(ValueError, r'=3 .* 2 replicas'):
      estimator_lib.build_estimator(config)

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


if __name__ == '__main__':
  tf.test.main()
