"""Shape tests of the DeepLab model across backbones, strides and heads."""

from absl.testing import parameterized
import gin
import tensorflow as tf

from official_seg.modeling import model as model_lib

_MOBILENET = ['build_model.backbone = @backbones.MobileNet',
              'backbones.MobileNet.filter_size_scale = 0.35']
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

  def test_no_decoder_feeds_the_head_directly(self):
    gin.parse_config(_MOBILENET + ['build_model.decoder = None'])
    model = model_lib.build_model(num_classes=2)
    logits = model(tf.zeros([1, 64, 64, 3]), training=False)["logits"]
    self.assertEqual(logits.shape, (1, 2, 2, 2))


if __name__ == '__main__':
  tf.test.main()
