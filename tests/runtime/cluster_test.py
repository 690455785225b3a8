"""The TF_CONFIG cluster: roles, the chief, its errors, parameter servers."""

import json
import os
from unittest import mock

from absl.testing import parameterized
import gin
import tensorflow as tf

from official_seg.evaluation import continuous
from official_seg.runtime import cluster
from official_seg.runtime import run_config as run_config_lib
from tests import testing_utils


def _tf_config(task_type, index=0, **jobs):
  cluster_dict = {job: [f'127.0.0.1:{2000 + i}' for i in range(count)]
                  for job, count in jobs.items()}
  return {'TF_CONFIG': json.dumps({'cluster': cluster_dict,
                                   'task': {'type': task_type,
                                            'index': index}})}


class ClusterPlatformTest(testing_utils.TinyDataTestCase):
  """The multi-worker and parameter-server platform files under TF_CONFIG."""

  def setUp(self):
    super().setUp()
    self.model_dir = self.create_tempdir().full_path

  def test_the_evaluator_does_not_build_the_strategy(self):
    testing_utils.parse_tiny_platform(self.data_dir, 'multi_worker.gin')
    with mock.patch.dict(os.environ,
                         _tf_config('evaluator', chief=1, worker=1)):
      config = run_config_lib.build_run_config(self.model_dir)
    self.assertIsNone(config.train_distribute)

  def test_strategy_with_parameter_servers_is_an_error(self):
    testing_utils.parse_tiny_platform(self.data_dir, 'multi_worker.gin')
    with mock.patch.dict(os.environ, _tf_config('chief', chief=1, ps=1)):
      with self.assertRaisesRegex(ValueError, r'"ps".*parameter_server\.gin'):
        run_config_lib.build_run_config(self.model_dir)

  def test_trainers_without_strategy_or_ps_is_an_error(self):
    testing_utils.parse_tiny_platform(self.data_dir, 'parameter_server.gin')
    with mock.patch.dict(os.environ, _tf_config('chief', chief=1, worker=2)):
      with self.assertRaisesRegex(ValueError,
                                  r'3 training tasks.*multi_worker'):
        run_config_lib.build_run_config(self.model_dir)

  def test_parameter_server_trainers_read_their_own_share(self):
    testing_utils.parse_tiny_platform(self.data_dir, 'parameter_server.gin')
    with mock.patch.dict(os.environ,
                         _tf_config('worker', 1, chief=1, worker=2, ps=1)):
      config = run_config_lib.build_run_config(self.model_dir)
      context = cluster.parameter_server_input_context(config)
      self.assertEqual(list(config.session_config.device_filters),
                       ['/job:ps', '/job:worker/task:1'])
    self.assertEqual((context.num_input_pipelines, context.input_pipeline_id),
                     (3, 2))

  def test_estimator_platforms_get_estimators_own_run_config(self):
    testing_utils.parse_tiny_platform(
        self.data_dir, 'parameter_server.gin',
        extra=['build_run_config.inter_op_threads = 2'])
    with mock.patch.dict(os.environ, _tf_config('chief', chief=1, ps=1)):
      config = run_config_lib.build_run_config(self.model_dir)
    self.assertIs(type(config), tf.estimator.RunConfig)
    # RunConfig's own filters from TF_CONFIG, kept under the thread count.
    self.assertEqual(list(config.session_config.device_filters),
                     ['/job:ps', '/job:chief'])
    self.assertEqual(config.session_config.inter_op_parallelism_threads, 2)
    self.assertTrue(config.session_config.allow_soft_placement)


class RoleTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  @parameterized.parameters(
      ('chief', 'train_and_eval', 'trainer'), ('worker', 'train', 'trainer'),
      ('ps', 'train_and_eval', 'ps'), ('evaluator', 'train', 'evaluator'),
      ('chief', 'eval', None), ('evaluator', 'export', None))
  def test_role_follows_the_task_type(self, task_type, mode, expected):
    with mock.patch.dict(os.environ,
                         _tf_config(task_type, chief=1, worker=1, ps=1)):
      self.assertEqual(cluster.role(mode), expected)

  def test_no_cluster_no_role(self):
    with mock.patch.dict(os.environ):
      os.environ.pop('TF_CONFIG', None)
      self.assertIsNone(cluster.role('train'))
      self.assertTrue(cluster.trains())

  def test_chief(self):
    with mock.patch.dict(os.environ, _tf_config('worker', 0, worker=2)):
      self.assertTrue(cluster.is_chief())
    with mock.patch.dict(os.environ,
                         _tf_config('worker', 0, chief=1, worker=2)):
      self.assertFalse(cluster.is_chief())

  def test_task_outside_its_cluster_names_tf_config(self):
    with mock.patch.dict(os.environ,
                         _tf_config('worker', 3, chief=1, worker=1)):
      with self.assertRaisesRegex(ValueError,
                                  'TF_CONFIG task .worker. index 3'):
        cluster.role('train')

  def test_worker_waiting_for_the_chief_says_so_and_fails(self):
    model_dir = self.create_tempdir().full_path
    with mock.patch.object(cluster, '_CHIEF_WAIT_SECS', 1):
      with self.assertLogs(level='INFO') as logs:
        with self.assertRaisesRegex(
            continuous.CheckpointTimeoutError,
            f'No checkpoint from the chief in {model_dir} '
            'after 1 s; this worker did not train'):
          cluster._wait_for_chief(model_dir)  # pylint: disable=protected-access
    self.assertIn('Waiting up to 1 s for the chief', ''.join(logs.output))

  def test_invalid_json_names_tf_config(self):
    with mock.patch.dict(os.environ, {'TF_CONFIG': '{"cluster": '}):
      with self.assertRaisesRegex(ValueError, 'TF_CONFIG .* not valid JSON'):
        cluster.task()


if __name__ == '__main__':
  tf.test.main()
