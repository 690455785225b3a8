"""Binary cross-entropy and soft Dice of per-class sigmoids against NumPy references."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.modeling import sigmoid_losses
from tests.modeling import loss_testing

IGNORE = loss_testing.IGNORE
# Two images of 3x4 pixels, bit masks of 3 overlapping classes; class 2
# (bit 4) is absent from image 1; two pixels are ignored.
LABELS = np.array([
    [[0, 1, 3, IGNORE],
     [7, 5, 0, 2],
     [1, 1, 6, 0]],
    [[0, 0, 1, 1],
     [2, 3, 3, IGNORE],
     [0, 2, 2, 0]],
], np.int32)[..., np.newaxis]
# The binary case: one foreground class, labels 0 and 1.
BINARY = np.array([[[0, 1, IGNORE], [1, 1, 0]]], np.int32)[..., np.newaxis]


def _targets_and_valid(labels, num_classes):
  labels = labels[..., 0]
  valid = (labels != IGNORE).astype(np.float64)
  bits = np.stack([(np.where(labels == IGNORE, 0, labels) >> c) & 1
                   for c in range(num_classes)], -1)
  return bits * valid[..., None], valid


def _logits(labels, num_classes, seed=0):
  return np.random.default_rng(seed).normal(
      size=labels.shape[:3] + (num_classes,))


def numpy_bce(logits, labels, pos_weight=None):
  """The mean over valid pixels and classes of each class's cross-entropy."""
  targets, valid = _targets_and_valid(labels, logits.shape[-1])
  p = 1 / (1 + np.exp(-logits))
  weight = np.ones(logits.shape[-1]) if pos_weight is None else np.array(
      pos_weight)
  pixel = -(weight * targets * np.log(p) + (1 - targets) * np.log(1 - p))
  return (pixel.mean(-1) * valid).sum() / (valid.sum() + 1e-5)


def numpy_dice(logits, labels, batch_dice=True, smooth=1e-5):
  """1 - the mean Dice of each class (and image), over valid pixels, in loops."""
  targets, valid = _targets_and_valid(labels, logits.shape[-1])
  p = 1 / (1 + np.exp(-logits))
  groups = [list(range(len(labels)))] if batch_dice else [
      [b] for b in range(len(labels))]
  scores = []
  for images in groups:
    for c in range(logits.shape[-1]):
      tp = predicted = truth = 0.0
      for b in images:
        for index in np.ndindex(valid[b].shape):
          if valid[b][index]:
            tp += p[b][index][c] * targets[b][index][c]
            predicted += p[b][index][c]
            truth += targets[b][index][c]
      scores.append((2 * tp + smooth) / (predicted + truth + smooth))
  return 1 - np.mean(scores)


class SigmoidLossesTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((LABELS, 3, None), (LABELS, 3, [1.0, 2.0, 4.0]),
                            (BINARY, 1, None))
  def test_binary_cross_entropy(self, labels, num_classes, pos_weight):
    logits = _logits(labels, num_classes)
    value = sigmoid_losses.binary_cross_entropy_loss(
        tf.constant(logits, tf.float32), tf.constant(labels), IGNORE,
        pos_weight=pos_weight)
    self.assertAllClose(value, numpy_bce(logits, labels, pos_weight),
                        rtol=1e-5)

  @parameterized.parameters((LABELS, 3, True), (LABELS, 3, False),
                            (BINARY, 1, True))
  def test_soft_dice(self, labels, num_classes, batch_dice):
    logits = _logits(labels, num_classes, seed=1)
    value = sigmoid_losses.sigmoid_dice_loss(
        tf.constant(logits, tf.float32), tf.constant(labels), IGNORE,
        batch_dice=batch_dice)
    self.assertAllClose(value, numpy_dice(logits, labels, batch_dice),
                        rtol=1e-5)

  def test_bce_dice_is_the_weighted_sum(self):
    logits = _logits(LABELS, 3, seed=2)
    value = sigmoid_losses.bce_dice_loss(
        tf.constant(logits, tf.float32), tf.constant(LABELS), IGNORE,
        bce_weight=0.5, dice_weight=2.0, batch_dice=False)
    self.assertAllClose(
        value, 0.5 * numpy_bce(logits, LABELS) +
        2.0 * numpy_dice(logits, LABELS, batch_dice=False), rtol=1e-5)

  @parameterized.parameters(sigmoid_losses.binary_cross_entropy_loss,
                            sigmoid_losses.sigmoid_dice_loss,
                            sigmoid_losses.bce_dice_loss)
  def test_ignored_pixels_get_zero_gradient(self, loss):
    _, gradient = loss_testing.gradient(loss, _logits(LABELS, 3, seed=3),
                                        labels=LABELS)
    ignored = LABELS[..., 0] == IGNORE
    self.assertAllEqual(gradient.numpy()[ignored], np.zeros((2, 3)))
    self.assertGreater(np.abs(gradient.numpy()[~ignored]).sum(), 0)

  @parameterized.parameters(*sigmoid_losses.SIGMOID_LOSSES)
  def test_each_declares_the_sigmoid_output_kind(self, name):
    # The runtime refuses it with the softmax kind by this attribute.
    self.assertEqual(getattr(sigmoid_losses, name).output_kind, 'sigmoid')

  def test_float16_logits_give_the_float32_value(self):
    logits = _logits(LABELS, 3, seed=4).astype(np.float16)
    value = sigmoid_losses.bce_dice_loss(tf.constant(logits),
                                         tf.constant(LABELS), IGNORE)
    self.assertEqual(value.dtype, tf.float32)
    expected = numpy_bce(logits.astype(np.float64), LABELS) + numpy_dice(
        logits.astype(np.float64), LABELS)
    self.assertAllClose(value, expected, rtol=1e-5)

  def test_negative_smooth_names_the_binding(self):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'sigmoid_dice_loss.smooth'):
      sigmoid_losses.sigmoid_dice_loss(
          tf.zeros([1, 3, 4, 3]), tf.constant(LABELS[:1]), IGNORE,
          smooth=-1.0)


if __name__ == '__main__':
  tf.test.main()
