"""Region losses from soft class overlaps: Dice, Tversky, and cross-entropy plus Dice (nnU-Net's)."""

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.modeling import losses
from official_seg.modeling import outputs

# nnU-Net's floor of the Dice denominator, for smooth = 0 and an empty class.
_MIN_DENOMINATOR = 1e-8


def class_overlaps(logits, labels, valid, per_image):
  """Soft true positives, predicted mass and true mass of each class.

  Ignored pixels count in none of them (nnU-Net's loss_mask), so they get
  zero gradient.

  Args:
    logits, labels, valid: `losses.pixel_inputs`: float32 [B, H, W, C],
      int32 [B, H, W] and float32 [B, H, W].
    per_image: bool; True sums each image's pixels ([B, C]), False the
      whole batch's ([C]).

  Returns:
    (tp, predicted, truth): float32, each [B, C] or [C]: sum of p*g, of p and
    of g over the valid pixels, p the softmax, g the one-hot label.
  """
  valid = valid[..., tf.newaxis]
  probabilities = tf.nn.softmax(logits) * valid
  truth = tf.one_hot(labels, logits.shape[-1], dtype=tf.float32) * valid
  axes = [1, 2] if per_image else [0, 1, 2]
  return (tf.reduce_sum(probabilities * truth, axes),
          tf.reduce_sum(probabilities, axes), tf.reduce_sum(truth, axes))


def _mean_score(scores, include_background):
  """1 - the mean over classes (and images) of [..., C] scores."""
  if not include_background:
    scores = scores[..., 1:]
  return 1.0 - tf.reduce_mean(scores)


def soft_dice(logits, labels, valid, batch_dice, smooth, include_background):
  """1 - the mean soft Dice, (2 tp + s) / (predicted + truth + s).

  nnU-Net's `MemoryEfficientSoftDiceLoss`, which returns -Dice: this is that
  plus 1, with the same gradient. A class absent from the image (or from the
  batch, with `batch_dice`) stays in the mean, as in nnU-Net: its score
  s / (predicted + s) is near 0 and falls toward it as the class's
  predicted mass grows, so the term pushes that mass down.

  Args:
    logits, labels, valid: `losses.pixel_inputs`.
    batch_dice: bool, one Dice per class over the batch (nnU-Net's batch
      Dice), else one per image and class, then averaged.
    smooth: float >= 0, added to numerator and denominator.
    include_background: bool; False leaves class 0 out of the mean
      (nnU-Net's do_bg=False).

  Returns:
    Scalar float32 in [0, 1].
  """
  tp, predicted, truth = class_overlaps(logits, labels, valid,
                                        per_image=not batch_dice)
  dice = (2.0 * tp + smooth) / tf.maximum(predicted + truth + smooth,
                                          _MIN_DENOMINATOR)
  return _mean_score(dice, include_background)


@gin.configurable(denylist=['logits', 'labels', 'ignore_label'])
@outputs.loss_of_kind('softmax')
@validation.checked(smooth=validation.NUMBER_AT_LEAST_0)
def dice_loss(logits, labels, ignore_label, batch_dice=True, smooth=1e-5,
              include_background=True):
  """Soft Dice loss: `soft_dice` with its gin settings.

  Args:
    logits: float [B, h, w, C].
    labels: int32 [B, H, W, 1].
    ignore_label: int, label value excluded from loss and gradient.
    batch_dice: bool, see `soft_dice`; nnU-Net's 2D plans set it.
    smooth: float >= 0; nnU-Net's trainer uses 1e-5.
    include_background: bool, whether class 0 counts in the mean.

  Returns:
    Scalar float32 loss.
  """
  validation.check(dice_loss, smooth=smooth)
  return soft_dice(*losses.pixel_inputs(logits, labels, ignore_label),
                   batch_dice, smooth, include_background)


@gin.configurable(denylist=['logits', 'labels', 'ignore_label'])
@outputs.loss_of_kind('softmax')
@validation.checked(ce_weight=validation.NUMBER_AT_LEAST_0,
                    dice_weight=validation.NUMBER_AT_LEAST_0,
                    smooth=validation.NUMBER_AT_LEAST_0)
def ce_dice_loss(logits, labels, ignore_label, ce_weight=1.0, dice_weight=1.0,
                 batch_dice=True, smooth=1e-5, include_background=True,
                 class_weights=None):
  """ce_weight * cross-entropy + dice_weight * (1 - Dice), as nnU-Net trains.

  nnU-Net's `DC_and_CE_loss` adds -Dice; 1 - Dice differs by the constant
  dice_weight, with the same gradient. The cross-entropy is
  `losses.cross_entropy` (mean over the valid pixels, 0 without any).

  Args:
    logits: float [B, h, w, C].
    labels: int32 [B, H, W, 1].
    ignore_label: int, label value excluded from loss and gradient.
    ce_weight: float >= 0.
    dice_weight: float >= 0.
    batch_dice, smooth, include_background: the Dice term's (`soft_dice`).
    class_weights: optional list of C floats, the cross-entropy's.

  Returns:
    Scalar float32 loss.
  """
  validation.check(ce_dice_loss, ce_weight=ce_weight, dice_weight=dice_weight,
                   smooth=smooth)
  inputs = losses.pixel_inputs(logits, labels, ignore_label)
  cross_entropy = losses.valid_cross_entropy(*inputs, class_weights)
  dice = soft_dice(*inputs, batch_dice, smooth, include_background)
  return ce_weight * cross_entropy + dice_weight * dice


@gin.configurable(denylist=['logits', 'labels', 'ignore_label'])
@outputs.loss_of_kind('softmax')
@validation.checked(alpha=validation.NUMBER_AT_LEAST_0,
                    beta=validation.NUMBER_AT_LEAST_0,
                    smooth=validation.NUMBER_AT_LEAST_0)
def tversky_loss(logits, labels, ignore_label, alpha=0.3, beta=0.7,
                 smooth=1e-5, per_image=False, include_background=True):
  """1 - the mean Tversky index (Salehi et al. 2017) of the classes.

  T = (tp + s) / (tp + alpha fp + beta fn + s), with fp = predicted - tp and
  fn = truth - tp; beta > alpha costs missed pixels of a class more than
  false alarms, which favours recall of a rare class. alpha = beta = 0.5 is
  Dice, alpha = beta = 1 Jaccard. Absent classes stay in the mean, as in
  `soft_dice`.

  Args:
    logits: float [B, h, w, C].
    labels: int32 [B, H, W, 1].
    ignore_label: int, label value excluded from loss and gradient.
    alpha: float >= 0, the weight of false positives.
    beta: float >= 0, the weight of false negatives.
    smooth: float >= 0, added to numerator and denominator.
    per_image: bool, one index per image and class (mmsegmentation's
      `TverskyLoss`), else one per class over the batch.
    include_background: bool, whether class 0 counts in the mean.

  Returns:
    Scalar float32 loss.
  """
  validation.check(tversky_loss, alpha=alpha, beta=beta, smooth=smooth)
  tp, predicted, truth = class_overlaps(
      *losses.pixel_inputs(logits, labels, ignore_label), per_image)
  denominator = (tp + alpha * (predicted - tp) + beta * (truth - tp) + smooth)
  index = (tp + smooth) / tf.maximum(denominator, _MIN_DENOMINATOR)
  return _mean_score(index, include_background)
