"""DeepLab's MobileNetV2: its levels, and DeepLab's checkpoints give DeepLab's logits."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.deeplab import mobilenet_v2
from official_seg.deeplab import mobilenet_v2 as mobilenet_v2_lib
from official_seg.runtime import gin_config
from tests import deeplab_testing
from tests.deeplab import deeplab_mobilenet_reference

_NUM_CLASSES = 4  # datasets/synthetic.gin's.
# Half of DeepLab's channels, as its mobilenetv2_dm05 models (channels not
# rounded to multiples of 8), and 32 ASPP filters: a small network whose
# rounding differs from the Model Garden's.
_MULTIPLIER, _DEPTH = 0.5, 32
# One odd and one even side: 'SAME' pads the two differently.
_HEIGHT, _WIDTH = 57, 64
GIN_FILES = ['backbones/deeplab_mobilenet_v2.gin', 'datasets/synthetic.gin']


def bindings(output_stride, decoder=False):
  """Gin bindings of the small DeepLab MobileNetV2 model."""
  return [f'backbones.DeepLabMobileNetV2.output_stride = {output_stride}',
          f'backbones.DeepLabMobileNetV2.depth_multiplier = {_MULTIPLIER}',
          f'decoders.DeepLabASPP.num_filters = {_DEPTH}',
          f'heads.DeepLabHead.num_filters = {_DEPTH}',
          f'heads.DeepLabHead.low_level = {2 if decoder else None}']


def write_reference(directory, images, strides, decoder=False):
  """A DeepLab MobileNetV2 checkpoint and its logits at each output stride.

  Returns:
    (prefix, {output stride: the reference's logits on `images`}).
  """
  outputs = {}
  with tf.Graph().as_default():
    for i, stride in enumerate(strides):
      with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(),
                                       reuse=bool(i)):
        outputs[stride] = deeplab_mobilenet_reference.deeplab_v3(
            tf.constant(images), stride, _NUM_CLASSES, _MULTIPLIER,
            decoder=decoder, depth=_DEPTH)
    tf.compat.v1.train.get_or_create_global_step()
    return deeplab_testing.save_randomized(directory, outputs)


class DeepLabMobileNetV2Test(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  @parameterized.parameters((8, '3', 9), (16, '4', 5), (32, '5', 3))
  def test_levels_at_each_output_stride(self, output_stride, level, size):
    backbone = mobilenet_v2.DeepLabMobileNetV2(
        depth_multiplier=_MULTIPLIER, output_stride=output_stride)
    self.assertEqual(sorted(backbone.output_specs), ['2', level])
    outputs = backbone(tf.zeros([1, 65, 65, 3]))
    # layer_4's depthwise output: 12 channels expanded 6 times, stride 4;
    # layer_18: half of 320.
    self.assertEqual(outputs['2'].shape, (1, 17, 17, 72))
    self.assertEqual(outputs[level].shape, (1, size, size, 160))

  def test_depths_round_as_deeplab_at_each_multiplier(self):
    # DeepLab's dm 1.0 network (slim's V2_DEF) and its dm 0.5 one.
    self.assertEqual(mobilenet_v2.depths(1.0)[1][:3],
                     [(32, 16), (96, 24), (144, 24)])
    self.assertEqual(mobilenet_v2.depths(0.5)[1][:3],
                     [(16, 8), (48, 12), (72, 12)])

  def test_unknown_output_stride_names_the_binding(self):
    with self.assertRaisesRegex(
        validation.ConfigurationError,
        'backbones.DeepLabMobileNetV2.output_stride = 4: expected one of 8, '
        '16, 32'):
      mobilenet_v2_lib.DeepLabMobileNetV2(output_stride=4)


class DeepLabMobileNetV2ImportTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.images = np.random.default_rng(1).uniform(
        -1.0, 1.0, (2, _HEIGHT, _WIDTH, 3)).astype(np.float32)

  # (16, 8): the zoo's VOC and Cityscapes models (no atrous branches, no
  # decoder); the decoder at layer_4/depthwise_output once.
  @parameterized.parameters(((16, 8), False), ((16,), True))
  def test_imported_logits_equal_deeplabs(self, strides, decoder):
    deeplab_dir = self.create_tempdir().full_path
    _, expected = write_reference(deeplab_dir, self.images, strides, decoder)
    ours, report = deeplab_testing.import_tool.import_checkpoint(
        deeplab_dir, GIN_FILES, bindings(strides[0], decoder),
        self.create_tempdir().full_path)
    self.assertEmpty(report['not_filled'])
    self.assertEqual(report['unused'], {'global_step': ['global_step']})
    for stride in strides:
      gin.clear_config()
      gin_config.parse(GIN_FILES, bindings(stride, decoder))
      logits = deeplab_testing.our_outputs(ours, self.images)
      self.assertEqual(logits.shape, expected[stride].shape)
      self.assertGreater(np.std(expected[stride]), 0.1)
      self.assertAllClose(logits, expected[stride], rtol=0.0, atol=1e-4,
                          msg=f'output stride {stride}')


if __name__ == '__main__':
  tf.test.main()
