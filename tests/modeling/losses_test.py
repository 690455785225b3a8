"""Tests for the segmentation loss: exact values, ignore pixels, options."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf
from official.vision.losses import segmentation_losses

from official_seg import validation
from official_seg.modeling import losses
from official_seg.modeling import model as model_lib
from tests.modeling import loss_testing

IGNORE = 255
# One image, 2x2 pixels, 3 classes; the top-right pixel is ignored.
LOGITS = np.array([[[[2.0, 0.5, -1.0], [0.3, 0.2, 0.1]],
                    [[-0.5, 1.5, 0.0], [1.0, -2.0, 3.0]]]], np.float32)
LABELS = np.array([[[[0], [IGNORE]], [[2], [1]]]], np.int32)


def _log_softmax(logits):
  shifted = logits - logits.max(-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def _pixel_losses(smoothing=0.0):
  """Per-pixel cross-entropy of the valid pixels, in NumPy."""
  log_probs = _log_softmax(LOGITS[0].reshape(-1, 3))
  labels = LABELS[0].reshape(-1)
  valid = labels != IGNORE
  targets = np.eye(3)[np.where(valid, labels, 0)] * (1 - smoothing) + smoothing / 3
  return -(targets * log_probs).sum(-1)[valid], labels[valid]


class LossesTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def _loss(self, **kwargs):
    return float(losses.segmentation_loss(
        tf.constant(LOGITS), tf.constant(LABELS), ignore_label=IGNORE, **kwargs))

  def test_the_default_loss_declares_the_softmax_output_kind(self):
    self.assertEqual(losses.segmentation_loss.output_kind, 'softmax')

  def test_mean_over_valid_pixels(self):
    per_pixel, _ = _pixel_losses()
    # The Model Garden loss divides by (valid pixels + 1e-5).
    self.assertAllClose(self._loss(), per_pixel.mean(), rtol=1e-5)

  def test_ignore_pixels_get_zero_gradient(self):
    logits = tf.constant(LOGITS)
    with tf.GradientTape() as tape:
      tape.watch(logits)
      loss = losses.segmentation_loss(logits, tf.constant(LABELS),
                                      ignore_label=IGNORE)
    grad = tape.gradient(loss, logits).numpy()
    self.assertAllEqual(grad[0, 0, 1], np.zeros(3))
    self.assertGreater(np.abs(grad[0, 0, 0]).sum(), 0)
    self.assertGreater(np.abs(grad[0, 1, 1]).sum(), 0)

  def test_ignore_pixel_value_does_not_change_loss(self):
    changed = LOGITS.copy()
    changed[0, 0, 1] = [50.0, -50.0, 7.0]
    loss = losses.segmentation_loss(tf.constant(changed), tf.constant(LABELS),
                                    ignore_label=IGNORE)
    self.assertAllClose(float(loss), self._loss(), rtol=1e-6)

  def test_class_weights(self):
    per_pixel, labels = _pixel_losses()
    weights = np.array([0.5, 2.0, 1.0])
    expected = (per_pixel * weights[labels]).sum() / len(labels)
    self.assertAllClose(self._loss(class_weights=list(weights)), expected,
                        rtol=1e-5)

  def test_label_smoothing(self):
    per_pixel, _ = _pixel_losses(smoothing=0.1)
    self.assertAllClose(self._loss(label_smoothing=0.1), per_pixel.mean(),
                        rtol=1e-5)

  def test_top_k_keeps_the_hardest_pixels(self):
    per_pixel, _ = _pixel_losses()
    # Half of the 4 pixels: the two largest losses among the valid ones.
    expected = np.sort(per_pixel)[-2:].mean()
    self.assertAllClose(self._loss(top_k_percent_pixels=0.5), expected,
                        rtol=1e-5)

  @parameterized.parameters((None,), ([0.5, 2.0, 1.0, 0.25],))
  def test_sparse_path_equals_the_model_garden_loss(self, class_weights):
    # Logits at a quarter of the label size, as the model outputs them; a
    # fifth of the labels ignored.
    rng = np.random.default_rng(0)
    logits = tf.constant(rng.normal(size=(2, 5, 6, 4)), tf.float32)
    labels = rng.integers(0, 4, size=(2, 17, 21, 1))
    labels[rng.random(labels.shape) < 0.2] = IGNORE
    labels = tf.constant(labels, tf.int32)
    reference = segmentation_losses.SegmentationLoss(
        label_smoothing=0.0, class_weights=class_weights,
        ignore_label=IGNORE, use_groundtruth_dimension=True,
        top_k_percent_pixels=1.0)
    with tf.GradientTape(persistent=True) as tape:
      tape.watch(logits)
      ours = losses.segmentation_loss(logits, labels, ignore_label=IGNORE,
                                      class_weights=class_weights)
      theirs = reference(logits, labels)
    self.assertAllClose(float(ours), float(theirs), rtol=1e-6)
    self.assertAllClose(tape.gradient(ours, logits),
                        tape.gradient(theirs, logits), rtol=1e-5, atol=1e-8)

  def test_regularization_loss_is_deeplab_weight_decay(self):
    gin.parse_config([
        "build_model.backbone = @backbones.MobileNet",
        "backbones.MobileNet.filter_size_scale = 0.35",
        "build_model.weight_decay = 0.01",
        "decoders.ASPP.dilation_rates = []",
        "decoders.ASPP.num_filters = 8",
    ])
    model = model_lib.build_model(num_classes=3)
    images = tf.zeros([1, 33, 33, 3])
    model(images, training=False)
    decay = losses.regularization_loss([model])
    kernels = [v for v in model.trainable_variables
               if 'kernel' in v.name and 'depthwise' not in v.name]
    expected = 0.01 / 2 * sum(float(tf.reduce_sum(v ** 2)) for v in kernels)
    self.assertGreater(expected, 0)
    self.assertAllClose(float(decay), expected, rtol=1e-4)
    self.assertEqual(float(losses.regularization_loss([])), 0.0)


def _numpy_focal(logits, labels, gamma=2.0, class_weights=None):
  """Lin et al.'s -alpha_y (1 - p_y)^gamma log p_y over valid pixels + 1e-5."""
  one_hot, valid = loss_testing.one_hot_and_valid(labels)
  p_y = (loss_testing.softmax(logits) * one_hot).sum(-1)
  p_y = np.where(valid > 0, p_y, 1.0)  # log 1 = 0 where ignored.
  weights = np.ones(loss_testing.NUM_CLASSES) if class_weights is None else (
      np.array(class_weights))
  alpha = (one_hot * weights).sum(-1)
  pixel = -alpha * (1.0 - p_y) ** gamma * np.log(p_y)
  return pixel.sum() / (valid.sum() + 1e-5)


class FocalLossTest(loss_testing.LossContract, tf.test.TestCase,
                    parameterized.TestCase):

  loss = staticmethod(losses.focal_loss)
  reference = staticmethod(_numpy_focal)
  settings = (dict(gamma=0.5), dict(gamma=2.0, class_weights=[1.0, 2.0, 8.0]),
              dict(gamma=5.0))

  def setUp(self):
    super().setUp()
    gin.clear_config()

  @parameterized.parameters((None,), ([1.0, 2.0, 8.0],))
  def test_gamma_0_is_cross_entropy(self, class_weights):
    values = tf.constant(loss_testing.logits(seed=6), tf.float32)
    labels = tf.constant(loss_testing.LABELS)
    self.assertAllClose(
        losses.focal_loss(values, labels, IGNORE, gamma=0.0,
                          class_weights=class_weights),
        losses.cross_entropy(values, labels, IGNORE, class_weights),
        rtol=1e-6)

  @parameterized.parameters(0.0, 0.5, 2.0)
  def test_certain_pixels_give_a_finite_gradient(self, gamma):
    # Logits 100 apart: p_y is 1 in float32, where (1 - p)^gamma has an
    # infinite slope for gamma < 1.
    values = np.where(np.eye(3)[np.minimum(loss_testing.LABELS[..., 0], 2)],
                      100.0, 0.0)
    _, grad = loss_testing.gradient(losses.focal_loss, values, gamma=gamma)
    self.assertAllEqual(np.isfinite(grad.numpy()), np.ones(values.shape, bool))

  def test_negative_gamma_is_a_configuration_error(self):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                r'focal_loss.gamma = -1.0: expected a number'):
      losses.focal_loss(tf.zeros([1, 2, 2, 3]), tf.zeros([1, 2, 2, 1], tf.int32),
                        IGNORE, gamma=-1.0)


if __name__ == '__main__':
  tf.test.main()
