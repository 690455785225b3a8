"""DeepLab checkpoints written by a tf-slim DeepLab give our model DeepLab's logits."""

import importlib.util
import json
import os
import subprocess
import sys

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.modeling import deeplab_names
from official_seg.modeling import model as model_lib
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import gin_config
from official_seg.runtime import run_config as run_config_lib
from tests import testing_utils
from tests.modeling import deeplab_reference

_TOOL = os.path.join(testing_utils.REPO, 'tools', 'import_deeplab_checkpoint.py')
_SPEC = importlib.util.spec_from_file_location('import_tool', _TOOL)
import_tool = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(import_tool)

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


def randomize(session, rng):
  """Random weights and batch-norm statistics that keep activations O(1)."""
  feed = {}
  for variable in tf.compat.v1.global_variables():
    shape = variable.shape.as_list()
    name = variable.op.name
    if name.endswith('moving_variance'):
      value = rng.uniform(0.5, 2.0, shape)
    elif name.endswith('gamma'):
      value = rng.uniform(0.5, 1.5, shape)
    elif name.endswith(('beta', 'moving_mean', 'biases')):
      value = rng.normal(0.0, 0.2, shape)
    elif len(shape) == 4:
      fan_in = shape[0] * shape[1] * (1 if 'depthwise' in name else shape[2])
      value = rng.normal(0.0, np.sqrt(1.0 / fan_in), shape)
    else:
      value = np.zeros(shape)
    feed[variable.initializer.inputs[1]] = value.astype(
        variable.dtype.as_numpy_dtype)
  # One run: a `load` per variable adds ops to the graph each time.
  session.run(tf.compat.v1.global_variables_initializer(), feed)


def save_randomized(directory, outputs):
  """Randomizes the graph's variables and saves them as a DeepLab checkpoint.

  Returns:
    (prefix, the values of `outputs`, a structure of the graph's tensors).
  """
  with tf.compat.v1.Session() as session:
    randomize(session, np.random.default_rng(0))
    prefix = tf.compat.v1.train.Saver().save(
        session, os.path.join(directory, 'model.ckpt'))
    return prefix, session.run(outputs)


def write_reference(directory, images, variant, strides=(16,), decoder=True,
                    backbone_only=False):
  """Writes a DeepLab checkpoint from the tf-slim reference.

  Returns:
    (prefix, {output stride: the reference's logits (or backbone features
    with `backbone_only`) on `images`}); the strides share the variables.
  """
  outputs = {}
  with tf.Graph().as_default():
    inputs = tf.constant(images)
    for i, stride in enumerate(strides):
      with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(),
                                       reuse=bool(i)):
        if backbone_only:
          outputs[stride], _ = deeplab_reference.xception(
              inputs, variant, stride, _SCALE)
        else:
          outputs[stride] = deeplab_reference.deeplab_v3_plus(
              inputs, variant, stride, _RATES[stride], _NUM_CLASSES,
              decoder=decoder, scale=_SCALE, depth=_DEPTH)
    if backbone_only:
      # An ImageNet checkpoint's classifier, which the import leaves out.
      tf.compat.v1.get_variable(f'{variant}/logits/weights', [1, 1, 2048, 3])
    for name, shape in _EXTRA.items():
      tf.compat.v1.get_variable(name, shape)
    return save_randomized(directory, outputs)


def our_outputs(checkpoint, images, backbone=False):
  """Our model of the gin files, restored by name as Estimator restores."""
  with tf.Graph().as_default():
    model = model_lib.build_model(num_classes=_NUM_CLASSES)
    outputs = model(tf.constant(images), training=False, with_features=True)
    saver = tf.compat.v1.train.Saver(model.variables)
    with tf.compat.v1.Session() as session:
      saver.restore(session, checkpoint)
      if backbone:
        level = str(model_lib.feature_level(model.backbone))
        return session.run(outputs['backbone_features'][level])
      return session.run(outputs['logits'])


def _bindings(variant, output_stride):
  return [f"backbones.Xception.model_id = '{variant}'",
          f'backbones.Xception.output_stride = {output_stride}',
          f'decoders.DeepLabASPP.dilation_rates = {_RATES[output_stride]}',
          f'backbones.Xception.filter_scale = {_SCALE}',
          f'decoders.DeepLabASPP.num_filters = {_DEPTH}',
          f'heads.DeepLabHead.num_filters = {_DEPTH}']


_GIN_FILES = ['backbones/xception_65.gin', 'datasets/synthetic.gin']


class ImportDeepLabCheckpointTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    rng = np.random.default_rng(1)
    self.images = rng.uniform(-1.0, 1.0, (2, _SIZE, _SIZE, 3)).astype(
        np.float32)
    self.deeplab_dir = self.create_tempdir().full_path
    self.output_dir = self.create_tempdir().full_path

  @parameterized.parameters(('xception_41', (16, 8)), ('xception_65', (16, 8)),
                            ('xception_71', (16,)))
  def test_imported_logits_equal_deeplabs(self, variant, strides):
    _, expected = write_reference(self.deeplab_dir, self.images, variant,
                                  strides)
    ours, report = import_tool.import_checkpoint(
        self.deeplab_dir, _GIN_FILES, _bindings(variant, strides[0]),
        self.output_dir)
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
    with open(os.path.join(self.output_dir, import_tool.REPORT_NAME),
              encoding='utf-8') as f:
      self.assertEqual(json.load(f)['filled'], report['filled'])
    self.assertEqual(tf.train.load_checkpoint(ours).get_tensor('global_step'),
                     0)

  def test_backbone_of_an_imagenet_checkpoint(self):
    _, expected = write_reference(self.deeplab_dir, self.images,
                                  'xception_65', backbone_only=True)
    ours, report = import_tool.import_checkpoint(
        self.deeplab_dir, _GIN_FILES, _bindings('xception_65', 16),
        self.output_dir, backbone_only=True)
    features = our_outputs(ours, self.images, backbone=True)
    self.assertAllClose(features, expected[16], rtol=0.0, atol=1e-4)
    self.assertEqual(report['unused']['other'],
                     ['xception_65/logits/weights'])
    self.assertIn('concat_projection', ' '.join(report['not_filled']))
    self.assertNotIn('entry_flow', ' '.join(report['not_filled']))

  def test_estimator_evaluates_the_imported_model_dir(self):
    # What --mode=eval does: the model_fn's graph restores our checkpoint.
    write_reference(self.deeplab_dir, self.images, 'xception_65')
    bindings = _bindings('xception_65', 16)
    import_tool.import_checkpoint(self.deeplab_dir, _GIN_FILES, bindings,
                                  self.output_dir)
    data_dir = self.create_tempdir().full_path
    testing_utils.write_tiny_dataset(data_dir, num_train=2, num_val=2)
    gin.clear_config()
    gin_config.parse(
        ['experiments/quickstart.gin', 'backbones/xception_65.gin'],
        testing_utils.tiny_bindings(data_dir, extra=bindings),
        finalize=False)
    config = run_config_lib.build_run_config(self.output_dir)
    estimator, _, eval_fn = estimator_lib.build_estimator(config)[:3]
    result = estimator.evaluate(eval_fn, steps=None)
    self.assertEqual(result['global_step'], 0)
    self.assertEqual(result['num_images'], 2)

  def test_missing_variables_are_refused_by_name(self):
    # A DeepLabV3 checkpoint (no decoder) for a DeepLabV3+ model.
    write_reference(self.deeplab_dir, self.images, 'xception_41',
                    decoder=False)
    with self.assertRaisesRegex(
        deeplab_names.DeepLabImportError,
        r'25 variable\(s\) missing \[decoder/decoder_conv0_depthwise/'
        r'BatchNorm/beta.*decoder/feature_projection0/weights\]'):
      import_tool.import_checkpoint(
          self.deeplab_dir, _GIN_FILES, _bindings('xception_41', 16),
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

  def test_the_binary_exits_2_naming_what_is_wrong(self):
    result = subprocess.run(
        [sys.executable, _TOOL, f'--deeplab_checkpoint={self.deeplab_dir}',
         '--gin_file=backbones/xception_65.gin',
         '--gin_file=datasets/synthetic.gin',
         f'--output_dir={self.output_dir}'],
        cwd=testing_utils.REPO, capture_output=True, text=True, check=False,
        timeout=testing_utils.BINARY_TIMEOUT_SECS)
    self.assertEqual(result.returncode, 2, result.stderr)
    self.assertIn(f'--deeplab_checkpoint={self.deeplab_dir}: no checkpoint',
                  result.stderr)


if __name__ == '__main__':
  tf.test.main()
