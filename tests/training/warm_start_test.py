"""Warm start from name-based and object-based checkpoints, resume, freezing."""

import json
import os
import shutil
import tempfile

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf
from official.vision.modeling import backbones
from official.vision.modeling import decoders

from official_seg.data import tfexample
from official_seg.datasets import synthetic
from official_seg.modeling import model as model_lib
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import gin_config
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.runtime import run_config as run_config_lib
from official_seg.training import warm_start
from tests import testing_utils

FIVE_CLASSES = ['NUM_CLASSES = 5', "CLASS_NAMES = ['a', 'b', 'c', 'd', 'e']"]
THREE_CLASSES = ['NUM_CLASSES = 3', "CLASS_NAMES = ['a', 'b', 'c']"]
# The object-based checkpoints below are of the Model Garden's MobileNetV2.
_V2 = list(testing_utils.MOBILENET_V2)
HEAD = 'segmentation_head/'
LOGITS = 'segmentation_model/segmentation_head/segmentation_output/'
# The shipped layer that starts a run from another task's run.
LAYER = 'warm_start/backbone_and_decoder.gin'


class _InitialValues(tf.compat.v1.train.SessionRunHook):
  """Records every variable once the session is initialised or restored."""

  def begin(self):
    self._variables = tf.compat.v1.global_variables()

  def after_create_session(self, session, coord):
    del coord  # Unused.
    names = [v.name.split(':')[0] for v in self._variables]
    self.values = dict(zip(names, session.run(self._variables)))


def _checkpoint_values(path):
  reader = tf.train.load_checkpoint(path)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()}


def _model_variable_names(values):
  """Model variables: what is left without the global step and the
  optimizer's slots and powers (momentum SGD's or Adam's)."""
  return {name for name in values
          if name not in ('global_step', 'beta1_power', 'beta2_power')
          and not name.endswith(('/Momentum', '/Adam', '/Adam_1'))}


def _write_three_class_dataset(data_dir):
  """Tiny train shards whose triangles are labelled background (0-2)."""
  rng = np.random.default_rng(0)
  examples = []
  for index in range(4):
    image, label = synthetic.make_sample(rng, **testing_utils.TINY_SIZES)
    label[label == 3] = 0
    examples.append(tfexample.make_example(
        tf.io.encode_png(image).numpy(),
        tf.io.encode_png(label[..., None]).numpy(), f'{index}.png', 'png',
        *image.shape[:2]))
  tfexample.write_shards(examples, data_dir, 'train', num_shards=1)


def _object_based_checkpoint(directory):
  """The quickstart's backbone and decoder saved as Model Garden saves them.

  Returns:
    (checkpoint prefix, backbone values, decoder values); the values are
    lists of arrays in the modules' variable order.
  """
  backbone = backbones.MobileNet(model_id='MobileNetV2',
                                 filter_size_scale=0.35, output_stride=8)
  decoder = decoders.ASPP(level=3, dilation_rates=[], num_filters=16)
  decoder(backbone(tf.zeros([1, 33, 33, 3])))
  prefix = tf.train.Checkpoint(backbone=backbone, decoder=decoder).save(
      os.path.join(directory, 'ckpt'))
  return (prefix, [v.numpy() for v in backbone.variables],
          [v.numpy() for v in decoder.variables])


class WarmStartTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    """One 2-step, 5-class source run and one object-based checkpoint."""
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.data_dir = os.path.join(cls.root, 'data')
    testing_utils.write_tiny_dataset(cls.data_dir, num_train=4, num_val=1)
    cls.source_dir = os.path.join(cls.root, 'source')
    testing_utils.parse_tiny_quickstart(
        cls.data_dir, extra=FIVE_CLASSES + _V2)
    estimator, train_fn, _ = estimator_lib.build_estimator(
        run_config_lib.build_run_config(cls.source_dir))[:3]
    estimator.train(train_fn, max_steps=2)
    cls.source_ckpt = estimator.latest_checkpoint()
    cls.object_ckpt, cls.object_backbone, cls.object_decoder = (
        _object_based_checkpoint(os.path.join(cls.root, 'object')))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root)
    super().tearDownClass()

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def _assert_all_but_the_head_restored(self, initial):
    """Checks that every variable but the head's starts as the source run's.

    Args:
      initial: {variable name: its value at step 0} of the warm-started run.

    Returns:
      (the model's variable names, those of its head), sets of str.
    """
    source = _checkpoint_values(self.source_ckpt)
    names = _model_variable_names(initial)
    head = {name for name in names if HEAD in name}
    self.assertLen(head, 12)
    for name in names - head:
      self.assertAllEqual(initial[name], source[name], msg=name)
    for name in head - {LOGITS + 'kernel', LOGITS + 'bias'}:
      self.assertFalse(np.array_equal(initial[name], source[name]), msg=name)
    return names, head

  def _train(self, model_dir, extra, max_steps, data_dir=None, layers=()):
    testing_utils.parse_tiny_quickstart(data_dir or self.data_dir,
                                        extra=list(extra) + _V2)
    if layers:  # Parsed again, with the gin files after the experiment.
      gin.clear_config()
      gin_config.parse(['experiments/quickstart.gin', *layers],
                       testing_utils.tiny_bindings(
                           data_dir or self.data_dir,
                           extra=list(extra) + _V2), finalize=False)
    estimator, train_fn, _ = estimator_lib.build_estimator(
        run_config_lib.build_run_config(model_dir))[:3]
    hook = _InitialValues()
    estimator.train(train_fn, max_steps=max_steps, hooks=[hook])
    return hook.values, estimator.latest_checkpoint()

  def _copy_of_source(self):
    model_dir = os.path.join(self.create_tempdir().full_path, 'run')
    shutil.copytree(self.source_dir, model_dir)
    tf.compat.v1.train.update_checkpoint_state(
        model_dir, os.path.join(model_dir, os.path.basename(self.source_ckpt)))
    return model_dir

  def _read_report(self, model_dir):
    with open(os.path.join(model_dir, warm_start.REPORT_NAME)) as f:
      return json.load(f)

  def test_fewer_classes_excluding_the_head_restores_everything_else(self):
    model_dir = self.create_tempdir().full_path
    data_dir = self.create_tempdir().full_path
    _write_three_class_dataset(data_dir)
    initial, _ = self._train(
        model_dir, THREE_CLASSES + [
            f"INIT_CHECKPOINT = '{self.source_dir}'",
            f"RESTORE_EXCLUSIONS = ['{HEAD}']",
            'USE_TPU_ESTIMATOR = True'], max_steps=1,
        data_dir=data_dir)
    names, head = self._assert_all_but_the_head_restored(initial)
    self.assertEqual(initial[LOGITS + 'kernel'].shape, (1, 1, 16, 3))

    report = self._read_report(model_dir)
    self.assertEqual(report['init_checkpoint'], self.source_ckpt)
    self.assertEqual(report['format'], 'name-based')
    self.assertCountEqual(report['restored'], names - head)
    self.assertEqual(report['excluded'],
                     {name: f"RESTORE_EXCLUSIONS '{HEAD}'" for name in head})
    self.assertEqual((report['missing'], report['skipped_shape']), ([], {}))
    self.assertIn('global_step', report['unused'])

  def test_shipped_layer_restores_backbone_and_decoder_not_the_head(self):
    model_dir = self.create_tempdir().full_path
    data_dir = self.create_tempdir().full_path
    _write_three_class_dataset(data_dir)
    initial, _ = self._train(
        model_dir, THREE_CLASSES + [f"INIT_CHECKPOINT = '{self.source_dir}'"],
        max_steps=1, data_dir=data_dir, layers=[LAYER])
    names, head = self._assert_all_but_the_head_restored(initial)
    report = self._read_report(model_dir)
    self.assertEqual(report['modules'], ['backbone', 'decoder'])
    self.assertCountEqual(report['restored'], names - head)
    self.assertEqual(report['excluded'], {
        name: "module 'head' is not in warm_start.modules" for name in head})
    self.assertEqual((report['missing'], report['skipped_shape']), ([], {}))

  @parameterized.named_parameters(('backbone', ['backbone']), ('all', ['all']))
  def test_object_based_checkpoint_restores_modules_exactly(self, modules):
    testing_utils.parse_tiny_quickstart(self.data_dir, extra=_V2)
    model_dir = self.create_tempdir().full_path
    with tf.Graph().as_default():
      model = model_lib.build_model(num_classes=4)
      model(tf.zeros([1, 33, 33, 3]), training=False)
      scaffold_fn = warm_start.warm_start(
          model, model_dir, init_checkpoint=self.object_ckpt, modules=modules)
      with tf.compat.v1.train.SingularMonitoredSession(
          scaffold=scaffold_fn()) as session:
        restored_backbone = session.run(model.backbone.variables)
        decoder = session.run(model.decoder.variables)
    self.assertLen(restored_backbone, len(self.object_backbone))
    for got, want in zip(restored_backbone, self.object_backbone):
      self.assertAllEqual(got, want)
    report = self._read_report(model_dir)
    self.assertEqual(report['format'], 'object-based')
    # Batch-norm variables start at the same constants either way.
    decoder_restored = [np.array_equal(got, want)
                        for got, want in zip(decoder, self.object_decoder)
                        if want.ndim == 4]
    self.assertLen(decoder_restored, 3)
    if modules == ['all']:
      self.assertTrue(all(decoder_restored))
      self.assertLen(report['restored'], len(model.backbone.variables) +
                     len(model.decoder.variables))
      self.assertCountEqual(report['missing'],
                            [v.name[:-2] for v in model.head.variables])
    else:
      self.assertFalse(any(decoder_restored))
      self.assertLen(report['restored'], len(model.backbone.variables))
      self.assertIn("module 'decoder' is not in warm_start.modules",
                    report['excluded'].values())
      self.assertTrue(any(key.startswith('decoder/')
                          for key in report['unused']))

  def _plan_for_three_classes(self, model_dir, extra):
    """Builds the 3-class model; returns warm_start's scaffold_fn."""
    testing_utils.parse_tiny_quickstart(
        self.data_dir, extra=THREE_CLASSES + [
            f"INIT_CHECKPOINT = '{self.source_ckpt}'"] + extra + _V2)
    model = model_lib.build_model(num_classes=3)
    model(tf.zeros([1, 33, 33, 3]), training=False)
    # LAST_LAYERS reaches the warm start through the model_fn's options.
    return warm_start.warm_start(
        model, model_dir,
        last_layers=model_fn_lib.ModelFnOptions().last_layers)

  def test_shape_mismatch_lists_the_variables_and_the_fix(self):
    model_dir = self.create_tempdir().full_path
    with tf.Graph().as_default(), self.assertRaises(ValueError) as raised:
      self._plan_for_three_classes(model_dir, [])
    message = str(raised.exception)
    self.assertIn(f'{LOGITS}kernel: model [1, 1, 16, 3], checkpoint '
                  '[1, 1, 16, 5]', message)
    self.assertIn(f'{LOGITS}bias: model [3], checkpoint [5]', message)
    self.assertIn(f"RESTORE_EXCLUSIONS = ['{LOGITS}']", message)
    self.assertIn('warm_start.skip_shape_mismatch = True', message)
    self.assertFalse(os.path.exists(
        os.path.join(model_dir, warm_start.REPORT_NAME)))

  @parameterized.named_parameters(
      ('skip', ['warm_start.skip_shape_mismatch = True'], 2, 0),
      ('last_layers', ['INITIALIZE_LAST_LAYER = False'], 0, 27))
  def test_skipped_and_last_layers_are_reported(self, extra, skipped,
                                                excluded):
    model_dir = self.create_tempdir().full_path
    with tf.Graph().as_default():
      scaffold_fn = self._plan_for_three_classes(model_dir, extra)
      with tf.compat.v1.train.SingularMonitoredSession(scaffold=scaffold_fn()):
        pass
    report = self._read_report(model_dir)
    self.assertLen(report['skipped_shape'], skipped)
    self.assertLen(report['excluded'], excluded)
    if skipped:
      self.assertEqual(report['skipped_shape'][LOGITS + 'bias'],
                       {'key': LOGITS + 'bias', 'model_shape': [3],
                        'checkpoint_shape': [5]})
    for name, reason in report['excluded'].items():
      self.assertRegex(name, '^segmentation_model/(aspp|segmentation_head)/')
      self.assertStartsWith(reason, 'INITIALIZE_LAST_LAYER = False')

  def test_checkpoint_of_another_model_restores_nothing_and_says_so(self):
    # A checkpoint of DeepLab's slim MobileNetV2 names its variables so.
    prefix = os.path.join(self.create_tempdir().full_path, 'model.ckpt')
    with tf.Graph().as_default():
      tf.compat.v1.get_variable('MobilenetV2/Conv/weights', [3, 3, 3, 16])
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        tf.compat.v1.train.Saver().save(session, prefix)
    testing_utils.parse_tiny_quickstart(self.data_dir, extra=_V2)
    with tf.Graph().as_default():
      model = model_lib.build_model(num_classes=4)
      model(tf.zeros([1, 33, 33, 3]), training=False)
      with self.assertRaisesRegex(
          ValueError, r"(?s)initialises no variable of the model: 287 are "
          r"not in it.*named like \['MobilenetV2/Conv/weights'\]"):
        warm_start.restore_plan(model, prefix)

  @parameterized.named_parameters(
      ('missing_path', '/nonexistent/model.ckpt-5', ['all'],
       "INIT_CHECKPOINT '/nonexistent/model.ckpt-5' is neither a checkpoint"),
      ('empty_dir', '', ['all'], 'is neither a checkpoint nor a directory'),
      ('bad_module', None, ['head'],
       r"warm_start.modules = \['head'\]: use a list of one or more of"))
  def test_bad_checkpoint_or_module_names_the_binding(self, path, modules,
                                                      message):
    if path == '':
      path = self.create_tempdir().full_path
    with self.assertRaisesRegex(ValueError, message):
      warm_start.restore_plan(None, path or self.source_ckpt, modules)

  def test_checkpoint_in_model_dir_wins_over_init_checkpoint(self):
    model_dir = self._copy_of_source()
    with self.assertLogs('tensorflow', level='INFO') as logs:
      initial, last = self._train(
          model_dir, FIVE_CLASSES + [
              f"INIT_CHECKPOINT = '{self.object_ckpt}'"], max_steps=3)
    self.assertIn(f'Resuming from {model_dir}/model.ckpt-2; INIT_CHECKPOINT '
                  f'{self.object_ckpt} is ignored.', '\n'.join(logs.output))
    source = _checkpoint_values(self.source_ckpt)
    for name in _model_variable_names(source):
      self.assertAllEqual(initial[name], source[name], msg=name)
    self.assertTrue(last.endswith('model.ckpt-3'))
    self.assertFalse(os.path.exists(
        os.path.join(model_dir, warm_start.REPORT_NAME)))

  def test_frozen_variables_and_batch_norm_statistics_do_not_change(self):
    model_dir = self._copy_of_source()
    _, last = self._train(
        model_dir, FIVE_CLASSES + [
            "trainable_variables.freeze = ['^(?!segmentation_model/)']",
            'FINE_TUNE_BATCH_NORM = False'], max_steps=4)
    source = _checkpoint_values(self.source_ckpt)
    trained = _checkpoint_values(last)
    self.assertEqual(trained['global_step'], 4)
    names = _model_variable_names(source)
    unchanged = {name for name in names
                 if np.array_equal(source[name], trained[name])}
    frozen = {name for name in names
              if not name.startswith('segmentation_model/')}
    statistics = {name for name in names if '/moving_' in name}
    self.assertLen(frozen, 260)
    self.assertEqual(unchanged, frozen | statistics)


if __name__ == '__main__':
  tf.test.main()
