"""Dice, Tversky and cross-entropy plus Dice against NumPy references of their formulas."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.modeling import losses
from official_seg.modeling import region_losses
from tests.modeling import loss_testing

IGNORE = loss_testing.IGNORE
LABELS = loss_testing.LABELS


def _overlaps(logits, labels, per_image):
  """(tp, predicted, truth) of the valid pixels, [B, C] or [C], in loops."""
  one_hot, valid = loss_testing.one_hot_and_valid(labels)
  probabilities = loss_testing.softmax(logits)
  groups = [[b] for b in range(len(labels))] if per_image else [
      list(range(len(labels)))]
  sums = np.zeros((3, len(groups), loss_testing.NUM_CLASSES))
  for g, images in enumerate(groups):
    for b in images:
      for index in np.ndindex(valid[b].shape):
        if valid[b][index]:
          p, t = probabilities[b][index], one_hot[b][index]
          sums[:, g] += [p * t, p, t]
  return sums if per_image else sums[:, 0]


def _numpy_tversky(logits, labels, alpha=0.3, beta=0.7, smooth=1e-5,
                   per_image=False, include_background=True):
  tp, predicted, truth = _overlaps(logits, labels, per_image)
  index = (tp + smooth) / (tp + alpha * (predicted - tp) +
                           beta * (truth - tp) + smooth)
  return 1.0 - (index if include_background else index[..., 1:]).mean()


def _numpy_dice(logits, labels, batch_dice=True, smooth=1e-5,
                include_background=True):
  """1 + nnU-Net's MemoryEfficientSoftDiceLoss with loss_mask = valid."""
  tp, predicted, truth = _overlaps(logits, labels, not batch_dice)
  dice = (2 * tp + smooth) / np.maximum(predicted + truth + smooth, 1e-8)
  return 1.0 - (dice if include_background else dice[..., 1:]).mean()


def _numpy_cross_entropy(logits, labels, class_weights=None):
  one_hot, valid = loss_testing.one_hot_and_valid(labels)
  weights = np.ones(3) if class_weights is None else np.array(class_weights)
  log_p = np.log(loss_testing.softmax(logits))
  return -(one_hot * weights * log_p).sum() / (valid.sum() + 1e-5)


def _numpy_ce_dice(logits, labels, ce_weight=1.0, dice_weight=1.0,
                   class_weights=None, **dice_settings):
  return (ce_weight * _numpy_cross_entropy(logits, labels, class_weights) +
          dice_weight * _numpy_dice(logits, labels, **dice_settings))


def _value(loss, values, **settings):
  return loss(tf.constant(values, tf.float32), tf.constant(LABELS), IGNORE,
              **settings)


class RegionLossTestCase(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()


class DiceLossTest(loss_testing.LossContract, RegionLossTestCase):

  loss = staticmethod(region_losses.dice_loss)
  reference = staticmethod(_numpy_dice)
  settings = tuple(
      dict(batch_dice=batch_dice, include_background=background, smooth=smooth)
      for batch_dice in (True, False) for background in (True, False)
      for smooth in (0.0, 1.0))

  def test_per_image_gradient_matches_finite_differences(self):
    # Image 1 lacks the rare class: its term s / (predicted + s) has a
    # gradient too, as in nnU-Net.
    values = loss_testing.logits(seed=7)
    _, grad = loss_testing.gradient(region_losses.dice_loss, values,
                                    batch_dice=False, smooth=1.0)
    expected = loss_testing.numeric_gradient(
        lambda x: _numpy_dice(x, LABELS, batch_dice=False, smooth=1.0), values)
    self.assertAllClose(grad, expected, rtol=1e-4, atol=1e-6)

  def test_a_perfect_prediction_scores_0(self):
    one_hot, _ = loss_testing.one_hot_and_valid(LABELS)
    self.assertAllClose(
        _value(region_losses.dice_loss, 200.0 * one_hot, smooth=0.0), 0.0,
        atol=1e-6)


class TverskyLossTest(loss_testing.LossContract, RegionLossTestCase):

  loss = staticmethod(region_losses.tversky_loss)
  reference = staticmethod(_numpy_tversky)
  settings = (dict(alpha=0.3, beta=0.7, per_image=True),
              dict(alpha=0.7, beta=0.3, smooth=1.0, include_background=False),
              dict(alpha=1.0, beta=1.0, smooth=0.0))

  @parameterized.parameters(True, False)
  def test_halves_are_dice_of_half_the_smooth_term(self, per_image):
    # (tp + s) / (tp + fp/2 + fn/2 + s) = (2 tp + 2s) / (2 tp + fp + fn + 2s).
    values = loss_testing.logits(seed=9)
    self.assertAllClose(
        _value(region_losses.tversky_loss, values, alpha=0.5, beta=0.5,
               smooth=0.5, per_image=per_image),
        _value(region_losses.dice_loss, values, smooth=1.0,
               batch_dice=not per_image), rtol=1e-6)

  def test_negative_weight_is_a_configuration_error(self):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                r'tversky_loss.beta = -0.5: expected'):
      _value(region_losses.tversky_loss, loss_testing.logits(), beta=-0.5)


class CeDiceLossTest(loss_testing.LossContract, RegionLossTestCase):

  loss = staticmethod(region_losses.ce_dice_loss)
  reference = staticmethod(_numpy_ce_dice)
  settings = (dict(ce_weight=0.5, dice_weight=2.0, batch_dice=False),
              dict(class_weights=[1.0, 2.0, 8.0], include_background=False),
              dict(ce_weight=0.0, smooth=1.0))

  def test_is_the_sum_of_cross_entropy_and_dice(self):
    values = loss_testing.logits(seed=11, shape=(2, 2, 3))
    self.assertAllClose(
        _value(region_losses.ce_dice_loss, values, dice_weight=3.0),
        _value(losses.cross_entropy, values) +
        3.0 * _value(region_losses.dice_loss, values), rtol=1e-6)


if __name__ == '__main__':
  tf.test.main()
