"""Inference: class probabilities at input size, with DeepLab's multi-scale and flip."""

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.modeling import tiling

# Floor of the probabilities whose log stands for logits with windows.
_TINY = 1e-30


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


def _multi_scale(model, images, base_logits, eval_scales, add_flipped_images):
  """Probabilities averaged over scales and flips, and the scale-1 logits.

  Returns:
    (float32 [B, H, W, C] probabilities, float32 [B, H, W, C] logits of the
    unflipped scale-1 pass at the input size, or None when no such pass ran).
  """
  size = tf.shape(images)[1:3]
  probabilities = []
  plain = None
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
      if scale == 1.0 and not flip:
        plain = logits
      probabilities.append(tf.nn.softmax(_flip(logits) if flip else logits))
  return tf.add_n(probabilities) / float(len(probabilities)), plain


@gin.configurable(denylist=['model', 'images', 'base_logits', 'with_logits'])
@validation.checked(tiling.WINDOW_RELATIONS,
                    eval_scales=validation.POSITIVE_NUMBERS,
                    **tiling.WINDOW_EXPECTS)
def predict_probabilities(model, images, base_logits=None, eval_scales=(1.0,),
                          add_flipped_images=False, window_size=None,
                          window_stride=None, window_blending='uniform',
                          window_batch_size=4, with_logits=False):
  """Softmax probabilities averaged over scales and flips, at the input size.

  Follows DeepLab's multi-scale inference: each scale (and its left-right
  flip) is run through the model, its logits are resized back to the input
  size, and the softmax probabilities are averaged.

  With `window_size`, the image is cut into overlapping windows
  (`tiling.tiled_probabilities`); each window runs the scales and flips
  above and the windows' probabilities are blended, each pixel's weights
  summing to 1. When one window covers the image, the result is exactly
  the whole-image one.

  Args:
    model: the segmentation model; called with training=False.
    images: float32 [B, H, W, 3], normalized.
    base_logits: optional logits of `images` at scale 1.0 without flip,
      already computed, so that pass is not run twice (not with windows).
    eval_scales: scales to run, e.g. [0.5, 0.75, 1.0, 1.25, 1.5, 1.75].
    add_flipped_images: bool, also run each scale flipped left-right.
    window_size: None (whole images), or [height, width] of a window in
      input pixels.
    window_stride: [height, width] between windows; None is
      window_size - window_size // 3 (a third of overlap).
    window_blending: 'uniform' or 'gaussian' (see `tiling.Windows`).
    window_batch_size: windows run through the model at once.
    with_logits: bool, also return logits (see Returns).

  Returns:
    float32 [B, H, W, C] probabilities; with `with_logits`, also float32
    [B, H, W, C] logits at the input size: those of the unflipped scale-1
    pass, or with windows the log of the probabilities.

  Raises:
    validation.ConfigurationError: a setting of the wrong form; the message
      names its binding.
  """
  validation.check(predict_probabilities, eval_scales=eval_scales,
                   window_size=window_size, window_stride=window_stride,
                   window_blending=window_blending,
                   window_batch_size=window_batch_size)
  windows = tiling.make_windows(window_size, window_stride, window_blending,
                                window_batch_size)
  if windows is None:
    probabilities, logits = _multi_scale(model, images, base_logits,
                                         eval_scales, add_flipped_images)
    if with_logits and logits is None:
      logits = upsampled_logits(model(images, training=False)['logits'],
                                tf.shape(images)[1:3])
  else:
    probabilities = tiling.tiled_probabilities(
        lambda tiles: _multi_scale(model, tiles, None, eval_scales,
                                   add_flipped_images)[0], images, windows)
    logits = tf.math.log(tf.maximum(probabilities, _TINY))
  return (probabilities, logits) if with_logits else probabilities
