"""The platform gin files: TPUEstimator with bfloat16 off the TPU, strategies, TF_CONFIG roles."""

import json
import os
from unittest import mock

from absl.testing import parameterized
import gin
import tensorflow as tf

from official_seg.data import input_fn as input_lib
from official_seg.runtime import cluster
from official_seg.runtime import gin_config
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.runtime import run_config as run_config_lib
from official_seg.runtime import tpu_estimator
from tests import testing_utils

_TWO_CPUS = "tf.distribute.MirroredStrategy.devices = ['/cpu:0', '/cpu:1']"


def _parse(data_dir, platform, extra=(), train_steps=2):
  gin.clear_config()
  gin_config.parse(['experiments/quickstart.gin', f'platforms/{platform}'],
                   testing_utils.tiny_bindings(data_dir, train_steps, extra),
                   finalize=False)


def _tf_config(task_type, index=0, **jobs):
  cluster_dict = {job: [f'127.0.0.1:{2000 + i}' for i in range(count)]
                  for job, count in jobs.items()}
  return {'TF_CONFIG': json.dumps({'cluster': cluster_dict,
                                   'task': {'type': task_type,
                                            'index': index}})}


class TpuPlatformTest(testing_utils.TinyDataTestCase):


  def test_trains_and_evaluates_exactly_through_tpu_estimator_on_cpu(self):
    _parse(self.data_dir, 'tpu.gin')
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    estimator, train_fn, eval_fn = estimator_lib.build_estimator(config)[:3]
    self.assertIsInstance(estimator, tpu_estimator.TPUEstimator)
    self.assertEqual(config.tpu_config.per_host_input_for_training,
                     tf.compat.v1.estimator.tpu.InputPipelineConfig.PER_HOST_V2)

    estimator.train(train_fn, max_steps=2)
    result = estimator.evaluate(eval_fn, steps=None)
    self.assertEqual(result['global_step'], 2)
    # 5 images in batches of 2: the padding example counts nowhere.
    self.assertEqual(result['num_images'], 5)
    self.assertBetween(result['mean_iou'], 0.0, 1.0)
    reader = tf.train.load_checkpoint(estimator.latest_checkpoint())
    self.assertEqual(reader.get_variable_to_dtype_map()[
        'segmentation_model/segmentation_head/segmentation_output/kernel'],
                     tf.float32)

  def _assert_bfloat16_step(self, model_fn, config, params):
    """A training step of `model_fn`: bfloat16 convolutions, float32 loss."""
    with tf.Graph().as_default() as graph:
      spec = model_fn({'image': tf.zeros([2, 33, 33, 3])},
                      tf.zeros([2, 33, 33, 1], tf.int32),
                      tf.estimator.ModeKeys.TRAIN, params, config)
    convolutions = [op for op in graph.get_operations()
                    if op.type in ('Conv2D', 'DepthwiseConv2dNative')]
    self.assertNotEmpty(convolutions)
    self.assertTrue(all(op.get_attr('T') == tf.bfloat16
                        for op in convolutions))
    self.assertEqual(spec.loss.dtype, tf.float32)
    self.assertEqual(tf.keras.mixed_precision.global_policy().name, 'float32')

  def test_model_fn_computes_in_bfloat16_and_restores_the_policy(self):
    _parse(self.data_dir, 'tpu.gin')
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    built = estimator_lib.build_estimator(config)
    self._assert_bfloat16_step(built.model_fn, config,
                               {'use_tpu': False, 'batch_size': 2})

  def test_bfloat16_with_a_one_device_estimator(self):
    _parse(self.data_dir, 'bfloat16.gin')
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    built = estimator_lib.build_estimator(config)
    self.assertIsInstance(built.estimator, tf.estimator.Estimator)
    self._assert_bfloat16_step(
        model_fn_lib.estimator_model_fn(built.model_fn), config,
        {'use_tpu': False})

  def test_mixed_precision_with_a_strategy_names_both_bindings(self):
    _parse(self.data_dir, 'bfloat16.gin')
    config = mock.Mock(train_distribute=mock.Mock())
    with self.assertRaisesRegex(
        ValueError, r'ModelFnOptions.precision.*train_distribute.*tpu\.gin'):
      estimator_lib.check_precision(
          gin_config.binding('ModelFnOptions.precision'), config)

  def test_tpu_batch_split_names_both_numbers(self):
    _parse(self.data_dir, 'tpu.gin')
    # A run config on a TPU of 8 cores; no TPU is contacted.
    config = mock.Mock(cluster='a TPU')
    config.tpu_config.num_shards = 8
    with self.assertRaisesRegex(ValueError,
                                r'train_batch_size=2 .* 8 replicas'):
      estimator_lib.build_estimator(config)

  def test_bad_input_pipeline_name_names_the_binding(self):
    with self.assertRaisesRegex(ValueError, 'per_host_input_for_training'):
      tpu_estimator.tpu_config(100, None, 'PER_HOST_V3', on_tpu=False)

  def test_eval_reads_one_sliced_pipeline_only_on_a_tpu(self):
    pipeline = tf.compat.v1.estimator.tpu.InputPipelineConfig
    on_tpu = tpu_estimator.tpu_config(10, None, 'PER_HOST_V2', on_tpu=True)
    self.assertEqual(on_tpu.eval_training_input_configuration, pipeline.SLICED)
    off_tpu = tpu_estimator.tpu_config(10, None, 'PER_HOST_V2', on_tpu=False)
    self.assertEqual(off_tpu.eval_training_input_configuration,
                     pipeline.PER_HOST_V1)

  def test_tpu_eval_steps_cover_the_padded_split(self):
    testing_utils.parse_tiny_quickstart(self.data_dir)
    self.assertEqual(tpu_estimator.count_batches(
        testing_utils.make_input_fn(False), 2), 3)
    self.assertEqual(tpu_estimator.count_batches(
        testing_utils.make_input_fn(False), 5), 1)


class CrossShardBatchNormTest(tf.test.TestCase):

  def test_all_reduce_sums_over_shards(self):
    context = tpu_estimator.CrossShardReplicaContext(3, sum_fn=lambda t: 3 * t)
    value = tf.constant([1.0, 2.0])
    self.assertAllClose(context.all_reduce(tf.distribute.ReduceOp.SUM, value),
                        [3.0, 6.0])
    self.assertAllClose(context.all_reduce(tf.distribute.ReduceOp.MEAN, value),
                        [1.0, 2.0])

  def test_synchronized_batch_norm_sums_its_statistics_across_shards(self):
    summed = []

    def record(tensor):
      summed.append(tensor)
      return tensor

    with tf.Graph().as_default():
      layer = tf.keras.layers.BatchNormalization(synchronized=True)
      with tpu_estimator.CrossShardReplicaContext(2, sum_fn=record):
        layer(tf.ones([2, 3, 3, 4]), training=True)
      self.assertLen(summed, 3)  # Sum, sum of squares and count.
      with tpu_estimator.CrossShardReplicaContext(2):
        layer(tf.ones([2, 3, 3, 4]), training=True)
      ops = tf.compat.v1.get_default_graph().get_operations()
      self.assertLen([op for op in ops if op.type == 'CrossReplicaSum'], 3)
      self.assertLen(layer.weights, 4)

  def test_host_input_context_splits_hosts(self):
    context = mock.Mock(num_replicas=32)
    context.current_input_fn_deployment.return_value = ('/cpu:0', 1, 4)
    input_context = tpu_estimator.host_input_context(context)
    self.assertEqual((input_context.num_input_pipelines,
                      input_context.input_pipeline_id), (4, 1))
    context.current_input_fn_deployment.return_value = ('/cpu:0', 0, 1)
    self.assertIsNone(tpu_estimator.host_input_context(context))
    self.assertIsNone(tpu_estimator.host_input_context(None))


class StrategyPlatformTest(testing_utils.TinyDataTestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.model_dir = self.create_tempdir().full_path

  def test_multi_gpu_splits_the_global_batch_over_replicas(self):
    _parse(self.data_dir, 'multi_gpu.gin', extra=[_TWO_CPUS])
    config = run_config_lib.build_run_config(self.model_dir)
    self.assertEqual(config.train_distribute.num_replicas_in_sync, 2)
    _, train_fn, eval_fn = estimator_lib.build_estimator(config)[:3]
    self.assertEqual(train_fn({}).element_spec[0]['image'].shape[0], 1)
    self.assertEqual(eval_fn({}).element_spec[0]['image'].shape[0], 2)

  def test_first_replica_of_a_strategy(self):
    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
    first = strategy.experimental_local_results(
        strategy.run(model_fn_lib.is_first_replica))
    self.assertEqual(list(first), [True, False])
    self.assertTrue(model_fn_lib.is_first_replica())

  def test_the_evaluator_does_not_build_the_strategy(self):
    _parse(self.data_dir, 'multi_worker.gin')
    with mock.patch.dict(os.environ,
                         _tf_config('evaluator', chief=1, worker=1)):
      config = run_config_lib.build_run_config(self.model_dir)
    self.assertIsNone(config.train_distribute)

  def test_strategy_with_parameter_servers_is_an_error(self):
    _parse(self.data_dir, 'multi_worker.gin')
    with mock.patch.dict(os.environ, _tf_config('chief', chief=1, ps=1)):
      with self.assertRaisesRegex(ValueError, r'"ps".*parameter_server\.gin'):
        run_config_lib.build_run_config(self.model_dir)

  def test_trainers_without_strategy_or_ps_is_an_error(self):
    _parse(self.data_dir, 'parameter_server.gin')
    with mock.patch.dict(os.environ, _tf_config('chief', chief=1, worker=2)):
      with self.assertRaisesRegex(ValueError,
                                  r'3 training tasks.*multi_worker'):
        run_config_lib.build_run_config(self.model_dir)

  def test_parameter_server_trainers_read_their_own_share(self):
    _parse(self.data_dir, 'parameter_server.gin')
    with mock.patch.dict(os.environ,
                         _tf_config('worker', 1, chief=1, worker=2, ps=1)):
      config = run_config_lib.build_run_config(self.model_dir)
      context = cluster.parameter_server_input_context(config)
      self.assertEqual(list(config.session_config.device_filters),
                       ['/job:ps', '/job:worker/task:1'])
    self.assertEqual((context.num_input_pipelines, context.input_pipeline_id),
                     (3, 2))


class RoleTest(tf.test.TestCase, parameterized.TestCase):

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

  def test_invalid_json_names_tf_config(self):
    with mock.patch.dict(os.environ, {'TF_CONFIG': '{"cluster": '}):
      with self.assertRaisesRegex(ValueError, 'TF_CONFIG .* not valid JSON'):
        cluster.task()


if __name__ == '__main__':
  tf.test.main()
