"""Inference: class probabilities at input size, with DeepLab's multi-scale and flip."""

import dataclasses
from typing import Optional, Sequence

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.modeling import outputs
from official_seg.modeling import tiling


def resize_aligned(features, size):
  """DeepLab's `_resize_bilinear`: bilinear with aligned corners, in float32.

  Args:
    features: [B, h, w, C].
    size: int32 [2] tensor or pair, the output's height and width.

  Returns:
    [B, size[0], size[1], C] in the input's dtype.
  """
  # The raw op: tf.compat.v1's wrapper logs a deprecation warning.
  resized = tf.raw_ops.ResizeBilinear(
      images=tf.cast(features, tf.float32), size=size, align_corners=True)
  return tf.cast(resized, features.dtype)


def upsampled_logits(logits, size, align_corners=False):
  """float32 logits resized bilinearly to `size` (height, width).

  Half-pixel centres (`tf.image.resize`), or with `align_corners` DeepLab's
  `resize_bilinear(..., align_corners=True)`. The cast keeps probabilities
  float32 under a bfloat16 policy.
  """
  logits = tf.cast(logits, tf.float32)
  if align_corners:
    return resize_aligned(logits, size)
  return tf.image.resize(logits, size, method='bilinear')


def _scaled_size(images, scale, align_corners=False):
  """round(size * scale), or DeepLab's int((size - 1) * scale + 1).

  Static when the input shape is static; with `align_corners` the formula
  of DeepLab's `scale_dimension` (core/utils.py), in float32 when dynamic
  as DeepLab's tensor branch.
  """
  static = images.shape[1:3]
  if static.is_fully_defined():
    if align_corners:
      return [int((dim - 1.0) * scale + 1.0) for dim in static.as_list()]
    return [int(round(dim * scale)) for dim in static.as_list()]
  size = tf.cast(tf.shape(images)[1:3], tf.float32)
  if align_corners:
    return tf.cast((size - 1.0) * scale + 1.0, tf.int32)
  return tf.cast(tf.round(size * scale), tf.int32)


def _scaled(images, scale, align_corners):
  """The images at `scale`: DeepLab's aligned resize, or half-pixel."""
  if scale == 1.0:
    return images
  size = _scaled_size(images, scale, align_corners)
  if align_corners:
    return resize_aligned(images, size)
  return tf.image.resize(images, size, 'bilinear')


def _flip(tensor):
  return tf.reverse(tensor, axis=[2])


def _needs_base(base_logits, eval_scales, align_corners):
  """Whether the scale-1 pass runs before the others.

  With aligned corners a scale below 1 needs the scale-1 logits' size, even
  when 1.0 is not among the scales.
  """
  return base_logits is None and (
      1.0 in eval_scales or (align_corners and min(eval_scales) < 1.0))


def _multi_scale(model, images, base_logits, eval_scales, add_flipped_images,
                 align_corners=False, activate=tf.nn.softmax):
  """Probabilities averaged over scales and flips, and the scale-1 logits.

  With `align_corners`, DeepLab's `predict_labels_multi_scale`: images
  scaled to `scale_dimension`, aligned-corner resizes, and the logits of a
  scale below 1 resized first to the scale-1 logits' size, as DeepLab's
  `multi_scale_logits` does (above 1, the size it resizes to is theirs).
  `activate` turns logits into probabilities (`OutputKind.activate`).

  Returns:
    (float32 [B, H, W, C] probabilities, float32 [B, H, W, C] logits of the
    unflipped scale-1 pass at the input size, or None when no such pass ran).
  """
  run = lambda inputs: model(inputs, training=False)['logits']
  if _needs_base(base_logits, eval_scales, align_corners):
    base_logits = run(images)
  size = tf.shape(images)[1:3]
  plain = (None if base_logits is None else
           upsampled_logits(base_logits, size, align_corners))
  probabilities = []
  for scale in eval_scales:
    scaled = _scaled(images, scale, align_corners)
    for flip in ((False, True) if add_flipped_images else (False,)):
      if scale == 1.0 and not flip:
        probabilities.append(activate(plain))
        continue
      logits = run(_flip(scaled) if flip else scaled)
      if align_corners and scale < 1.0:
        logits = upsampled_logits(logits, tf.shape(base_logits)[1:3], True)
      logits = upsampled_logits(logits, size, align_corners)
      probabilities.append(activate(_flip(logits) if flip else logits))
  return tf.add_n(probabilities) / float(len(probabilities)), plain


@gin.configurable
@validation.checked(tiling.WINDOW_RELATIONS,
                    eval_scales=validation.POSITIVE_NUMBERS,
                    **tiling.WINDOW_EXPECTS)
@dataclasses.dataclass(frozen=True)
class InferenceOptions:
  """How evaluation, prediction and every export turn images into probabilities.

  Built once by the runtime and handed to the model_fn, the eval parser
  (`window_size`) and the exporters. DeepLab's test-time augmentation is
  `eval_scales=(0.5, 0.75, 1.0, 1.25, 1.5, 1.75)` with
  `add_flipped_images=True`.

  Attributes:
    eval_scales: scales to run, e.g. [0.5, 0.75, 1.0, 1.25, 1.5, 1.75].
    add_flipped_images: bool, also run each scale flipped left-right.
    window_size: None (whole images), or [height, width] of a window in
      input pixels (macro WINDOW_SIZE): the model sees windows, never the
      whole image, and the eval crop need not cover the largest image.
    window_stride: [height, width] between windows; None is
      window_size - window_size // 3 (a third of overlap).
    window_blending: 'uniform' or 'gaussian' (see `tiling.Windows`).
    window_batch_size: windows run through the model at once.
    align_corners: bool; DeepLab's evaluation (`predict_labels` and
      `predict_labels_multi_scale`): every resize bilinear with aligned
      corners, scaled sides `int((side - 1) * scale + 1)`, and a scale's
      logits below 1 resized to the scale-1 logits' size first. False:
      half-pixel resizes and sides `round(side * scale)`.
    output: an `outputs.OutputKind`: softmax (the default) or per-class
      sigmoids with thresholds (gin/heads/sigmoid.gin).

  Raises:
    validation.ConfigurationError: a setting of the wrong form; the message
      names its binding.
  """

  eval_scales: Sequence[float] = (1.0,)
  add_flipped_images: bool = False
  window_size: Optional[Sequence[int]] = None
  window_stride: Optional[Sequence[int]] = None
  window_blending: str = 'uniform'
  window_batch_size: int = 4
  align_corners: bool = False
  output: outputs.OutputKind = dataclasses.field(
      default_factory=outputs.OutputKind)

  def __post_init__(self):
    validation.check(InferenceOptions, eval_scales=self.eval_scales,
                     window_size=self.window_size,
                     window_stride=self.window_stride,
                     window_blending=self.window_blending,
                     window_batch_size=self.window_batch_size)

  def windows(self):
    """The `tiling.Windows` of these settings, or None without windows."""
    return tiling.make_windows(self.window_size, self.window_stride,
                               self.window_blending, self.window_batch_size)


def predict_probabilities(model, images, options, base_logits=None,
                          with_logits=False):
  """Probabilities averaged over scales and flips, at the input size.

  Follows DeepLab's multi-scale inference: each scale (and its left-right
  flip) is run through the model, its logits are resized back to the input
  size, and the probabilities (`options.output`'s) are averaged.

  With `options.window_size`, the image is cut into overlapping windows
  (`tiling.tiled_probabilities`); each window runs the scales and flips
  above and the windows' probabilities are blended, each pixel's weights
  summing to 1. When one window covers the image, the result is exactly
  the whole-image one.

  Args:
    model: the segmentation model; called with training=False.
    images: float32 [B, H, W, 3], normalized.
    options: an `InferenceOptions`.
    base_logits: optional logits of `images` at scale 1.0 without flip,
      already computed, so that pass is not run twice (not with windows).
    with_logits: bool, also return logits (see Returns).

  Returns:
    float32 [B, H, W, C] probabilities; with `with_logits`, also float32
    [B, H, W, C] logits at the input size: those of the unflipped scale-1
    pass, or with windows the log of the probabilities.
  """
  windows = options.windows()
  scales, flip = options.eval_scales, options.add_flipped_images
  align_corners = options.align_corners
  activate = options.output.activate
  if windows is None:
    probabilities, logits = _multi_scale(model, images, base_logits, scales,
                                         flip, align_corners, activate)
    if with_logits and logits is None:
      logits = upsampled_logits(model(images, training=False)['logits'],
                                tf.shape(images)[1:3], align_corners)
  else:
    probabilities = tiling.tiled_probabilities(
        lambda tiles: _multi_scale(model, tiles, None, scales, flip,
                                   align_corners, activate)[0],
        images, windows)
    logits = options.output.logits_of(probabilities)
  return (probabilities, logits) if with_logits else probabilities
