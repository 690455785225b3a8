"""DeepLab's ResNet-v1 beta: its levels, its ImageNet checkpoints' import, and training."""

import os
import shutil
import tempfile

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.deeplab import checkpoint_names
from official_seg.deeplab import checkpoint_names as checkpoint_names_lib
from official_seg.deeplab import resnet_beta
from official_seg.modeling import model as model_lib
from official_seg.runtime import gin_config
from tests import deeplab_testing
from tests.deeplab import deeplab_resnet_reference as reference

_SIZE = 33  # 1 + a multiple of each output stride, as DeepLab's crops.
# An eighth of DeepLab's channels: the same layers, names and arithmetic.
_SCALE = 0.125
_LEVEL = {8: '3', 16: '4', 32: '5'}
# A convolution's weights, trained or moving averages.
_WEIGHTS = ('kernel', 'gamma', 'beta', 'moving_mean', 'moving_variance')


def write_reference(directory, images, variant, multi_grid, strides,
                    leave_out=()):
  """Writes ImageNet checkpoints of DeepLab's network, from the reference.

  Args:
    directory: str; `whole/` gets every variable, `partial/` all but
      `leave_out`'s.
    images: float [B, H, W, 3].
    variant: 'resnet_v1_50_beta' or 'resnet_v1_101_beta'.
    multi_grid: block4's unit rates.
    strides: output strides; they share the variables.
    leave_out: names of variables the partial checkpoint leaves out.

  Returns:
    {output stride: (features, the decoder's stride-4 features)}.
  """
  outputs = {}
  scope = reference.SCOPES[variant]
  with tf.Graph().as_default():
    for i, stride in enumerate(strides):
      with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(),
                                       reuse=bool(i)):
        features, end_points = reference.resnet_v1_beta(
            tf.constant(images), variant, stride, _SCALE, multi_grid)
        outputs[stride] = (
            features,
            end_points[f'{scope}/{reference.DECODER_END_POINT}'])
    # The ImageNet classifier, which the import leaves out.
    tf.compat.v1.get_variable(f'{scope}/logits/weights', [1, 1, 256, 5])
    tf.compat.v1.train.get_or_create_global_step()
    variables = tf.compat.v1.global_variables()
    with deeplab_testing.session() as session:
      deeplab_testing.randomize(session, np.random.default_rng(0))
      tf.compat.v1.train.Saver(variables).save(
          session, os.path.join(directory, 'whole', 'model.ckpt'))
      if leave_out:
        tf.compat.v1.train.Saver(
            [v for v in variables if v.op.name not in leave_out]).save(
                session, os.path.join(directory, 'partial', 'model.ckpt'))
      return session.run(outputs)


def _bindings(variant, output_stride, multi_grid):
  return [f"backbones.ResNetBeta.model_id = '{variant}'",
          f'backbones.ResNetBeta.output_stride = {output_stride}',
          f'backbones.ResNetBeta.multi_grid = {tuple(multi_grid)}',
          f'backbones.ResNetBeta.filter_scale = {_SCALE}',
          'decoders.DeepLabASPP.num_filters = 16',
          'heads.DeepLabHead.num_filters = 16']


def _gin_files(variant):
  return [f'backbones/{variant}.gin', 'datasets/synthetic.gin']


def our_features(checkpoint, images):
  """The backbone levels of the gin files' model, restored by name."""
  with tf.Graph().as_default():
    model = model_lib.build_model(num_classes=4)
    outputs = model(tf.constant(images), training=False, with_features=True)
    saver = tf.compat.v1.train.Saver(model.variables)
    with deeplab_testing.session() as session:
      saver.restore(session, checkpoint)
      return session.run(outputs['backbone_features'])


_MISSING = 'resnet_v1_50/block2/unit_4/bottleneck_v1/conv2/weights'
# The shared ResNet-50 checkpoints' settings; multi_grid changes no variable.
_SHARED = ('resnet_v1_50_beta', (1, 2, 4), (16, 8))


class ResNetBetaTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    """ResNet-50's checkpoints, whole and without _MISSING, written once."""
    super().setUpClass()
    cls.images = deeplab_testing.random_images(1, 2, _SIZE, _SIZE)
    cls.root = tempfile.mkdtemp()
    cls.expected_50 = write_reference(cls.root, cls.images, *_SHARED,
                                      leave_out=[_MISSING])

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.output_dir = self.create_tempdir().full_path

  def _reference(self, variant, multi_grid, strides):
    """(DeepLab's checkpoint directory, its features)."""
    if (variant, multi_grid, strides) == _SHARED:  # Written in setUpClass.
      return os.path.join(self.root, 'whole'), self.expected_50
    directory = self.create_tempdir().full_path
    expected = write_reference(directory, self.images, variant, multi_grid,
                               strides)
    return os.path.join(directory, 'whole'), expected

  # Block4's unit rates (multi_grid) on the 50, DeepLab's defaults on the
  # 101 (its 17 extra units are block3's, atrous at output stride 8); both
  # atrous output strides on each.
  @parameterized.parameters(_SHARED,
                            ('resnet_v1_101_beta', (1, 1, 1), (16, 8)))
  def test_imported_imagenet_backbone_gives_deeplabs_features(
      self, variant, multi_grid, strides):
    deeplab_dir, expected = self._reference(variant, multi_grid, strides)
    ours, report = deeplab_testing.import_tool.import_checkpoint(
        deeplab_dir, _gin_files(variant),
        _bindings(variant, strides[0], multi_grid), self.output_dir,
        backbone_only=True)
    scope = reference.SCOPES[variant]
    self.assertEqual(report['unused'], {'global_step': ['global_step'],
                                        'other': [f'{scope}/logits/weights']})
    # Every weight of DeepLab's backbone fills one of ours; the ASPP and
    # head stay at initialisation.
    names = tf.train.load_checkpoint(deeplab_dir)
    self.assertCountEqual(
        report['filled'].values(),
        set(names.get_variable_to_shape_map()) - {
            'global_step', f'{scope}/logits/weights'})
    self.assertIn('concat_projection', ' '.join(report['not_filled']))
    for stride in strides:
      gin.clear_config()
      gin_config.parse(_gin_files(variant),
                       _bindings(variant, stride, multi_grid))
      features = our_features(ours, self.images)
      deepest, low = expected[stride]
      self.assertEqual(sorted(features), sorted(['2', _LEVEL[stride]]))
      size = (_SIZE - 1) // stride + 1
      self.assertEqual(deepest.shape, (2, size, size, 256))
      self.assertEqual(low.shape, (2, 9, 9, 32))
      self.assertGreater(min(np.std(deepest), np.std(low)), 0.1)
      self.assertAllClose(features[_LEVEL[stride]], deepest, rtol=0.0,
                          atol=1e-4, msg=f'output stride {stride}')
      self.assertAllClose(features['2'], low, rtol=0.0, atol=1e-4,
                          msg=f'stride-4 features at output stride {stride}')

  def test_a_missing_variable_is_refused_by_name(self):
    with self.assertRaisesRegex(
        checkpoint_names.DeepLabImportError,
        rf'1 variable\(s\) missing \[{_MISSING}\]; 0 of another shape'):
      deeplab_testing.import_tool.import_checkpoint(
          os.path.join(self.root, 'partial'), _gin_files('resnet_v1_50_beta'),
          _bindings('resnet_v1_50_beta', 16, (1, 1, 1)), self.output_dir,
          backbone_only=True)

  def test_output_stride_32_is_atrous_by_the_unit_rates_only(self):
    backbone = resnet_beta.ResNetBeta(output_stride=32, multi_grid=(1, 2, 4),
                                      filter_scale=_SCALE)
    outputs = backbone(tf.zeros([1, _SIZE, _SIZE, 3]))
    self.assertEqual(outputs['5'].shape, (1, 2, 2, 256))
    rates = {layer.name: layer.conv2.conv.dilation_rate[0]
             for layer in backbone.layers
             if isinstance(layer, resnet_beta.Bottleneck)}
    self.assertEqual({name: rate for name, rate in rates.items()
                      if rate != 1},
                     {'block4_unit_2': 2, 'block4_unit_3': 4})

  def test_unknown_choices_name_the_binding(self):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'backbones.ResNetBeta.model_id'):
      resnet_beta.ResNetBeta('resnet_v1_50')
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'backbones.ResNetBeta.output_stride = 4'):
      resnet_beta.ResNetBeta(output_stride=4)
    with self.assertRaisesRegex(validation.ConfigurationError,
                                r'ResNetBeta.multi_grid = \(1, 2\)'):
      resnet_beta.ResNetBeta(multi_grid=(1, 2))


class ResNetBetaTrainingTest(tf.test.TestCase):

  def test_two_gradient_steps_change_the_backbone(self):
    gin.clear_config()
    gin_config.parse(_gin_files('resnet_v1_50_beta'),
                     _bindings('resnet_v1_50_beta', 8, (1, 2, 4)))
    rng = np.random.default_rng(2)
    with tf.Graph().as_default():
      model = model_lib.build_model(num_classes=4)
      images = tf.constant(rng.uniform(-1, 1, (2, _SIZE, _SIZE, 3)),
                           tf.float32)
      logits = model(images, training=True)['logits']
      loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(
          rng.integers(0, 4, logits.shape[:3]), logits)
      # Keras layers built in a graph keep their batch-norm updates per input.
      with tf.control_dependencies(model.get_updates_for(images)):
        step = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, var_list=model.trainable_variables)
      # Kernels, batch-norm scales and moving statistics, at both ends.
      watched = {v.name: v for v in model.variables
                 if v.name.startswith(('conv1_1/', 'block4_unit_3/'))
                 and v.name.endswith(tuple(f'{n}:0' for n in _WEIGHTS))}
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        before = session.run(watched)
        losses = [session.run([loss, step])[0] for _ in range(2)]
        after = session.run(watched)
    self.assertTrue(np.all(np.isfinite(losses)))
    # conv1_1, and block4/unit_3's conv1, conv2 and conv3.
    self.assertLen(watched, 4 * len(_WEIGHTS))
    self.assertEmpty([name for name in watched
                      if np.array_equal(before[name], after[name])])

if __name__ == '__main__':
  tf.test.main()
