"""Losses: softmax cross-entropy over valid pixels, plus weight decay."""

import gin
import tensorflow as tf
from official.vision.losses import segmentation_losses


@gin.configurable(denylist=['logits', 'labels', 'ignore_label'])
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
  labels = tf.cast(labels[..., 0], tf.int32)
  logits = tf.image.resize(logits, tf.shape(labels)[1:3], method='bilinear')
  valid = tf.not_equal(labels, ignore_label)
  safe_labels = tf.where(valid, labels, tf.zeros_like(labels))
  pixel_losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=safe_labels, logits=logits)
  weights = tf.cast(valid, tf.float32)
  if class_weights:
    weights *= tf.gather(tf.constant(class_weights, tf.float32), safe_labels)
  return (tf.reduce_sum(pixel_losses * weights) /
          (tf.reduce_sum(tf.cast(valid, tf.float32)) +
           segmentation_losses.EPSILON))


def regularization_loss(layers):
  """The sum of the layers' weight-decay losses in float32 (0 without any)."""
  reg_losses = [tf.cast(loss, tf.float32) for layer in layers
                for loss in layer.losses]
  return tf.add_n(reg_losses) if reg_losses else tf.constant(0.0)
