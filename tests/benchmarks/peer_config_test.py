"""Tests for peer_config: the Model Garden config of a gin experiment."""

import io
import os

from absl.testing import parameterized
import gin
import numpy as np
from official.core import task_factory
# Registers the Model Garden segmentation task with task_factory.
from official.vision.tasks import semantic_segmentation  # pylint: disable=unused-import
from PIL import Image
import tensorflow as tf

from benchmarks import peer_config as peer_config_lib
from benchmarks import peer_model
from official_seg.data import preprocess
from official_seg.data import tfexample
from official_seg.runtime import gin_config
from tests import testing_utils

NUM_CLASSES = 4
IGNORE_LABEL = 255


def _parse(data_dir, gin_files=(), extra=()):
  """Parses the tiny quickstart, then `gin_files` and `extra` bindings."""
  gin.clear_config()
  gin_config.parse(['experiments/quickstart.gin'] + list(gin_files),
                   testing_utils.tiny_bindings(data_dir, extra=extra),
                   finalize=False)


def _label_histogram(pattern):
  """NumPy reference: pixels of each class in the label PNGs of the shards."""
  counts = np.zeros(NUM_CLASSES, np.int64)
  for record in tf.data.TFRecordDataset(tf.io.gfile.glob(pattern)):
    example = tf.train.Example.FromString(record.numpy())
    png = example.features.feature[tfexample.LABEL_ENCODED].bytes_list.value[0]
    label = np.array(Image.open(io.BytesIO(png)))
    counts += np.bincount(label.ravel(), minlength=256)[:NUM_CLASSES]
  return counts


class PeerConfigTest(parameterized.TestCase, tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.data_dir = self.create_tempdir().full_path

  def test_quickstart_maps_model(self):
    _parse(self.data_dir, extra=testing_utils.MOBILENET_V2)
    model = peer_config_lib.peer_config().task.model
    self.assertEqual(model.num_classes, NUM_CLASSES)
    self.assertEqual(model.backbone.as_dict(), {
        'type': 'mobilenet', 'mobilenet': {
            'model_id': 'MobileNetV2', 'filter_size_scale': 0.35,
            'stochastic_depth_drop_rate': 0.0, 'output_stride': 8,
            'output_intermediate_endpoints': False}})
    self.assertEqual(model.decoder.aspp.as_dict(), {
        'level': 3, 'dilation_rates': [], 'dropout_rate': 0.0,
        'num_filters': 16, 'use_depthwise_convolution': False,
        'pool_kernel_size': None, 'spp_layer_version': 'v1',
        'output_tensor': False})
    self.assertEqual(model.head.as_dict(), {
        'level': 3, 'num_convs': 1, 'num_filters': 16,
        'use_depthwise_convolution': False, 'prediction_kernel_size': 1,
        'upsample_factor': 1, 'logit_activation': None,
        'feature_fusion': 'deeplabv3plus', 'low_level': 2,
        'low_level_num_filters': 24, 'decoder_min_level': None,
        'decoder_max_level': None})
    self.assertEqual(model.norm_activation.as_dict(), {
        'activation': 'relu', 'use_sync_bn': False, 'norm_momentum': 0.9,
        'norm_epsilon': 0.001})

  def test_quickstart_maps_data_loss_and_schedule(self):
    _parse(self.data_dir)
    config = peer_config_lib.peer_config()
    train, val = config.task.train_data, config.task.validation_data
    self.assertEqual(
        (train.input_path, train.output_size, train.global_batch_size,
         train.aug_scale_min, train.aug_scale_max, train.aug_rand_hflip,
         train.is_training, train.shuffle_buffer_size),
        (os.path.join(self.data_dir, 'train-?????-of-?????.tfrecord'),
         [33, 33], 2, 0.75, 1.5, True, True, 256))
    self.assertEqual(
        (val.input_path, val.output_size, val.groundtruth_padded_size,
         val.global_batch_size, val.resize_eval_groundtruth,
         val.drop_remainder, val.is_training),
        (os.path.join(self.data_dir, 'val-?????-of-?????.tfrecord'),
         [41, 41], [41, 41], 2, False, False, False))
    self.assertAllClose(train.image_feature.mean, [123.675, 116.28, 103.53])
    self.assertEqual(
        (config.task.losses.l2_weight_decay, config.task.losses.ignore_label,
         config.task.losses.class_weights, config.task.init_checkpoint),
        (4e-5, IGNORE_LABEL, [], None))
    optimizer = config.trainer.optimizer_config
    adam = optimizer.optimizer
    # tf.compat.v1.train.AdamOptimizer's defaults, epsilon included.
    self.assertEqual((adam.type, adam.adam.beta_1, adam.adam.beta_2,
                      adam.adam.epsilon, adam.adam.amsgrad),
                     ('adam', 0.9, 0.999, 1e-8, False))
    self.assertEqual(optimizer.learning_rate.as_dict(), {
        'type': 'polynomial', 'polynomial': {
            'name': 'PolynomialDecay', 'initial_learning_rate': 0.01,
            'decay_steps': 3, 'end_learning_rate': 0.0, 'power': 0.9,
            'cycle': False, 'offset': 0}})
    self.assertIsNone(optimizer.warmup.type)
    self.assertEqual((config.trainer.train_steps,
                      config.runtime.mixed_precision_dtype), (3, None))

  def test_momentum_sgd_maps(self):
    _parse(self.data_dir, extra=[
        'make_optimizer.optimizer = @tf.train.MomentumOptimizer',
        'tf.train.MomentumOptimizer.use_nesterov = True',
        'tf.train.AdamOptimizer.epsilon = 0.5'])
    sgd = peer_config_lib.peer_config().trainer.optimizer_config.optimizer
    self.assertEqual((sgd.type, sgd.sgd.momentum, sgd.sgd.nesterov),
                     ('sgd', 0.9, True))

  def test_dilated_resnet50_maps(self):
    # The Model Garden has one batch-norm momentum; quickstart's ASPP and
    # head have 0.9.
    _parse(self.data_dir, ['backbones/dilated_resnet50_os16.gin'],
           ['backbones.DilatedResNet.norm_momentum = 0.9'])
    model = peer_config_lib.peer_config().task.model
    self.assertEqual(model.backbone.type, 'dilated_resnet')
    self.assertEqual(model.backbone.dilated_resnet.as_dict(), {
        'model_id': 50, 'output_stride': 16, 'multigrid': [1, 2, 4],
        'stem_type': 'v1', 'last_stage_repeats': 1, 'se_ratio': None,
        'stochastic_depth_drop_rate': 0.0, 'resnetd_shortcut': False,
        'replace_stem_max_pool': False})
    aspp = model.decoder.aspp
    self.assertEqual((aspp.level, aspp.dilation_rates, model.head.level),
                     (4, [6, 12, 18], 4))

  def test_build_model_level_maps(self):
    _parse(self.data_dir, extra=['build_model.level = 2'])
    model = peer_config_lib.peer_config().task.model
    self.assertEqual((model.decoder.aspp.level, model.head.level), (2, 2))

  def test_linear_warmup_maps(self):
    _parse(self.data_dir, ['schedules/poly_warmup.gin'],
           ['WARMUP_STEPS = 2', 'WARMUP_LEARNING_RATE = 0.01'])
    optimizer = peer_config_lib.peer_config().trainer.optimizer_config
    self.assertEqual(optimizer.warmup.as_dict(), {
        'type': 'linear', 'linear': {
            'name': 'linear', 'warmup_steps': 2,
            'warmup_learning_rate': 0.01}})
    self.assertEqual(optimizer.learning_rate.polynomial.initial_learning_rate,
                     0.01)

  @parameterized.named_parameters(
      ('argument', 'mixed_bfloat16', []),
      ('gin', None, ["ModelFnOptions.precision = 'mixed_bfloat16'"]))
  def test_mixed_bfloat16(self, precision, extra):
    _parse(self.data_dir, extra=extra)
    config = peer_config_lib.peer_config(precision)
    self.assertEqual(config.runtime.mixed_precision_dtype, 'bfloat16')
    self.assertEqual(peer_config_lib.precision_name(config), 'mixed_bfloat16')

  @parameterized.named_parameters(
      ('backbone', 'build_model.backbone = @backbones.ResNet',
       'build_model.backbone'),
      ('decoder', 'build_model.decoder = None', 'build_model.decoder'),
      ('schedule', 'learning_rate.schedule = '
       '@tf.keras.optimizers.schedules.CosineDecay()',
       'learning_rate.schedule'),
      ('optimizer', 'make_optimizer.optimizer = @tf.train.RMSPropOptimizer',
       'make_optimizer.optimizer'),
      ('multiplier', 'gradient_multipliers.bias_multiplier = 2.0',
       'gradient_multipliers.bias_multiplier'),
      ('eval_scales', 'InferenceOptions.eval_scales = [0.5, 1.0]',
       'InferenceOptions.eval_scales'),
      ('activations', "decoders.ASPP.activation = 'swish'",
       'decoders.ASPP.activation'),
      ('unmapped_parameter', 'backbones.MobileNet.regularize_depthwise = True',
       'backbones.MobileNet.regularize_depthwise'),
      ('scoped_reference', 'build_model.head = @peer/heads.SegmentationHead',
       'build_model.head'))
  def test_unsupported_binding_raises_naming_it(self, binding, name):
    _parse(self.data_dir, extra=[binding])
    with self.assertRaisesRegex(ValueError, name):
      peer_config_lib.peer_config()

  def test_unknown_precision_raises(self):
    _parse(self.data_dir)
    with self.assertRaisesRegex(ValueError, '--precision'):
      peer_config_lib.peer_config('float16')

  @parameterized.named_parameters(
      ('exponential', 'schedules/exponential.gin', 'learning_rate.schedule'),
      ('cosine', 'schedules/cosine.gin',
       'schedules.LinearWarmup.after_warmup_lr_sched'))
  def test_unsupported_schedule_raises_naming_it(self, gin_file, name):
    _parse(self.data_dir, [gin_file])
    with self.assertRaisesRegex(ValueError,
                                f'{name} = .* has no Model Garden'):
      peer_config_lib.peer_config()

  def test_bindings_resolve_macros_scopes_and_signature_defaults(self):
    _parse(self.data_dir, extra=['Parser.min_scale_factor = 0.9'])
    self.assertEqual(gin_config.binding('Parser.crop_size', scope='train'),
                     [33, 33])
    self.assertEqual(
        gin_config.binding('Parser.min_scale_factor', scope='eval'), 0.9)
    self.assertIsNone(gin_config.binding(
        'Parser.min_resize_value', scope='eval',
        **peer_model.signature_default(preprocess.Parser,
                                       'min_resize_value')))
    with self.assertRaisesRegex(ValueError, 'schedules.LinearWarmup.warmup'):
      gin_config.binding('schedules.LinearWarmup.warmup_steps')
    # gin.REQUIRED is no default.
    self.assertEqual(
        peer_model.signature_default(preprocess.Parser, 'crop_size'), {})


class PeerDataConfigTest(testing_utils.TinyDataTestCase):

  num_train = 8

  def test_model_garden_decoder_reads_our_labels(self):
    _parse(self.data_dir)
    config = peer_config_lib.peer_config()
    task = task_factory.get_task(config.task)
    counts = np.zeros(NUM_CLASSES, np.int64)
    for _, labels in task.build_inputs(config.task.validation_data):
      masks = labels['masks'].numpy().astype(np.int64)
      self.assertContainsSubset(np.unique(masks),
                                list(range(NUM_CLASSES)) + [IGNORE_LABEL])
      counts += np.bincount(masks.ravel(), minlength=256)[:NUM_CLASSES]
    # Exact: every label pixel of every image, padding ignore-labelled.
    expected = _label_histogram(tfexample.shard_pattern(self.data_dir, 'val'))
    self.assertGreater(expected[1:].sum(), 0)  # Objects, not only background.
    self.assertAllEqual(counts, expected)


if __name__ == '__main__':
  tf.test.main()
