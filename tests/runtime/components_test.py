"""Tests for the builders the runtime hands down, and the loss they choose."""

import contextlib
import io
import os

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import command_line
from official_seg import validation
from official_seg.data import dataset_info
from official_seg.modeling import inference
from official_seg.modeling import losses
from official_seg.modeling import lovasz
from official_seg.modeling import outputs
from official_seg.modeling import region_losses
from official_seg.modeling import sigmoid_losses
from official_seg.runtime import components as components_lib
from official_seg.runtime import gin_config
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.runtime import run_config as run_config_lib
from tests import testing_utils

_IGNORE = 255


def _numpy_cross_entropy(logits, labels):
  """Mean softmax cross-entropy over the labels that are not `_IGNORE`."""
  logits = logits - logits.max(-1, keepdims=True)
  log_probabilities = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  labels = labels[..., 0]
  valid = labels != _IGNORE
  picked = np.take_along_axis(log_probabilities,
                              np.where(valid, labels, 0)[..., None], -1)
  return -(picked[..., 0] * valid).sum() / valid.sum()


# Registered for the test of a loss chosen in gin: each call's logits,
# labels and value.
_CALLS = []


@gin.configurable
def scaled_cross_entropy(logits, labels, ignore_label, factor=1.0):
  value = factor * losses.cross_entropy(logits, labels, ignore_label)
  _CALLS.append((logits, labels, value))
  return value


class LabeledLossTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    rng = np.random.default_rng(0)
    self.logits = rng.normal(size=(2, 5, 5, 3)).astype(np.float32)
    self.labels = rng.integers(0, 3, size=(2, 17, 17, 1)).astype(np.int32)
    self.labels[:, :2] = _IGNORE

  def test_half_pixel_models_get_the_loss_itself(self):
    components = components_lib.Components()
    self.assertIs(components.labeled_loss, losses.segmentation_loss)

  def test_aligned_models_resize_the_logits_as_deeplab_trains(self):
    components = components_lib.Components(
        inference=inference.InferenceOptions(align_corners=True))
    loss = components.labeled_loss(tf.constant(self.logits),
                                   tf.constant(self.labels), _IGNORE)
    # DeepLab's upsample_logits: TF1's bilinear resize with aligned corners.
    aligned = tf.compat.v1.image.resize_bilinear(
        self.logits, [17, 17], align_corners=True).numpy()
    self.assertAllClose(loss, _numpy_cross_entropy(aligned, self.labels),
                        rtol=1e-5)
    half_pixel = losses.segmentation_loss(tf.constant(self.logits),
                                          tf.constant(self.labels), _IGNORE)
    self.assertGreater(abs(float(loss) - float(half_pixel)), 1e-4)


def images_like(rng):
  return tf.constant(rng.normal(size=(2, 33, 33, 3)), tf.float32)


class ChosenInGinTest(testing_utils.TinyDataTestCase):
  """A loss bound in gin reaches the model_fn's training step."""

  def test_loss_bound_in_gin_trains_the_step(self):
    testing_utils.parse_tiny_quickstart(self.data_dir, extra=[
        'Components.loss = @scaled_cross_entropy',
        'scaled_cross_entropy.factor = 3.0'])
    model_fn = model_fn_lib.make_model_fn(
        dataset_info.DatasetInfo(), model_fn_lib.ModelFnOptions(),
        components_lib.Components())
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    del _CALLS[:]
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 4, size=(2, 33, 33, 1)).astype(np.int32)
    with tf.Graph().as_default():
      images = images_like(rng)
      model_fn({'image': images}, tf.constant(labels),
               tf.estimator.ModeKeys.TRAIN, {'use_tpu': False}, config)
      self.assertLen(_CALLS, 1)
      logits, _, value = _CALLS[0]
      resized = tf.image.resize(logits, [33, 33], method='bilinear')
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        resized, value = session.run((resized, value))
    self.assertAllClose(value, 3.0 * _numpy_cross_entropy(resized, labels),
                        rtol=1e-5)
    # Evaluation's loss is the same function, on logits at the input size.
    with tf.Graph().as_default():
      features = {'image': images_like(rng), 'height': tf.fill([2], 33),
                  'width': tf.fill([2], 33), 'valid': tf.ones([2])}
      model_fn(features, tf.constant(labels), tf.estimator.ModeKeys.EVAL,
               {'use_tpu': False}, config)
    self.assertLen(_CALLS, 2)
    self.assertEqual(_CALLS[1][0].shape.as_list()[1:3], [33, 33])


# gin/losses/: each file and the loss it binds.
_LOSS_FILES = {
    'ce_dice.gin': region_losses.ce_dice_loss,
    'dice.gin': region_losses.dice_loss,
    'focal.gin': losses.focal_loss,
    'lovasz.gin': lovasz.lovasz_softmax_loss,
    'tversky.gin': region_losses.tversky_loss,
    'sigmoid_bce.gin': sigmoid_losses.binary_cross_entropy_loss,
    'sigmoid_dice.gin': sigmoid_losses.sigmoid_dice_loss,
    'sigmoid_bce_dice.gin': sigmoid_losses.bce_dice_loss,
}


class LossGinFilesTest(tf.test.TestCase, parameterized.TestCase):
  """Each file of gin/losses/ alone binds Components.loss to its loss."""

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_every_file_of_the_folder_is_named_here(self):
    self.assertCountEqual(
        os.listdir(os.path.join(gin_config.gin_dir(), 'losses')), _LOSS_FILES)

  @parameterized.parameters(*sorted(_LOSS_FILES))
  def test_binds_the_loss_with_settings_it_accepts(self, name):
    gin.parse_config_files_and_bindings(
        [os.path.join(gin_config.gin_dir(), 'losses', name)], [])
    loss = components_lib.Components().loss
    self.assertIs(loss, _LOSS_FILES[name])
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=(2, 9, 9, 1)).astype(np.int32)
    labels[:, :2] = _IGNORE
    value = loss(tf.constant(rng.normal(size=(2, 3, 3, 3)), tf.float32),
                 tf.constant(labels), _IGNORE)
    self.assertEqual(value.shape, tf.TensorShape([]))
    self.assertTrue(np.isfinite(value.numpy()))


# A user's own losses, outside official_seg/modeling/: each declares its
# kind, or none, where it is defined.
@gin.configurable
def own_undeclared_loss(logits, labels, ignore_label):
  return losses.cross_entropy(logits, labels, ignore_label)


@gin.configurable
@outputs.loss_of_kind('softmax')
def own_softmax_loss(logits, labels, ignore_label):
  return losses.cross_entropy(logits, labels, ignore_label)


@gin.configurable
@outputs.loss_of_kind('sigmoid')
def own_sigmoid_loss(logits, labels, ignore_label):
  return sigmoid_losses.binary_cross_entropy_loss(logits, labels,
                                                  ignore_label)


class OwnClassLoss:
  """A loss object; its class declares the kind."""

  output_kind = 'sigmoid'

  def __call__(self, logits, labels, ignore_label):
    return sigmoid_losses.binary_cross_entropy_loss(logits, labels,
                                                    ignore_label)


def own_misdeclared_loss(logits, labels, ignore_label):
  return losses.cross_entropy(logits, labels, ignore_label)


own_misdeclared_loss.output_kind = 'sigmoids'

_SIGMOID = inference.InferenceOptions(output=outputs.OutputKind('sigmoid'))


class OutputKindLossTest(tf.test.TestCase, parameterized.TestCase):
  """A loss made for the other output kind stops the run, naming both."""

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def _components(self, *files, bindings=()):
    gin.clear_config()
    gin.parse_config_files_and_bindings(
        [os.path.join(gin_config.gin_dir(), name) for name in files],
        list(bindings))
    return components_lib.Components()

  @parameterized.parameters(*sorted(_LOSS_FILES))
  def test_each_loss_of_ours_declares_its_kind(self, name):
    expected = 'sigmoid' if name.startswith('sigmoid_') else 'softmax'
    self.assertEqual(outputs.declared_kind(_LOSS_FILES[name]), expected)
    self.assertEqual(_LOSS_FILES[name].output_kind, expected)

  def test_the_default_loss_declares_softmax(self):
    self.assertEqual(components_lib.Components().loss.output_kind, 'softmax')

  @parameterized.parameters('losses/dice.gin', 'losses/focal.gin')
  def test_softmax_loss_after_the_sigmoid_head(self, loss_file):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                "is a softmax loss, but OutputKind.kind = "
                                "'sigmoid'"):
      self._components('heads/sigmoid.gin', loss_file)

  def test_sigmoid_loss_with_the_softmax_kind(self):
    gin.parse_config_files_and_bindings(
        [os.path.join(gin_config.gin_dir(), 'losses', 'sigmoid_dice.gin')],
        ["OutputKind.kind = 'softmax'"])
    with self.assertRaisesRegex(validation.ConfigurationError,
                                '@sigmoid_dice_loss needs the sigmoid'):
      components_lib.Components()

  def test_the_head_file_trains_with_binary_cross_entropy(self):
    components = self._components('heads/sigmoid.gin')
    self.assertIs(components.loss, sigmoid_losses.binary_cross_entropy_loss)
    self.assertTrue(components.inference.output.sigmoid)

  def test_own_softmax_loss_after_the_sigmoid_head(self):
    with self.assertRaisesRegex(
        validation.ConfigurationError,
        "^Components.loss = @own_softmax_loss is a softmax loss, but "
        "OutputKind.kind = 'sigmoid'"):
      self._components('heads/sigmoid.gin',
                       bindings=['Components.loss = @own_softmax_loss'])

  def test_own_undeclared_loss_is_taken_for_softmax(self):
    components = self._components(
        bindings=['Components.loss = @own_undeclared_loss'])
    self.assertIs(components.loss, own_undeclared_loss)
    with self.assertRaisesRegex(
        validation.ConfigurationError,
        '@own_undeclared_loss declares no output_kind, so is taken for a '
        "softmax loss, but OutputKind.kind = 'sigmoid'.*output_kind = "
        "'sigmoid'"):
      self._components('heads/sigmoid.gin',
                       bindings=['Components.loss = @own_undeclared_loss'])

  def test_own_sigmoid_loss_trains_the_sigmoid_kind_only(self):
    components = self._components(
        'heads/sigmoid.gin', bindings=['Components.loss = @own_sigmoid_loss'])
    self.assertIs(components.loss, own_sigmoid_loss)
    with self.assertRaisesRegex(validation.ConfigurationError,
                                '@own_sigmoid_loss needs the sigmoid'):
      self._components(bindings=['Components.loss = @own_sigmoid_loss'])

  def test_a_loss_object_declares_by_its_class(self):
    loss = OwnClassLoss()
    self.assertIs(components_lib.Components(loss=loss, inference=_SIGMOID).loss,
                  loss)
    with self.assertRaisesRegex(validation.ConfigurationError,
                                '@OwnClassLoss needs the sigmoid'):
      components_lib.Components(loss=loss)

  def test_an_unknown_declared_kind_is_refused(self):
    with self.assertRaisesRegex(
        validation.ConfigurationError,
        "@own_misdeclared_loss declares output_kind = 'sigmoids'; declare "
        "one of 'softmax', 'sigmoid'"):
      components_lib.Components(loss=own_misdeclared_loss)

  def test_the_refusal_is_one_line_and_exit_status_2(self):

    def main(argv):
      del argv  # Unused.
      self._components('heads/sigmoid.gin',
                       bindings=['Components.loss = @own_softmax_loss'])

    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
      status = command_line.call(main, ['train_and_eval'])
    self.assertEqual(status, 2)
    lines = stderr.getvalue().splitlines()
    self.assertEqual(lines[0], 'Invalid configuration:')
    self.assertLen(lines, 2)
    self.assertStartsWith(lines[1], 'Components.loss = @own_softmax_loss ')


if __name__ == '__main__':
  tf.test.main()
