"""The sigmoid output kind's losses: binary cross-entropy, soft Dice, and their sum."""

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.modeling import losses
from official_seg.modeling import outputs

# The floor of a Dice denominator, for smooth = 0 and an empty class.
_MIN_DENOMINATOR = 1e-8


def sigmoid_inputs(logits, labels, ignore_label):
  """Float32 logits at the labels' size, per-class targets, valid pixels.

  Args:
    logits: float [B, h, w, C], any float dtype.
    labels: int [B, H, W, 1], bit masks of the classes (`outputs.label_bits`).
    ignore_label: int.

  Returns:
    (logits float32 [B, H, W, C], targets float32 [B, H, W, C] of 0 and 1,
    valid float32 [B, H, W]).
  """
  logits = losses.pixel_inputs(logits, labels, ignore_label)[0]
  targets, valid = outputs.label_bits(labels, logits.shape[-1], ignore_label)
  return logits, targets, valid


def _binary_cross_entropy(logits, targets, valid, pos_weight):
  """The mean over classes of each pixel's cross-entropy, over (valid + 1e-5)."""
  if pos_weight is None:
    pixel_losses = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=targets, logits=logits)
  else:
    pixel_losses = tf.nn.weighted_cross_entropy_with_logits(
        labels=targets, logits=logits,
        pos_weight=tf.constant(pos_weight, tf.float32))
  pixel_losses = tf.reduce_mean(pixel_losses, -1) * valid
  return tf.reduce_sum(pixel_losses) / (tf.reduce_sum(valid) + 1e-5)


def _soft_dice(logits, targets, valid, batch_dice, smooth):
  """1 - the mean over classes (and images) of (2 tp + s) / (p + g + s)."""
  valid = valid[..., tf.newaxis]
  probabilities = tf.sigmoid(logits) * valid
  targets = targets * valid
  axes = [0, 1, 2] if batch_dice else [1, 2]
  true_positive = tf.reduce_sum(probabilities * targets, axes)
  denominator = (tf.reduce_sum(probabilities, axes) +
                 tf.reduce_sum(targets, axes) + smooth)
  dice = (2.0 * true_positive + smooth) / tf.maximum(denominator,
                                                      _MIN_DENOMINATOR)
  return 1.0 - tf.reduce_mean(dice)


@gin.configurable(denylist=['logits', 'labels', 'ignore_label'])
@outputs.loss_of_kind('sigmoid')
def binary_cross_entropy_loss(logits, labels, ignore_label, pos_weight=None):
  """Binary cross-entropy of each class's sigmoid, over the valid pixels.

  Each pixel's loss is the mean over the C classes of
  -[g log p + (1 - g) log(1 - p)] (with `pos_weight` w, the first term
  times w_c); the sum over pixels is divided by the valid pixels, as
  softmax cross-entropy's is. Ignored pixels add nothing and get zero
  gradient.

  Args:
    logits: float [B, h, w, C].
    labels: int [B, H, W, 1], bit masks of the classes, or `ignore_label`.
    ignore_label: int.
    pos_weight: None, or a list of C floats weighing each class's
      positives (a rare foreground class: its negatives / positives).

  Returns:
    Scalar float32.
  """
  return _binary_cross_entropy(*sigmoid_inputs(logits, labels, ignore_label),
                               pos_weight)


@gin.configurable(denylist=['logits', 'labels', 'ignore_label'])
@outputs.loss_of_kind('sigmoid')
@validation.checked(smooth=validation.NUMBER_AT_LEAST_0)
def sigmoid_dice_loss(logits, labels, ignore_label, batch_dice=True,
                      smooth=1e-5):
  """1 - the mean soft Dice of each class's sigmoid against its mask.

  Dice_c = (2 sum p g + s) / (sum p + sum g + s) over the valid pixels, p
  the class's sigmoid and g its 0/1 target; a class absent from the batch
  (image, without `batch_dice`) stays in the mean, its term pushing its
  predicted mass down, as the softmax `dice_loss` does.

  Args:
    logits: float [B, h, w, C].
    labels: int [B, H, W, 1], bit masks of the classes, or `ignore_label`.
    ignore_label: int.
    batch_dice: bool, one Dice per class over the batch, else one per image
      and class, then the mean.
    smooth: float >= 0, added to numerator and denominator.

  Returns:
    Scalar float32.
  """
  validation.check(sigmoid_dice_loss, smooth=smooth)
  return _soft_dice(*sigmoid_inputs(logits, labels, ignore_label),
                    batch_dice, smooth)


@gin.configurable(denylist=['logits', 'labels', 'ignore_label'])
@outputs.loss_of_kind('sigmoid')
@validation.checked(smooth=validation.NUMBER_AT_LEAST_0)
def bce_dice_loss(logits, labels, ignore_label, bce_weight=1.0,
                  dice_weight=1.0, batch_dice=True, smooth=1e-5,
                  pos_weight=None):
  """bce_weight x `binary_cross_entropy_loss` + dice_weight x `sigmoid_dice_loss`.

  Args:
    logits: float [B, h, w, C].
    labels: int [B, H, W, 1], bit masks of the classes, or `ignore_label`.
    ignore_label: int.
    bce_weight: float, the cross-entropy term's weight.
    dice_weight: float, the Dice term's weight.
    batch_dice: bool, the Dice term's (`sigmoid_dice_loss`).
    smooth: float >= 0, the Dice term's.
    pos_weight: None or C floats, the cross-entropy term's.

  Returns:
    Scalar float32.
  """
  validation.check(bce_dice_loss, smooth=smooth)
  inputs = sigmoid_inputs(logits, labels, ignore_label)
  return (bce_weight * _binary_cross_entropy(*inputs, pos_weight) +
          dice_weight * _soft_dice(*inputs, batch_dice, smooth))


# The losses of gin/losses/sigmoid_*.gin, named when a softmax loss is bound
# to the sigmoid kind; each declares output_kind 'sigmoid'.
SIGMOID_LOSSES = ('binary_cross_entropy_loss', 'sigmoid_dice_loss',
                  'bce_dice_loss')
