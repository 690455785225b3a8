"""DeepLab's Xception backbone: its levels at each output stride, and training."""

from absl.testing import parameterized
import gin
import tensorflow as tf

from official_seg.modeling import xception
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import gin_config
from official_seg.runtime import run_config as run_config_lib
from tests import testing_utils

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
    with self.assertRaisesRegex(ValueError, 'Xception.model_id'):
      xception.Xception('xception_50')
    with self.assertRaisesRegex(ValueError, 'Xception.output_stride = 4'):
      xception.Xception(output_stride=4)


class XceptionTrainingTest(testing_utils.TinyDataTestCase,
                           parameterized.TestCase):
  num_train = 4
  num_val = 2

  # Output stride 8 is built above and matched against DeepLab's graph in
  # tests/tools/import_deeplab_checkpoint_test.py; one stride trains here.
  @parameterized.parameters((16, [6, 12, 18]))
  def test_trains_two_steps_through_estimator(self, output_stride, rates):
    gin_config.parse(
        ['experiments/quickstart.gin', 'backbones/xception_65.gin'],
        testing_utils.tiny_bindings(self.data_dir, train_steps=2, extra=[
            f'backbones.Xception.output_stride = {output_stride}',
            f'decoders.DeepLabASPP.dilation_rates = {rates}'] + _SMALL),
        finalize=False)
    model_dir = self.create_tempdir().full_path
    config = run_config_lib.build_run_config(model_dir)
    estimator, train_fn = estimator_lib.build_estimator(config)[:2]
    estimator.train(train_fn, max_steps=2)
    reader = tf.train.load_checkpoint(model_dir)
    self.assertEqual(reader.get_tensor('global_step'), 2)
    names = reader.get_variable_to_shape_map()
    # The backbone, a functional model, names its variables outside
    # segmentation_model/ (as the Model Garden's backbones do).
    for part in ('exit_flow_block2_unit_1/', 'segmentation_model/aspp/',
                 'segmentation_model/segmentation_head/'):
      self.assertNotEmpty([n for n in names if n.startswith(part)], part)


if __name__ == '__main__':
  tf.test.main()
