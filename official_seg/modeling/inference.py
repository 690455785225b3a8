"""Inference: class probabilities at input size, with DeepLab's multi-scale and flip."""

import gin
import tensorflow as tf

from official_seg import validation


def upsampled_logits(logits, size):
  """float32 logits resized bilinearly to `size` (height, width), as DeepLab.

  The cast keeps probabilities float32 under a bfloat16 policy.
  """
  return tf.image.resize(tf.cast(logits, tf.float32), size, method='bilinear')


def _scaled_size(images, scale):
  """round(size * scale), static when the input shape is static."""
  static = images.shape[1:3]
  if static.is_fully_defined():
    return [int(round(dim * scale)) for dim in static.as_list()]
  size = tf.cast(tf.shape(images)[1:3], tf.float32) * scale
  return tf.cast(tf.round(size), tf.int32)


def _flip(tensor):
  return tf.reverse(tensor, axis=[2])


@gin.configurable(denylist=['model', 'images', 'base_logits'])
@validation.checked(eval_scales=validation.POSITIVE_NUMBERS)
def predict_probabilities(model, images, base_logits=None, eval_scales=(1.0,),
                          add_flipped_images=False):
  """Softmax probabilities averaged over scales and flips, at the input size.

  Follows DeepLab's multi-scale inference: each scale (and its left-right
  flip) is run through the model, its logits are resized back to the input
  size, and the softmax probabilities are averaged.

  Args:
    model: the segmentation model; called with training=False.
    images: float32 [B, H, W, 3], normalized.
    base_logits: optional logits of `images` at scale 1.0 without flip,
      already computed, so that pass is not run twice.
    eval_scales: scales to run, e.g. [0.5, 0.75, 1.0, 1.25, 1.5, 1.75].
    add_flipped_images: bool, also run each scale flipped left-right.

  Returns:
    float32 [B, H, W, C] probabilities.

  Raises:
    validation.ConfigurationError: `eval_scales` is empty or has a
      non-positive scale.
  """
  validation.check(predict_probabilities, eval_scales=eval_scales)
  size = tf.shape(images)[1:3]
  probabilities = []
  for scale in eval_scales:
    scaled = (images if scale == 1.0 else
              tf.image.resize(images, _scaled_size(images, scale), 'bilinear'))
    for flip in ((False, True) if add_flipped_images else (False,)):
      if scale == 1.0 and not flip and base_logits is not None:
        logits = base_logits
      else:
        logits = model(_flip(scaled) if flip else scaled,
                       training=False)['logits']
      logits = upsampled_logits(logits, size)
      probabilities.append(tf.nn.softmax(_flip(logits) if flip else logits))
  return tf.add_n(probabilities) / float(len(probabilities))
