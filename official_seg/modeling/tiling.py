"""Sliding-window inference: windows over an image, blended so weights sum to 1."""

import dataclasses
from typing import Tuple

import tensorflow as tf

from official_seg import validation

BLENDINGS = ('uniform', 'gaussian')
# Standard deviation of the Gaussian blending, as a share of the window side
# (MONAI's sliding_window_inference default).
GAUSSIAN_SIGMA = 0.125


@dataclasses.dataclass(frozen=True)
class Windows:
  """Where the windows lie and how they are blended.

  Attributes:
    size: (height, width) of a window in input pixels; a window larger than
      the image is cut to it, so one window then covers the image.
    stride: (height, width) step between windows; the last window of a row
      or column ends at the image border.
    blending: 'uniform' (each window counts alike) or 'gaussian' (weights
      fall from a window's centre to its borders).
    batch_size: windows run through the model at once (per image).
  """

  size: Tuple[int, int]
  stride: Tuple[int, int]
  blending: str = 'uniform'
  batch_size: int = 4


def _pair_or_none(value):
  return value is None or validation.SIZE.test(value)


def _stride_fits(size, stride):
  return size is None or stride is None or all(
      t <= s for t, s in zip(stride, size))


# The checks of the window settings, by the parameters of
# `inference.InferenceOptions`, the configurable that takes them
# (`validation.checked`): the check before a run reports a bad window with
# its binding, and the configurable refuses it when called.
_PAIR = 'None or two positive whole numbers, [height, width]'
WINDOW_EXPECTS = dict(
    window_size=validation.Expect(_pair_or_none, _PAIR),
    window_stride=validation.Expect(_pair_or_none, _PAIR),
    window_blending=validation.Expect(lambda v: v in BLENDINGS,
                                      f'one of {BLENDINGS}'),
    window_batch_size=validation.POSITIVE_WHOLE)
WINDOW_RELATIONS = (validation.Relation(
    ('window_size', 'window_stride'), _stride_fits,
    'window_stride at most window_size on each side (a larger stride '
    'leaves pixels out)'),)


def make_windows(size, stride=None, blending='uniform', batch_size=4):
  """`Windows` of checked settings; the stride defaults to a third of overlap.

  The settings are those `WINDOW_EXPECTS` and `WINDOW_RELATIONS` accept
  (their owner checks them first).

  Args:
    size: [height, width] of a window, or None (no windows).
    stride: [height, width] or None: size - size // 3.
    blending: one of `BLENDINGS`.
    batch_size: positive int, windows per model call.

  Returns:
    A `Windows`, or None when `size` is None.
  """
  if size is None:
    return None
  size = tuple(size)
  if stride is None:
    stride = tuple(s - s // 3 for s in size)
  return Windows(size, tuple(stride), blending, batch_size)


def window_starts(length, window, stride):
  """First pixel of each window along one axis, as mmsegmentation's slide.

  Args:
    length: int32 scalar, the image side.
    window: int32 scalar, the window side, at most `length`.
    stride: int32 scalar.

  Returns:
    int32 [n]: 0, stride, 2 stride, ..., the last one `length - window`.
  """
  count = (tf.maximum(length - window, 0) + stride - 1) // stride + 1
  return tf.minimum(tf.range(count) * stride, length - window)


def _profile(window, blending):
  """float32 [window]: the weights of one window along one axis."""
  if blending == 'uniform':
    return tf.ones([window], tf.float32)
  offsets = tf.range(window, dtype=tf.float32) - (
      tf.cast(window, tf.float32) - 1.0) / 2.0
  sigma = GAUSSIAN_SIGMA * tf.cast(window, tf.float32)
  return tf.exp(-0.5 * tf.square(offsets / sigma))


def axis_weights(length, window, stride, blending):
  """The windows of one axis and their weights, normalized to sum to 1.

  Both blendings are separable, and the windows a grid, so a window's
  weight at (y, x) is the product of its row and column weights, and the
  weights of every pixel sum to 1 when those of each axis do. A pixel of one
  window only gets weight p / p = 1 exactly.

  Args:
    length: int32 scalar, the image side.
    window: python int, the wanted window side.
    stride: python int.
    blending: one of `BLENDINGS`.

  Returns:
    (starts int32 [n], side int32 scalar (min(window, length)),
     weights float32 [n, side]).
  """
  side = tf.minimum(tf.constant(window, tf.int32), length)
  starts = window_starts(length, side, tf.minimum(stride, side))
  profile = _profile(side, blending)
  pixels = starts[:, None] + tf.range(side)[None, :]
  profiles = tf.broadcast_to(profile[None, :], tf.shape(pixels))
  total = tf.math.unsorted_segment_sum(tf.reshape(profiles, [-1]),
                                       tf.reshape(pixels, [-1]), length)
  return starts, side, profiles / tf.gather(total, pixels)


def weight_maps(size, windows):
  """Each window's normalized weight over the image (0 outside it).

  For checks and pictures of small images: it holds n x H x W floats.

  Args:
    size: (height, width) ints.
    windows: a `Windows`.

  Returns:
    float32 [n, H, W], windows in row-major order.
  """
  rows = axis_weights(size[0], windows.size[0], windows.stride[0],
                      windows.blending)
  cols = axis_weights(size[1], windows.size[1], windows.stride[1],
                      windows.blending)

  def placed(starts, side, weights, length):
    index = starts[:, None] + tf.range(side)[None, :]
    one_hot = tf.one_hot(index, length)  # [n, side, length]
    return tf.einsum('ns,nsl->nl', weights, one_hot)

  row_maps = placed(*rows, size[0])
  col_maps = placed(*cols, size[1])
  maps = row_maps[:, None, :, None] * col_maps[None, :, None, :]
  return tf.reshape(maps, [-1, size[0], size[1]])


def _covers(images, windows):
  """True when the static image size is known and one window covers it."""
  static = images.shape[1:3]
  return static.is_fully_defined() and all(
      dim <= side for dim, side in zip(static.as_list(), windows.size))


def tiled_probabilities(predict_fn, images, windows):
  """Probabilities of windows run through `predict_fn`, blended.

  Windows run `windows.batch_size` at a time in a `tf.while_loop` of one
  iteration at a time, so only one batch of windows is in the model at
  once; each pixel's result is the weighted sum of its windows' results,
  with weights summing to 1. When one window covers the (static) image,
  this is `predict_fn(images)` itself.

  Args:
    predict_fn: float32 [N, h, w, 3] -> float32 [N, h, w, C] probabilities
      at the window's size.
    images: float32 [B, H, W, 3].
    windows: a `Windows`.

  Returns:
    float32 [B, H, W, C].
  """
  if _covers(images, windows):
    return predict_fn(images)
  shape = tf.shape(images)
  rows, row_side, row_weights = axis_weights(
      shape[1], windows.size[0], windows.stride[0], windows.blending)
  cols, col_side, col_weights = axis_weights(
      shape[2], windows.size[1], windows.stride[1], windows.blending)
  num_cols = tf.size(cols)
  count = tf.size(rows) * num_cols
  index_y = tf.range(row_side)[:, None] + tf.zeros([col_side], tf.int32)
  index_x = tf.range(col_side)[None, :] + tf.zeros([row_side, 1], tf.int32)
  offsets = tf.stack([index_y, index_x], axis=-1)  # [h, w, 2]

  def window(k):
    y, x = rows[k // num_cols], cols[k % num_cols]
    tile = tf.slice(images, tf.stack([0, y, x, 0]),
                    tf.stack([-1, row_side, col_side, -1]))
    weight = (row_weights[k // num_cols][:, None] *
              col_weights[k % num_cols][None, :])
    return tile, weight, offsets + tf.stack([y, x])

  def run(start):
    """The weighted probabilities of windows start.. and their pixels."""
    ks = tf.range(start, tf.minimum(start + windows.batch_size, count))
    tiles, weights, indices = tf.map_fn(
        window, ks, fn_output_signature=(tf.float32, tf.float32, tf.int32))
    flat = tf.reshape(tiles, tf.concat([[-1], tf.shape(tiles)[2:]], 0))
    probabilities = tf.cast(predict_fn(flat), tf.float32)
    probabilities = tf.reshape(probabilities, tf.concat(
        [tf.shape(tiles)[:4], tf.shape(probabilities)[-1:]], 0))
    weighted = probabilities * weights[:, None, :, :, None]
    # The canvas is [H, W, B, C]: a window's pixels are (y, x) pairs.
    return indices, tf.transpose(weighted, [0, 2, 3, 1, 4])

  # The first batch runs outside the loop: it builds the model's variables
  # (none may be created inside a loop) and gives the canvas its classes.
  indices, updates = run(0)
  canvas = tf.scatter_nd(indices, updates, tf.concat(
      [shape[1:3], shape[:1], tf.shape(updates)[-1:]], 0))

  def body(start, canvas):
    indices, updates = run(start)
    return start + windows.batch_size, tf.tensor_scatter_nd_add(
        canvas, indices, updates)

  _, canvas = tf.while_loop(lambda start, _: start < count, body,
                            (tf.constant(windows.batch_size), canvas),
                            parallel_iterations=1)
  result = tf.transpose(canvas, [2, 0, 1, 3])
  result.set_shape(images.shape[:3].concatenate(updates.shape[-1:]))
  return result
