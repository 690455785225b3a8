"""DeepLab checkpoints written by a tf-slim DeepLab give our model DeepLab's logits."""

import json
import os
import shutil
import tempfile

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.deeplab import checkpoint_names
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import gin_config
from official_seg.runtime import run_config as run_config_lib
from tests import deeplab_testing
from tests import testing_utils
from tests.commands import command_testing
from tests.deeplab import deeplab_reference
from tests.deeplab import deeplab_reference

import_tool = deeplab_testing.import_tool
our_outputs = deeplab_testing.our_outputs

_SIZE = 65  # DeepLab's crop sizes are 1 + a multiple of the output stride.
_NUM_CLASSES = 4  # datasets/synthetic.gin's.
_RATES = {8: [12, 24, 36], 16: [6, 12, 18]}
# DeepLab's structure at an eighth of its channels, and 32 ASPP and decoder
# filters: the same layers, names and arithmetic at a small cost.
_SCALE, _DEPTH = 0.125, 32
# Entries of a zoo checkpoint that are not network weights.
_EXTRA = {'global_step': [],
          'logits/semantic/weights/Momentum': [1, 1, _DEPTH, _NUM_CLASSES],
          'aspp0/weights/ExponentialMovingAverage': [1, 1, 2048, 256]}
# An ImageNet checkpoint's classifier, which the import leaves out.
_CLASSIFIER = 'xception_65/logits/weights'


def write_reference(directory, images, variant, strides=(16,)):
  """Writes a DeepLabV3+ checkpoint from the tf-slim reference.

  Returns:
    (prefix, {output stride: the reference's logits on `images`}); the
    strides share the variables.
  """
  outputs = {}
  with tf.Graph().as_default():
    inputs = tf.constant(images)
    for i, stride in enumerate(strides):
      with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(),
                                       reuse=bool(i)):
        outputs[stride] = deeplab_reference.deeplab_v3_plus(
            inputs, variant, stride, _RATES[stride], _NUM_CLASSES,
            scale=_SCALE, depth=_DEPTH)
    for name, shape in _EXTRA.items():
      tf.compat.v1.get_variable(name, shape)
    return deeplab_testing.save_randomized(directory, outputs)


def _xception_65_graph(inputs):
  """DeepLab's Xception-65 graph at output strides 16 and 8, one set of
  variables, with an ImageNet classifier and a zoo checkpoint's extras.

  Returns:
    {'logits': {stride: DeepLabV3+ logits}, 'features': the backbone's
    features at output stride 16}.
  """
  logits, features = {}, {}
  end_point = 'xception_65/' + deeplab_reference.DECODER_END_POINT[
      'xception_65']
  for i, stride in enumerate((16, 8)):
    with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(),
                                     reuse=bool(i)):
      # deeplab_reference.deeplab_v3_plus, keeping the backbone's features.
      features[stride], end_points = deeplab_reference.xception(
          inputs, 'xception_65', stride, _SCALE)
      logits[stride] = deeplab_reference.logits(
          features[stride], end_points[end_point], _RATES[stride],
          _NUM_CLASSES, _DEPTH)
  tf.compat.v1.get_variable(_CLASSIFIER, [1, 1, 2048, 3])
  for name, shape in _EXTRA.items():
    tf.compat.v1.get_variable(name, shape)
  return {'logits': logits, 'features': features[16]}


def write_xception_65(root, images):
  """Writes three DeepLab checkpoints of one random Xception-65 graph.

  'v3_plus' is a zoo DeepLabV3+ checkpoint; 'imagenet' the backbone with
  its classifier (an ImageNet checkpoint); 'v3' the zoo checkpoint without
  the decoder's variables (a DeepLabV3 one).

  Returns:
    ({kind: directory}, the reference's outputs on `images`, as
    `_xception_65_graph`).
  """
  with tf.Graph().as_default():
    outputs = _xception_65_graph(tf.constant(images))
    variables = tf.compat.v1.global_variables()
    kinds = {
        'v3_plus': [v for v in variables if v.op.name != _CLASSIFIER],
        'imagenet': [v for v in variables
                     if v.op.name.startswith('xception_65/')
                     or v.op.name == 'global_step'],
        'v3': [v for v in variables if v.op.name != _CLASSIFIER
               and not v.op.name.startswith('decoder/')]}
    directories = {kind: os.path.join(root, kind) for kind in kinds}
    with deeplab_testing.session() as sess:
      deeplab_testing.randomize(sess, np.random.default_rng(0))
      for kind, saved in kinds.items():
        tf.compat.v1.train.Saver(saved).save(
            sess, os.path.join(directories[kind], 'model.ckpt'))
      return directories, sess.run(outputs)


def _bindings(variant, output_stride):
  return [f"backbones.Xception.model_id = '{variant}'",
          f'backbones.Xception.output_stride = {output_stride}',
          f'decoders.DeepLabASPP.dilation_rates = {_RATES[output_stride]}',
          f'backbones.Xception.filter_scale = {_SCALE}',
          f'decoders.DeepLabASPP.num_filters = {_DEPTH}',
          f'heads.DeepLabHead.num_filters = {_DEPTH}']


_GIN_FILES = ['backbones/xception_65.gin', 'datasets/synthetic.gin']


class ImportDeepLabCheckpointTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    """Xception-65's checkpoints, and the import of its zoo one, shared."""
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.images = deeplab_testing.random_images(1, 2, _SIZE, _SIZE)
    cls.xception_65, cls.expected_65 = write_xception_65(cls.root,
                                                         cls.images)
    cls.imported_65 = os.path.join(cls.root, 'imported')
    gin.clear_config()
    cls.ours_65, cls.report_65 = import_tool.import_checkpoint(
        cls.xception_65['v3_plus'], _GIN_FILES, _bindings('xception_65', 16),
        cls.imported_65)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.deeplab_dir = self.create_tempdir().full_path
    self.output_dir = self.create_tempdir().full_path

  def _imported(self, variant, strides):
    """(our checkpoint, the report, its directory, DeepLab's logits)."""
    if variant == 'xception_65':  # Written and imported in setUpClass.
      return (self.ours_65, self.report_65, self.imported_65,
              self.expected_65['logits'])
    _, expected = write_reference(self.deeplab_dir, self.images, variant,
                                  strides)
    ours, report = import_tool.import_checkpoint(
        self.deeplab_dir, _GIN_FILES, _bindings(variant, strides[0]),
        self.output_dir)
    return ours, report, self.output_dir, expected

  @parameterized.parameters(('xception_41', (16, 8)), ('xception_65', (16, 8)),
                            ('xception_71', (16,)))
  def test_imported_logits_equal_deeplabs(self, variant, strides):
    ours, report, output_dir, expected = self._imported(variant, strides)
    for stride in strides:
      # The variables do not depend on the stride: one import serves both.
      gin.clear_config()
      gin_config.parse(_GIN_FILES, _bindings(variant, stride))
      logits = our_outputs(ours, self.images)
      self.assertEqual(logits.shape, (2, 17, 17, _NUM_CLASSES))
      self.assertGreater(np.std(expected[stride]), 0.1)
      self.assertAllClose(logits, expected[stride], rtol=0.0, atol=1e-4,
                          msg=f'output stride {stride}')
    self.assertEqual(report['unused'], {
        'global_step': ['global_step'],
        'moving_average': ['aspp0/weights/ExponentialMovingAverage'],
        'optimizer_slot': ['logits/semantic/weights/Momentum']})
    self.assertEmpty(report['not_filled'])
    with open(os.path.join(output_dir, import_tool.REPORT_NAME),
              encoding='utf-8') as f:
      self.assertEqual(json.load(f)['filled'], report['filled'])
    self.assertEqual(tf.train.load_checkpoint(ours).get_tensor('global_step'),
                     0)

  def test_backbone_of_an_imagenet_checkpoint(self):
    ours, report = import_tool.import_checkpoint(
        self.xception_65['imagenet'], _GIN_FILES,
        _bindings('xception_65', 16), self.output_dir, backbone_only=True)
    features = our_outputs(ours, self.images, backbone=True)
    self.assertGreater(np.std(self.expected_65['features']), 0.1)
    self.assertAllClose(features, self.expected_65['features'], rtol=0.0,
                        atol=1e-4)
    self.assertEqual(report['unused']['other'], [_CLASSIFIER])
    self.assertIn('concat_projection', ' '.join(report['not_filled']))
    self.assertNotIn('entry_flow', ' '.join(report['not_filled']))

  def test_estimator_evaluates_the_imported_model_dir(self):
    # What --mode=eval does: the model_fn's graph restores our checkpoint.
    # Evaluation only adds eval/ to the shared import's directory.
    data_dir = self.create_tempdir().full_path
    testing_utils.write_tiny_dataset(data_dir, num_train=2, num_val=2)
    gin_config.parse(
        ['experiments/quickstart.gin', 'backbones/xception_65.gin'],
        testing_utils.tiny_bindings(
            data_dir, extra=_bindings('xception_65', 16)),
        finalize=False)
    config = run_config_lib.build_run_config(self.imported_65)
    estimator, _, eval_fn = estimator_lib.build_estimator(config)[:3]
    result = estimator.evaluate(eval_fn, steps=None)
    self.assertEqual(result['global_step'], 0)
    self.assertEqual(result['num_images'], 2)

  def test_missing_variables_are_refused_by_name(self):
    # A DeepLabV3 checkpoint (no decoder) for a DeepLabV3+ model.
    with self.assertRaisesRegex(
        checkpoint_names.DeepLabImportError,
        r'25 variable\(s\) missing \[decoder/decoder_conv0_depthwise/'
        r'BatchNorm/beta.*decoder/feature_projection0/weights\]'):
      import_tool.import_checkpoint(
          self.xception_65['v3'], _GIN_FILES, _bindings('xception_65', 16),
          self.output_dir)

  def test_paths_it_cannot_use_are_named_before_any_work(self):
    blocker = os.path.join(self.output_dir, 'a_file')
    with open(blocker, 'w') as f:
      f.write('not a folder')
    with self.assertRaisesRegex(
        validation.ConfigurationError,
        rf'^--output_dir={blocker} is a file; give a folder to write\.$'):
      import_tool.import_checkpoint(self.deeplab_dir, _GIN_FILES, [], blocker)
    with self.assertRaisesRegex(
        validation.MissingFileError,
        rf'^--deeplab_checkpoint={self.deeplab_dir}: no checkpoint there'):
      import_tool.import_checkpoint(self.deeplab_dir, _GIN_FILES, [],
                                    self.output_dir)

  def test_the_command_exits_2_naming_what_is_wrong(self):
    result = command_testing.run_process(
        import_tool, deeplab_checkpoint=self.deeplab_dir,
        gin_file=['backbones/xception_65.gin', 'datasets/synthetic.gin'],
        output_dir=self.output_dir)
    self.assertEqual(result.returncode, 2, result.stderr)
    self.assertEqual(result.stderr.splitlines()[-2:], [
        'Invalid configuration:', f'--deeplab_checkpoint={self.deeplab_dir}: '
        'no checkpoint there (give the prefix, e.g. .../model.ckpt).'])


if __name__ == '__main__':
  tf.test.main()
