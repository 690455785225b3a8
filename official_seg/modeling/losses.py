"""Losses: softmax cross-entropy over valid pixels, plus weight decay."""

import gin
import tensorflow as tf
from official.vision.losses import segmentation_losses


@gin.configurable(denylist=['logits', 'labels'])
def segmentation_loss(logits,
                      labels,
                      ignore_label=gin.REQUIRED,
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
    ignore_label: int, label value excluded from loss and gradient.
    class_weights: optional list of C floats weighting each pixel by its
      class.
    label_smoothing: float in [0, 1), spreads that mass over all classes.
    top_k_percent_pixels: float in (0, 1]; below 1 keeps only that fraction
      of the hardest pixels (DeepLab's hard-pixel mining).

  Returns:
    Scalar float32 loss.
  """
  loss_fn = segmentation_losses.SegmentationLoss(
      label_smoothing=label_smoothing,
      class_weights=list(class_weights) if class_weights else None,
      ignore_label=ignore_label,
      use_groundtruth_dimension=True,
      top_k_percent_pixels=top_k_percent_pixels)
  return loss_fn(tf.cast(logits, tf.float32), labels)


def total_loss(model, logits, labels):
  """Segmentation loss plus the model's regularization losses.

  Args:
    model: the Keras model that produced `logits`.
    logits: float [B, h, w, C].
    labels: int32 [B, H, W, 1].

  Returns:
    (total scalar loss, segmentation scalar loss).
  """
  seg_loss = segmentation_loss(logits, labels)
  reg_losses = [tf.cast(loss, tf.float32) for loss in model.losses]
  total = seg_loss + tf.add_n(reg_losses) if reg_losses else seg_loss
  return total, seg_loss
