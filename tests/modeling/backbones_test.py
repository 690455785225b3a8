"""Every gin/backbones file builds its model at a tiny size and trains.

Each file is layered on the quickstart experiment, as users layer them, so
the DeepLabV3+ head reads the backbone's low-level features too.
"""

import glob
import math
import os
import re

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg.data import dataset_info
from official_seg.modeling import model as model_lib
from official_seg.runtime import experiment
from official_seg.runtime import gin_config
from official_seg.runtime import components as components_lib
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.runtime import run_config as run_config_lib
from tests import deeplab_testing
from tests import testing_utils

_FILES = sorted(os.path.basename(p) for p in
                glob.glob(os.path.join(gin_config.gin_dir(), 'backbones',
                                       '*.gin')))
# Thin widths per backbone class, so that every file builds and trains in
# seconds; classes without a width setting are built as the file says.
_THIN = {
    'MobileNet': ['backbones.MobileNet.filter_size_scale = 0.25'],
    'MobileDet': ['backbones.MobileDet.filter_size_scale = 0.25'],
    'SpineNet': ['backbones.SpineNet.filter_size_scale = 0.25',
                 'backbones.SpineNet.endpoints_num_filters = 8'],
    'SpineNetMobile': ['backbones.SpineNetMobile.filter_size_scale = 0.25',
                       'backbones.SpineNetMobile.endpoints_num_filters = 8'],
    'Xception': ['backbones.Xception.filter_scale = 0.25',
                 'decoders.DeepLabASPP.num_filters = 8',
                 'heads.DeepLabHead.num_filters = 8',
                 'heads.DeepLabHead.low_level_num_filters = 8'],
}
_SMALL = ['decoders.ASPP.num_filters = 8',
          'heads.SegmentationHead.num_filters = 8',
          'heads.SegmentationHead.low_level_num_filters = 8',
          # Without weight decay, a stem that changes proves the loss's
          # gradient reached it through the whole backbone.
          'build_model.weight_decay = 0.0']
_NUM_CLASSES = 3
_BATCH = 2
# The DeepLab backbone files train through the Estimator's machinery, as the
# binary trains them: each takes a step of the model_fn's training graph in a
# session, the graph the Estimator runs, where a Keras input captured at
# construction is an unfed placeholder (the failure that withdrew
# efficientnet_b0.gin) and where the Estimator's Saver names every variable.
# The runtime's input pipeline, summaries (which resize the logits of any
# head) and checkpoint writing do not depend on the backbone: one file trains
# two steps through the runtime. The others train an eager step: a graph
# costs several times the eager step (graph building, sessions).
_THROUGH_RUNTIME = 'deeplab_mobilenet_v3_small.gin'
_GRAPH_STEP = ['deeplab_mobilenet_v2.gin', 'deeplab_mobilenet_v3_large.gin',
               'resnet_v1_50_beta.gin', 'resnet_v1_101_beta.gin',
               'xception_65.gin']
_DEEPLAB = [_THROUGH_RUNTIME] + _GRAPH_STEP
_EAGER = [name for name in _FILES if name not in _DEEPLAB]


def _stated_output_stride(name):
  """The output stride the file's opening comment states."""
  with open(os.path.join(gin_config.gin_dir(), 'backbones', name)) as f:
    # The phrase may wrap onto the next comment line.
    return int(re.search(r'output\s+(?:#\s*)?stride\s+(?:#\s*)?(\d+)',
                         f.read(), re.IGNORECASE).group(1))


def _crop_size(name):
  # SpineNet merges levels 3-7 by resampling, RevNet adds pooled and
  # strided paths: sizes multiples of their coarsest stride.
  if 'spinenet' in name:
    return 128
  return 32 if 'revnet' in name else 33


def _logits_level(head):
  """The level of the head's logits: its low level when it fuses one."""
  config = head.get_config()
  fuses = config.get('feature_fusion', 'deeplabv3plus') == 'deeplabv3plus'
  low_level = config.get('low_level')
  return low_level if fuses and low_level is not None else config['level']


def _file_bindings(name):
  """The thin widths of the file's backbone class, and the file's own
  MobileNet model_id, which tiny_bindings' MobileNetV1 would override."""
  gin.clear_config()
  gin_config.parse(['experiments/quickstart.gin', f'backbones/{name}'], [],
                   finalize=False)
  backbone = gin.query_parameter('build_model.backbone').selector
  model_id = gin.query_parameter('backbones.MobileNet.model_id')
  return _THIN.get(backbone.split('.')[-1], []) + [
      f'backbones.MobileNet.model_id = {model_id!r}']


def _assert_shapes(test, name, model, outputs, size, batch,
                   num_classes=_NUM_CLASSES):
  """The features at the file's stated output stride, the logits at the
  head's; `outputs` those of `model` with_features on `size` images."""
  # A stride-s network with 'SAME' padding maps n pixels to ceil(n / s).
  stride = _stated_output_stride(name)
  level = str(model.head.get_config()['level'])
  features = outputs['backbone_features'][level]
  test.assertEqual(features.shape[1:3], (math.ceil(size / stride),) * 2)
  logits_stride = 2 ** _logits_level(model.head)
  test.assertEqual(outputs['logits'].shape, (batch,) + (
      math.ceil(size / logits_stride),) * 2 + (num_classes,))


def _changed(initial, final, name):
  """Whether checkpoint variable `name` moved from `initial` to `final`."""
  return np.max(np.abs(final.get_tensor(name) - initial.get_tensor(name))) > 0


class BackboneFilesTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_found_the_shipped_files(self):
    self.assertContainsSubset(
        ['mobilenet_v2.gin', 'mobilenet_v3_large.gin', 'mobiledet_cpu.gin',
         'spinenet_mobile_49.gin'], _FILES)
    self.assertContainsSubset(_DEEPLAB, _FILES)

  def _parse(self, name):
    gin_config.parse(['experiments/quickstart.gin', f'backbones/{name}'],
                     _SMALL, finalize=False)
    backbone = gin.query_parameter('build_model.backbone').selector
    gin.parse_config(_THIN.get(backbone.split('.')[-1], []))

  @parameterized.parameters(*_EAGER)
  def test_builds_and_trains_a_step(self, name):
    self._parse(name)
    size = _crop_size(name)
    model = model_lib.build_model(num_classes=_NUM_CLASSES)
    images = tf.random.stateless_uniform([_BATCH, size, size, 3], [1, 2])
    # A forward pass builds the head, whose weights exist from there; it
    # costs less than the gradient step that built it before.
    outputs = model(images, training=False, with_features=True)
    _assert_shapes(self, name, model, outputs, size, _BATCH)
    labels = tf.random.stateless_uniform(
        outputs['logits'].shape[:3], [3, 4], maxval=_NUM_CLASSES,
        dtype=tf.int32)
    stem = model.backbone.trainable_variables[0]
    last = model.head.trainable_variables[-1]
    stem_before, last_before = stem.numpy(), last.numpy()
    # Eager: tracing a graph costs more than one eager step.
    with tf.GradientTape() as tape:
      logits = model(images, training=True)['logits']
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels, logits))
    variables = model.trainable_variables
    tf.keras.optimizers.SGD(0.1).apply_gradients(
        zip(tape.gradient(loss, variables), variables))
    self.assertTrue(np.isfinite(loss.numpy()), loss)
    self.assertGreater(np.max(np.abs(stem.numpy() - stem_before)), 0.0)
    self.assertGreater(np.max(np.abs(last.numpy() - last_before)), 0.0)

  @parameterized.parameters(
      ('mobilenet_v3_large.gin', 'backbones.MobileNet.output_stride = 8', 8),
      ('mobilenet_v3_small.gin', 'backbones.MobileNet.output_stride = 32',
       32),
      ('spinenet_mobile_49.gin', 'build_model.level = 3', 8))
  def test_other_stated_output_strides(self, name, binding, stride):
    self._parse(name)
    gin.parse_config([binding])
    size = _crop_size(name)
    model = model_lib.build_model(num_classes=_NUM_CLASSES)
    outputs = model(tf.zeros([1, size, size, 3]), training=False,
                    with_features=True)
    level = str(model.head.get_config()['level'])
    self.assertEqual(outputs['backbone_features'][level].shape[1:3],
                     (math.ceil(size / stride),) * 2)


class BackboneTrainingTest(tf.test.TestCase, parameterized.TestCase):
  """Training of the DeepLab files through the Estimator's machinery."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = os.path.join(tf.compat.v1.test.get_temp_dir(), 'data')
    testing_utils.write_tiny_dataset(cls.data_dir, num_train=2, num_val=1)

  def _parse(self, name):
    size = _crop_size(name)
    extra = _SMALL + _file_bindings(name) + [f'CROP_SIZE = [{size}, {size}]']
    gin.clear_config()
    gin_config.parse(['experiments/quickstart.gin', f'backbones/{name}'],
                     testing_utils.tiny_bindings(self.data_dir, 2, extra),
                     finalize=False)
    return size

  @parameterized.parameters(*_GRAPH_STEP)
  def test_trains_a_step_of_the_model_fns_graph(self, name):
    size = self._parse(name)
    dataset = dataset_info.DatasetInfo()
    built = []
    # The model builder handed to the model_fn, recording what it built.
    build = lambda **kwargs: built.append(model_lib.build_model(**kwargs)) or (
        built[-1])
    model_fn = model_fn_lib.make_model_fn(
        dataset, model_fn_lib.ModelFnOptions(),
        components_lib.Components(model=build))
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    with tf.Graph().as_default():
      images = tf.random.stateless_uniform([_BATCH, size, size, 3], [1, 2])
      labels = tf.random.stateless_uniform(
          [_BATCH, size, size, 1], [3, 4], maxval=_NUM_CLASSES, dtype=tf.int32)
      spec = model_fn({'image': images}, labels, tf.estimator.ModeKeys.TRAIN,
                      {'use_tpu': False}, config)
      variables = tf.compat.v1.trainable_variables()
      # The Estimator's Saver refuses variables that share a name.
      tf.compat.v1.train.Saver()
      model, = built
      # The same model again in this graph: static shapes, nothing to run.
      _assert_shapes(self, name, model,
                     model(images, training=False, with_features=True),
                     size, _BATCH, dataset.num_classes)
      with deeplab_testing.session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        before = session.run(variables)
        loss, _ = session.run([spec.loss, spec.train_op])
        after = session.run(variables)
    self.assertTrue(np.isfinite(loss), loss)
    # The gradient reached every variable, the stem and the head included.
    self.assertEmpty([v.op.name for v, b, a in zip(variables, before, after)
                      if np.array_equal(b, a)])

  def _names(self, name):
    """The backbone's first and the head's last trainable variable; checks
    the shapes of a forward pass in a graph (static, nothing runs)."""
    with tf.Graph().as_default():
      model = model_lib.build_model(num_classes=_NUM_CLASSES)
      size = _crop_size(name)
      _assert_shapes(self, name, model, model(
          tf.zeros([1, size, size, 3]), training=True, with_features=True),
                     size, 1)
      return (model.backbone.trainable_variables[0].op.name,
              model.head.trainable_variables[-1].op.name)

  def test_trains_two_steps_through_the_runtime(self):
    name = _THROUGH_RUNTIME
    self._parse(name)
    model_dir = self.create_tempdir().full_path
    experiment.run('train', model_dir)
    initial = tf.train.load_checkpoint(os.path.join(model_dir, 'model.ckpt-0'))
    final = tf.train.load_checkpoint(model_dir)
    self.assertEqual(final.get_tensor('global_step'), 2)
    first, last = self._names(name)
    self.assertTrue(_changed(initial, final, first), first)
    self.assertTrue(_changed(initial, final, last), last)
    losses = _loss_summaries(model_dir)
    self.assertNotEmpty(losses)
    self.assertTrue(np.all(np.isfinite(list(losses.values()))), losses)


def _loss_summaries(model_dir):
  """{(tag, step): value} of the scalar summaries whose tag names a loss."""
  values = {}
  for path in tf.io.gfile.glob(os.path.join(model_dir, '*.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if 'loss' in value.tag:
          values[(value.tag, event.step)] = tf.make_ndarray(value.tensor) \
              if value.HasField('tensor') else value.simple_value
  return values


if __name__ == '__main__':
  tf.test.main()
