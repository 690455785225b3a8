"""DeepLab's Xception backbone: its levels at each output stride, and its variables' names."""

from absl.testing import parameterized
import gin
import tensorflow as tf

from official_seg.deeplab import xception
from official_seg import validation
from official_seg.modeling import model as model_lib
from official_seg.runtime import gin_config

# An eighth of DeepLab's channels: the same layers at a small cost.
_SMALL = ['backbones.Xception.filter_scale = 0.125',
          'decoders.DeepLabASPP.num_filters = 16',
          'heads.DeepLabHead.num_filters = 16']


class XceptionTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  @parameterized.parameters(('xception_65', 8, 9), ('xception_65', 16, 5),
                            ('xception_65', 32, 3), ('xception_41', 16, 5),
                            ('xception_71', 16, 5))
  def test_levels_at_each_output_stride(self, model_id, output_stride, size):
    backbone = xception.Xception(model_id, output_stride, filter_scale=0.125)
    level = {8: '3', 16: '4', 32: '5'}[output_stride]
    self.assertEqual(sorted(backbone.output_specs), sorted(['2', level]))
    outputs = backbone(tf.zeros([1, 65, 65, 3]))
    # (65 - 1) / 4 + 1 at stride 4; DeepLab's exit flow has 2048 channels.
    self.assertEqual(outputs['2'].shape, (1, 17, 17, 32))
    self.assertEqual(outputs[level].shape, (1, size, size, 256))

  def test_unknown_choices_name_the_binding(self):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'backbones.Xception.model_id'):
      xception.Xception('xception_50')
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'backbones.Xception.output_stride = 4'):
      xception.Xception(output_stride=4)


class XceptionNamesTest(tf.test.TestCase):

  # gin/backbones/xception_65.gin (output stride 16) trains a step of the
  # model_fn's graph in tests/modeling/backbones_test.py, and output
  # strides 8 and 16 are matched against DeepLab's graph in
  # tests/commands/import_deeplab_checkpoint_test.py.
  def test_variable_names_in_the_estimators_graph(self):
    gin.clear_config()
    gin_config.parse(['backbones/xception_65.gin', 'datasets/synthetic.gin'],
                     _SMALL)
    with tf.Graph().as_default():
      model = model_lib.build_model(num_classes=4)
      model(tf.zeros([1, 33, 33, 3]), training=True)
      # What the Estimator's Saver writes: every variable, by its name.
      names = [v.op.name for v in tf.compat.v1.global_variables()]
    # The backbone, a functional model, names its variables outside
    # segmentation_model/ (as the Model Garden's backbones do).
    for part in ('exit_flow_block2_unit_1/', 'segmentation_model/aspp/',
                 'segmentation_model/segmentation_head/'):
      self.assertNotEmpty([n for n in names if n.startswith(part)], part)


if __name__ == '__main__':
  tf.test.main()
