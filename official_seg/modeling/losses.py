"""Pixel losses over the valid pixels (softmax cross-entropy, focal loss), plus weight decay."""

import gin
import tensorflow as tf
from official.vision.losses import segmentation_losses

from official_seg import validation
from official_seg.modeling import outputs

# The least 1 - p_y the focal loss's modulating factor sees.
_MIN_MISS = 1e-12


@gin.configurable(denylist=['logits', 'labels', 'ignore_label'])
@outputs.loss_of_kind('softmax')
def segmentation_loss(logits,
                      labels,
                      ignore_label,
                      class_weights=None,
                      label_smoothing=0.0,
                      top_k_percent_pixels=1.0):
  """The labeled batch's loss: `cross_entropy` with its gin settings.

  Its bindings configure this loss alone; other losses call
  `cross_entropy` with settings of their own.
  """
  return cross_entropy(logits, labels, ignore_label, class_weights,
                       label_smoothing, top_k_percent_pixels)


def cross_entropy(logits,
                  labels,
                  ignore_label,
                  class_weights=None,
                  label_smoothing=0.0,
                  top_k_percent_pixels=1.0):
  """Softmax cross-entropy averaged over the pixels that are not ignored.

  Uses the Model Garden's `SegmentationLoss`: logits are resized bilinearly to
  the label size (DeepLab's `upsample_logits`), ignore pixels get zero loss
  and zero gradient, and the sum is divided by the number of valid pixels.

  Args:
    logits: float [B, h, w, C].
    labels: int32 [B, H, W, 1].
    ignore_label: int, label value excluded from loss and gradient (the
      dataset's).
    class_weights: optional list of C floats weighting each pixel by its
      class.
    label_smoothing: float in [0, 1), spreads that mass over all classes.
    top_k_percent_pixels: float in (0, 1]; below 1 keeps only that fraction
      of the hardest pixels (DeepLab's hard-pixel mining).

  Returns:
    Scalar float32 loss.
  """
  logits = tf.cast(logits, tf.float32)
  if label_smoothing == 0.0 and top_k_percent_pixels == 1.0:
    return _sparse_loss(logits, labels, ignore_label, class_weights)
  loss_fn = segmentation_losses.SegmentationLoss(
      label_smoothing=label_smoothing,
      class_weights=list(class_weights) if class_weights else None,
      ignore_label=ignore_label,
      use_groundtruth_dimension=True,
      top_k_percent_pixels=top_k_percent_pixels)
  return loss_fn(logits, labels)


@gin.configurable(denylist=['logits', 'labels', 'ignore_label'])
@outputs.loss_of_kind('softmax')
@validation.checked(gamma=validation.NUMBER_AT_LEAST_0)
def focal_loss(logits, labels, ignore_label, gamma=2.0, class_weights=None):
  """Softmax focal loss (Lin et al. 2017) averaged over the valid pixels.

  Each pixel's cross-entropy -log p_y is scaled by (1 - p_y)^gamma, so
  pixels the model already gets right count less and the hard ones more;
  gamma=0 is `cross_entropy`. The sum is divided
  by the number of valid pixels, as cross-entropy's is.

  Args:
    logits: float [B, h, w, C].
    labels: int32 [B, H, W, 1].
    ignore_label: int, label value excluded from loss and gradient.
    gamma: float >= 0, the focusing exponent; 2 in the paper.
    class_weights: optional list of C floats, each pixel's alpha_t by its
      class (the paper's alpha, one per class for softmax).

  Returns:
    Scalar float32 loss.
  """
  validation.check(focal_loss, gamma=gamma)
  logits, labels, valid = pixel_inputs(logits, labels, ignore_label)
  pixel_losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)
  # 1 - p_y, kept above 0: at 0 the power's gradient is infinite for
  # gamma < 1 (and 0 * inf for gamma = 0), a NaN in the backward pass.
  miss = tf.maximum(-tf.math.expm1(-pixel_losses), _MIN_MISS)
  return mean_over_valid(tf.pow(miss, gamma) * pixel_losses, labels, valid,
                         class_weights)


def _sparse_loss(logits, labels, ignore_label, class_weights):
  """`SegmentationLoss`'s value without its one-hot labels, written out.

  The Model Garden loss builds one-hot labels and weighs every pixel through
  an einsum with the class weights, even when all are 1: on a CPU that took
  9% of a MobileNetV2 training step (docs/performance.md). Sparse
  cross-entropy with a gather gives the same value for the same inputs.

  Args:
    logits: float32 [B, h, w, C].
    labels: int [B, H, W, 1].
    ignore_label: int.
    class_weights: optional list of C floats.

  Returns:
    Scalar float32: sum of weighted pixel losses / (valid pixels + 1e-5).
  """
  return valid_cross_entropy(*pixel_inputs(logits, labels, ignore_label),
                             class_weights)


def valid_cross_entropy(logits, labels, valid, class_weights=None):
  """Sparse softmax cross-entropy of `pixel_inputs`, by `mean_over_valid`."""
  pixel_losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)
  return mean_over_valid(pixel_losses, labels, valid, class_weights)


def pixel_inputs(logits, labels, ignore_label):
  """The logits at the labels' size in float32, class ids and valid pixels.

  Every loss starts here: logits are cast to float32 (a mixed precision
  step computes its loss in float32) and resized bilinearly, with
  half-pixel centres, to the labels' size; ignored pixels get class 0, so
  that gathers and one-hot rows stay in range, and a valid weight of 0.

  Args:
    logits: float [B, h, w, C], any float dtype.
    labels: int [B, H, W, 1].
    ignore_label: int.

  Returns:
    (logits float32 [B, H, W, C], labels int32 [B, H, W], valid float32
    [B, H, W]: 1 where labelled, 0 where ignored).
  """
  labels = tf.cast(labels[..., 0], tf.int32)
  logits = tf.image.resize(tf.cast(logits, tf.float32), tf.shape(labels)[1:3],
                           method='bilinear')
  valid = tf.not_equal(labels, ignore_label)
  safe_labels = tf.where(valid, labels, tf.zeros_like(labels))
  return logits, safe_labels, tf.cast(valid, tf.float32)


def mean_over_valid(pixel_losses, labels, valid, class_weights=None):
  """Pixel losses weighted by their class, summed, over (valid + 1e-5).

  Args:
    pixel_losses: float32 [B, H, W].
    labels: int32 [B, H, W], class ids (any id where not valid).
    valid: float32 [B, H, W], 1 where labelled.
    class_weights: optional list of C floats.

  Returns:
    Scalar float32; 0 when no pixel is labelled.
  """
  weights = valid
  if class_weights:
    weights *= tf.gather(tf.constant(class_weights, tf.float32), labels)
  return (tf.reduce_sum(pixel_losses * weights) /
          (tf.reduce_sum(valid) + segmentation_losses.EPSILON))


def regularization_loss(layers):
  """The sum of the layers' weight-decay losses in float32 (0 without any)."""
  reg_losses = [tf.cast(loss, tf.float32) for layer in layers
                for loss in layer.losses]
  return tf.add_n(reg_losses) if reg_losses else tf.constant(0.0)
