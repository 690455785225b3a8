"""Pseudo labels from the weak view, the strong view's consistency loss, and their monitors."""

import gin
import tensorflow as tf

from official_seg import validation

# The constant PseudoSeg adds under its joint RMS logit normalisation.
_RMS_EPSILON = 1e-8
# Floor of a probability before its log when sharpening.
_TINY = 1e-12


def calibrated_fusion(decoder_logits, cam_logits):
  """PseudoSeg's calibrated fusion of two sets of logits into probabilities.

  Both logit sets are divided by one scale, the root mean square of all
  their values together (every image, pixel and class of both), so neither
  source dominates by its logit range alone; the two softmaxes are then
  averaged with equal weight.

  Args:
    decoder_logits: float [B, H, W, C], the decoder's prediction.
    cam_logits: float [B, H, W, C], the refined class activation map's.

  Returns:
    float32 [B, H, W, C] probabilities.
  """
  decoder_logits = tf.cast(decoder_logits, tf.float32)
  cam_logits = tf.cast(cam_logits, tf.float32)
  both = tf.concat([decoder_logits, cam_logits], axis=0)
  scale = tf.math.rsqrt(tf.reduce_mean(tf.square(both)) + _RMS_EPSILON)
  return 0.5 * (tf.nn.softmax(decoder_logits * scale) +
                tf.nn.softmax(cam_logits * scale))


def sharpen(probabilities, temperature):
  """p^(1/T) / sum_c p_c^(1/T), computed as a softmax of log(p) / T.

  Args:
    probabilities: float32 [..., C].
    temperature: float > 0; below 1 sharpens.

  Returns:
    float32 [..., C].
  """
  if temperature == 1.0:
    return probabilities
  return tf.nn.softmax(tf.math.log(tf.maximum(probabilities, _TINY)) /
                       temperature)


@gin.configurable
class PseudoLabeler:
  """Turns the weak view's probabilities into training targets.

  PseudoSeg's defaults: soft targets sharpened with temperature 0.5 and no
  confidence threshold. FixMatch-style: hard (one-hot) targets with a
  confidence threshold of 0.95.
  """

  def __init__(self, temperature=0.5, soft=True, threshold=0.0):
    """Initializes the labeler.

    Args:
      temperature: float > 0, sharpening of soft targets (unused for hard).
      soft: bool, soft (sharpened distribution) or hard (one-hot argmax)
        targets.
      threshold: float in [0, 1); a pixel is kept when the largest target
        probability (sharpened for soft targets) reaches it; 0 keeps all.

    Raises:
      ValueError: a temperature <= 0 or a threshold outside [0, 1).
    """
    if temperature <= 0:
      raise validation.ConfigurationError(
          f'PseudoLabeler.temperature={temperature} must be > 0.')
    if not 0.0 <= threshold < 1.0:
      raise validation.ConfigurationError(
          f'PseudoLabeler.threshold={threshold} must lie in '
          '[0, 1); 0 keeps every pixel.')
    self.temperature = temperature
    self.soft = soft
    self.threshold = threshold

  def __call__(self, probabilities):
    """The targets and the kept pixels of the weak view's probabilities.

    Args:
      probabilities: float32 [B, H, W, C].

    Returns:
      (targets float32 [B, H, W, C] with no gradient, kept float32
      [B, H, W]: 1 where the confidence reaches the threshold).
    """
    probabilities = tf.stop_gradient(probabilities)
    if self.soft:
      targets = sharpen(probabilities, self.temperature)
    else:
      targets = tf.one_hot(tf.argmax(probabilities, axis=-1),
                           probabilities.shape[-1], dtype=tf.float32)
    # Soft targets are judged sharpened (PseudoSeg), hard ones by the
    # probability of their class (FixMatch).
    confidence = tf.reduce_max(targets if self.soft else probabilities, -1)
    kept = tf.cast(confidence >= self.threshold, tf.float32)
    return targets, kept


def consistency_loss(strong_logits, targets, kept, valid):
  """Cross-entropy of the strong view against the targets over valid pixels.

  As PseudoSeg and UniMatch: the sum over kept valid pixels divided by the
  count of valid pixels (not of kept ones), so a high threshold lowers the
  loss instead of reweighting the few confident pixels.

  Args:
    strong_logits: float [B, H, W, C].
    targets: float32 [B, H, W, C], rows summing to 1.
    kept: float32 [B, H, W], 1 where the target is confident enough.
    valid: float32 [B, H, W], 0 on padding and cutout pixels.

  Returns:
    Scalar float32; 0 when no pixel is valid.
  """
  pixel_losses = tf.nn.softmax_cross_entropy_with_logits(
      labels=tf.stop_gradient(targets),
      logits=tf.cast(strong_logits, tf.float32))
  return tf.math.divide_no_nan(tf.reduce_sum(pixel_losses * kept * valid),
                               tf.reduce_sum(valid))


def rampup(global_step, rampup_steps):
  """exp(-5 (1 - t)^2) with t = min(step / rampup_steps, 1); 1 without ramp-up.

  The sigmoid-shaped ramp-up of Laine and Aila's temporal ensembling, used
  by mean-teacher-style semi-supervised trainers.

  Args:
    global_step: int scalar tensor.
    rampup_steps: int >= 0.

  Returns:
    float32 scalar in (0, 1].
  """
  if not rampup_steps:
    return tf.constant(1.0)
  t = tf.minimum(tf.cast(global_step, tf.float32) / float(rampup_steps), 1.0)
  return tf.exp(-5.0 * tf.square(1.0 - t))


def accuracies(predictions, labels, num_classes, ignore_label, weights):
  """Pixel and class-balanced accuracy of a batch against its labels.

  Args:
    predictions: int32 [B, H, W].
    labels: int [B, H, W], class ids or `ignore_label`.
    num_classes: int.
    ignore_label: int.
    weights: float32 [B, H, W], 0 for pixels that count nowhere.

  Returns:
    (pixel accuracy, class-balanced accuracy): float32 scalars, the second
    the mean over the classes present of the share of their pixels predicted
    right (PseudoSeg's mean per-class accuracy of one batch); 0 when no
    pixel is labelled.
  """
  labels = tf.cast(labels, tf.int32)
  weights = weights * tf.cast(tf.not_equal(labels, ignore_label), tf.float32)
  safe = tf.where(tf.equal(labels, ignore_label), 0, labels)
  right = tf.cast(tf.equal(predictions, safe), tf.float32) * weights
  pixel = tf.math.divide_no_nan(tf.reduce_sum(right), tf.reduce_sum(weights))
  flat = tf.reshape(safe, [-1])
  per_class_right = tf.math.unsorted_segment_sum(
      tf.reshape(right, [-1]), flat, num_classes)
  per_class_total = tf.math.unsorted_segment_sum(
      tf.reshape(weights, [-1]), flat, num_classes)
  present = tf.cast(per_class_total > 0, tf.float32)
  balanced = tf.math.divide_no_nan(
      tf.reduce_sum(tf.math.divide_no_nan(per_class_right, per_class_total)),
      tf.reduce_sum(present))
  return pixel, balanced
