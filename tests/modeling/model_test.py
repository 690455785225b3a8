"""Shape tests of the DeepLab model across backbones, strides and heads."""

import re
from unittest import mock

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.modeling import model as model_lib

_MOBILENET = ['build_model.backbone = @backbones.MobileNet',
              'backbones.MobileNet.filter_size_scale = 0.35']
# Sums over replicas against moments of one batch: float32 rounding only.
_RTOL, _ATOL = 1e-4, 1e-6
_SMALL = ['decoders.ASPP.num_filters = 8',
          'heads.SegmentationHead.num_filters = 8',
          'decoders.ASPP.dilation_rates = [2, 4]']


class ModelTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  @parameterized.named_parameters(
      ('mobilenet_os16', _MOBILENET + ['backbones.MobileNet.output_stride = 16'], 4, 5),
      ('mobilenet_os8', _MOBILENET + ['backbones.MobileNet.output_stride = 8'], 3, 9),
      ('resnet18_os32', ['build_model.backbone = @backbones.ResNet',
                         'backbones.ResNet.model_id = 18'], 5, 3),
      ('deeplabv3plus', _MOBILENET + [
          'backbones.MobileNet.output_stride = 16',
          "heads.SegmentationHead.feature_fusion = 'deeplabv3plus'",
          'heads.SegmentationHead.low_level = 2',
          'heads.SegmentationHead.num_convs = 1'], 4, 17))
  def test_logits_shape(self, bindings, level, logits_size):
    gin.parse_config(bindings + _SMALL)
    model = model_lib.build_model(num_classes=6)
    self.assertEqual(model_lib.feature_level(model.backbone), level)
    logits = model(tf.zeros([2, 65, 65, 3]), training=False)['logits']
    self.assertEqual(logits.shape, (2, logits_size, logits_size, 6))

  def test_features_come_from_the_same_pass(self):
    """with_features adds the backbone's levels and changes nothing else."""
    gin.parse_config(_MOBILENET + _SMALL)
    with tf.Graph().as_default():
      model = model_lib.build_model(num_classes=3)
      images = tf.random.stateless_uniform([2, 65, 65, 3], [1, 2])
      plain = model(images, training=False)['logits']
      names = sorted(v.name for v in model.variables)
      levels = sorted(model.backbone.output_specs)
      outputs = model(images, training=False, with_features=True)
      self.assertEqual(sorted(v.name for v in model.variables), names)
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        plain, outputs = session.run([plain, outputs])
    self.assertAllClose(outputs['logits'], plain)
    # MobileNet also outputs its last 1x1 convolution, outside output_specs.
    self.assertContainsSubset(levels, outputs['backbone_features'])

  @parameterized.parameters(8, 16)
  def test_dilated_resnet_output_stride(self, output_stride):
    gin.parse_config(_SMALL + [
        'build_model.backbone = @backbones.DilatedResNet',
        'backbones.DilatedResNet.model_id = 50',
        f'backbones.DilatedResNet.output_stride = {output_stride}'])
    with tf.Graph().as_default():
      model = model_lib.build_model(num_classes=3)
      logits = model(tf.zeros([1, 33, 33, 3]), training=False)['logits']
    size = -(-33 // output_stride)
    self.assertEqual(logits.shape.as_list(), [1, size, size, 3])

  def test_level_reads_a_shallower_level(self):
    gin.parse_config(_MOBILENET + _SMALL + [
        'backbones.MobileNet.output_stride = 16', 'build_model.level = 3'])
    model = model_lib.build_model(num_classes=2)
    logits = model(tf.zeros([1, 65, 65, 3]), training=False)['logits']
    # Level 3 is stride 8 while the backbone runs on to stride 16.
    self.assertEqual(logits.shape, (1, -(-65 // 8), -(-65 // 8), 2))
    self.assertEqual(model.decoder.get_config()['level'], 3)

  def test_level_the_backbone_lacks_names_its_levels(self):
    gin.parse_config(_MOBILENET + _SMALL + [
        'backbones.MobileNet.output_stride = 16', 'build_model.level = 5'])
    with self.assertRaisesRegex(validation.ConfigurationError,
                                r'build_model.level = 5: .*\[2, 3, 4\]'):
      model_lib.build_model(num_classes=2)

  def test_input_channels_reach_the_first_convolution(self):
    gin.parse_config(_MOBILENET + ["backbones.MobileNet.model_id = 'MobileNetV1'",
                                   'build_model.decoder = None'])
    model = model_lib.build_model(num_classes=2, input_channels=5)
    logits = model(tf.zeros([1, 32, 32, 5]), training=False)['logits']
    self.assertEqual(logits.shape, (1, 1, 1, 2))
    first = [v for v in model.backbone.trainable_variables
             if v.shape.rank == 4][0]
    self.assertEqual(first.shape[2], 5)

  def test_no_decoder_feeds_the_head_directly(self):
    gin.parse_config(_MOBILENET + ['build_model.decoder = None'])
    model = model_lib.build_model(num_classes=2)
    logits = model(tf.zeros([1, 64, 64, 3]), training=False)["logits"]
    self.assertEqual(logits.shape, (1, 2, 2, 2))


  def test_backbone_built_in_inference_mode_trains_as_one_built_plainly(self):
    """Construction in inference mode: the same training pass, fewer ops.

    A backbone built the plain way (with the learning phase unset) is the
    reference: given its weights, the model from `build_model` computes the
    same training logits and the same batch-norm updates.
    """
    gin.parse_config(_MOBILENET + _SMALL)
    images = np.random.RandomState(0).uniform(
        -1, 1, [2, 33, 33, 3]).astype(np.float32)
    runs = {}
    for name, construct in (
        ('plain', lambda b, r, channels: b(kernel_regularizer=r)),
        ('inference', model_lib._construct_backbone)):  # pylint: disable=protected-access
      graph = tf.Graph()
      with graph.as_default(), mock.patch.object(
          model_lib, '_construct_backbone', construct):
        tf.keras.utils.set_random_seed(3)
        model = model_lib.build_model(num_classes=3)
        inputs = tf.constant(images)
        logits = model(inputs, training=True)['logits']
        updates = model.get_updates_for(inputs)
        moving = _moving_statistics(model)
        with tf.compat.v1.Session() as session:
          session.run(tf.compat.v1.global_variables_initializer())
          weights = session.run(model.weights)
          if 'plain' in runs:
            # Variable.load, all in one run: a run per variable costs more
            # than the rest of the test.
            session.run([v.initializer for v in model.weights], {
                v.initializer.inputs[1]: value
                for v, value in zip(model.weights, runs['plain']['weights'])})
          values = session.run(logits)
          session.run(updates)
          runs[name] = dict(weights=weights, logits=values,
                            moving=session.run(moving), updates=len(updates),
                            ops=len(graph.get_operations()))
    plain, inference = runs['plain'], runs['inference']
    self.assertAllClose(inference['logits'], plain['logits'])
    self.assertEqual(inference['updates'], plain['updates'])
    self.assertGreater(plain['updates'], 0)
    self.assertAllClose(inference['moving'], plain['moving'])
    self.assertLess(inference['ops'], plain['ops'])


def _sync_bn(enabled):
  """Bindings of gin/platforms/sync_batch_norm.gin, for the small MobileNet."""
  return [f'{configurable}.use_sync_bn = {enabled}' for configurable in (
      'backbones.MobileNet', 'decoders.ASPP', 'heads.SegmentationHead')]


def _moving_statistics(model):
  return [v for v in model.variables if re.search('moving_(mean|variance)',
                                                  v.name)]


def _build(sync):
  gin.clear_config()
  gin.parse_config(_MOBILENET + _SMALL + _sync_bn(sync))
  return model_lib.build_model(num_classes=4)


class SyncBatchNormTest(tf.test.TestCase, parameterized.TestCase):
  """Two replicas with synchronised batch norm equal one on the whole batch."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.images = tf.constant(np.random.RandomState(0).uniform(
        -1, 1, [4, 33, 33, 3]), tf.float32)
    # One replica on the whole batch: the one-worker run of the platform
    # (synchronised layers, nothing to synchronise with). Keras's unsynced
    # layer would differ in the moving variance alone: its fused kernel
    # applies Bessel's correction there. Both tests start from its weights.
    reference = _build(True)
    reference(cls.images[:1], training=False)  # Creates the variables.
    cls.weights = reference.get_weights()
    reference(cls.images, training=True)  # One step's statistics updates.
    cls.expected = [v.numpy() for v in _moving_statistics(reference)]

  @parameterized.parameters(True, False)
  def test_two_replicas_equal_one_on_the_concatenated_batch(self, sync):
    images, expected = self.images, self.expected
    # The class and the collective all-reduce multi_worker.gin uses, over two
    # logical CPUs of this process (tests/conftest.py); _from_local_devices
    # is TensorFlow's own way to build it without a TF_CONFIG cluster.
    strategy = tf.distribute.MultiWorkerMirroredStrategy._from_local_devices(  # pylint: disable=protected-access
        ['/cpu:0', '/cpu:1'])
    with strategy.scope():
      model = _build(sync)
      model(images[:1], training=False)
      model.set_weights(self.weights)
    halves = strategy.experimental_distribute_values_from_function(
        lambda context: images[2 * context.replica_id_in_sync_group:][:2])
    tf.function(lambda x: strategy.run(
        lambda half: model(half, training=True)['logits'], args=(x,)))(halves)

    statistics = _moving_statistics(model)
    self.assertLen(statistics, len(expected))
    self.assertNotEmpty(expected)
    replicas = [[local.numpy() for local in
                 strategy.experimental_local_results(variable)]
                for variable in statistics]
    close = all(np.allclose(value, want, rtol=_RTOL, atol=_ATOL)
                for values, want in zip(replicas, expected)
                for value in values)
    # Per-replica statistics (sync off) see half the batch: they differ.
    self.assertEqual(close, sync)


if __name__ == '__main__':
  tf.test.main()
