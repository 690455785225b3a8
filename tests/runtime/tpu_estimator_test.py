"""TPUEstimator off a TPU: config, cross-shard sums, host input, eval steps."""

from unittest import mock

import gin
import tensorflow as tf

from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import run_config as run_config_lib
from official_seg.runtime import tpu_estimator
from tests import testing_utils


class TpuPlatformTest(testing_utils.TinyDataTestCase):

  def test_trains_and_evaluates_exactly_through_tpu_estimator_on_cpu(self):
    testing_utils.parse_tiny_platform(self.data_dir, 'tpu.gin')
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

  def test_fixmatch_trains_through_tpu_estimator_on_cpu(self):
    testing_utils.parse_tiny_semi_supervised(self.data_dir, 'fixmatch.gin',
                                             'tpu.gin')
    model_dir = self.create_tempdir().full_path
    config = run_config_lib.build_run_config(model_dir)
    estimator, train_fn, eval_fn = estimator_lib.build_estimator(config)[:3]
    self.assertIsInstance(estimator, tpu_estimator.TPUEstimator)
    estimator.train(train_fn, max_steps=2)
    result = estimator.evaluate(eval_fn, steps=None)
    self.assertEqual(result['global_step'], 2)
    self.assertBetween(result['mean_iou'], 0.0, 1.0)
    tags = testing_utils.scalar_tags(model_dir)
    self.assertContainsSubset({'semi/consistency_loss', 'semi/kept_share',
                               'loss/consistency', 'semi/labeled_loss_rise',
                               'semi/class_share_distance_average'}, tags)

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

  def setUp(self):
    super().setUp()
    gin.clear_config()

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


if __name__ == '__main__':
  tf.test.main()
