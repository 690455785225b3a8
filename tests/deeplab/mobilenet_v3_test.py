"""DeepLab's MobileNetV3: its levels, and DeepLab's checkpoints give DeepLab's logits."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import dataset_info
from official_seg.deeplab import checkpoint_names
from official_seg.deeplab import mobilenet_v3
from official_seg.modeling import model as model_lib
from official_seg.runtime import gin_config
from tests import deeplab_testing
from tests.deeplab import deeplab_mobilenet_v3_reference as reference

_NUM_CLASSES = 4  # datasets/synthetic.gin's.
# A third of DeepLab's channels (rounded to multiples of 8, at least 8) and
# 16 ASPP filters: a small network of the same structure.
_MULTIPLIER, _DEPTH = 0.35, 16
# One odd and one even side: 'SAME' pads the two differently. At output
# stride 32 the map is 4x4; a 65-pixel pooling crop is a 3x3 window, which
# stride (1, 2) slides to 2x1 outputs, resized back to 4x4.
_HEIGHT, _WIDTH = 97, 128
_POOLING_CROP, _POOLING_STRIDE = (65, 65), (1, 2)


def gin_files(model_id):
  return [f'backbones/deeplab_mobilenet_v3_{model_id}.gin',
          'datasets/synthetic.gin']


def bindings(multiplier=_MULTIPLIER):
  """Gin bindings of the small model."""
  return [f'backbones.DeepLabMobileNetV3.depth_multiplier = {multiplier}',
          f'decoders.DeepLabLRASPP.num_filters = {_DEPTH}',
          'decoders.DeepLabLRASPP.image_pooling_crop_size = '
          f'{list(_POOLING_CROP)}',
          'decoders.DeepLabLRASPP.image_pooling_stride = '
          f'{list(_POOLING_STRIDE)}']


def _reference_logits(images, model_id, multiplier=_MULTIPLIER):
  return reference.deeplab(
      tf.constant(images), model_id, _NUM_CLASSES, multiplier, depth=_DEPTH,
      pooling_crop=_POOLING_CROP, pooling_stride=_POOLING_STRIDE)


def write_reference(directory, images, model_id):
  """A DeepLab MobileNetV3 checkpoint and its logits on `images`."""
  with tf.Graph().as_default():
    logits = _reference_logits(images, model_id)
    tf.compat.v1.train.get_or_create_global_step()
    return deeplab_testing.save_randomized(directory, logits)


class DeepLabMobileNetV3Test(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  # (model, output stride, level, decoder end point channels, last
  # channels) at the test's multiplier: the expansions of 16 * 3 (Large's
  # 40 channels scaled) and 8 * 88 / 24 (Small's 24) rounded to multiples
  # of 8; 480 and 288 times 0.35 likewise.
  @parameterized.parameters(('large', 32, '5', 48, 168),
                            ('large', 16, '4', 48, 168),
                            ('small', 32, '5', 32, 104))
  def test_levels(self, model_id, output_stride, level, decoder_channels,
                  last_channels):
    backbone = mobilenet_v3.DeepLabMobileNetV3(
        model_id, _MULTIPLIER, output_stride)
    self.assertEqual(sorted(backbone.output_specs), ['3', level])
    outputs = backbone(tf.zeros([1, 65, 65, 3]))
    size = 65 // output_stride + 1
    self.assertEqual(outputs['3'].shape, (1, 9, 9, decoder_channels))
    self.assertEqual(outputs[level].shape, (1, size, size, last_channels))

  @parameterized.parameters('large', 'small')
  def test_zoo_experiment_has_deeplabs_names_and_shapes(self, model_id):
    # The zoo experiment, with no binding given, builds every variable of
    # DeepLab's graph at DeepLab's width and head (128 filters,
    # decoder_filters 19) and no other, each of DeepLab's shape.
    with tf.Graph().as_default():
      reference.deeplab(tf.zeros([1, 65, 65, 3]), model_id, 19,
                        pooling_crop=_POOLING_CROP)
      expected = {v.op.name: v.shape.as_list()
                  for v in tf.compat.v1.global_variables()}
    gin_config.parse(
        [f'experiments/cityscapes_mobilenetv3_{model_id}_zoo.gin'], [])
    with tf.Graph().as_default():
      model = model_lib.build_model(
          num_classes=dataset_info.DatasetInfo().num_classes)
      model(tf.zeros([1, 65, 65, 3]), training=False)
      backbone, rest = checkpoint_names.deeplab_names(model)
      ours = {name: v.shape.as_list()
              for name, v in dict(backbone, **rest).items()}
    self.assertDictEqual(ours, expected)

  def test_unknown_settings_name_the_binding(self):
    with self.assertRaisesRegex(
        validation.ConfigurationError,
        'backbones.DeepLabMobileNetV3.output_stride = 8: expected one of 16, '
        '32'):
      mobilenet_v3.DeepLabMobileNetV3(output_stride=8)
    with self.assertRaisesRegex(
        validation.ConfigurationError,
        "backbones.DeepLabMobileNetV3.model_id = 'medium'"):
      mobilenet_v3.DeepLabMobileNetV3('medium')


class DeepLabMobileNetV3ImportTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.images = np.random.default_rng(1).uniform(
        -1.0, 1.0, (2, _HEIGHT, _WIDTH, 3)).astype(np.float32)

  @parameterized.parameters('large', 'small')
  def test_imported_logits_equal_deeplabs(self, model_id):
    deeplab_dir = self.create_tempdir().full_path
    _, expected = write_reference(deeplab_dir, self.images, model_id)
    ours, report = deeplab_testing.import_tool.import_checkpoint(
        deeplab_dir, gin_files(model_id), bindings(),
        self.create_tempdir().full_path)
    self.assertEmpty(report['not_filled'])
    self.assertEqual(report['unused'], {'global_step': ['global_step']})
    gin.clear_config()
    gin_config.parse(gin_files(model_id), bindings())
    logits = deeplab_testing.our_outputs(ours, self.images)
    # DeepLab's logits are at stride 8: ceil(97 / 8) x ceil(128 / 8).
    self.assertEqual(expected.shape, (2, 13, 16, _NUM_CLASSES))
    self.assertEqual(logits.shape, expected.shape)
    self.assertGreater(np.std(expected), 0.1)
    self.assertAllClose(logits, expected, rtol=0.0, atol=1e-4)


if __name__ == '__main__':
  tf.test.main()
