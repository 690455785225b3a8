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


@dataclasses.dataclass(frozen=True)
class _Grid:
  """The windows over one image size, batched within rows of windows.

  Attributes:
    rows, row_side, row_weights: `axis_weights` of the height.
    cols, col_side, col_weights: `axis_weights` of the width.
    batch_size: python int, windows per model call.
    per_row: int32 scalar, model calls per row of windows.
  """

  rows: tf.Tensor
  row_side: tf.Tensor
  row_weights: tf.Tensor
  cols: tf.Tensor
  col_side: tf.Tensor
  col_weights: tf.Tensor
  batch_size: int
  per_row: tf.Tensor

  @property
  def count(self):
    """int32 scalar, the model calls over the image."""
    return tf.size(self.rows) * self.per_row


def _grid(shape, windows):
  """The `_Grid` of windows over images of dynamic `shape` [B, H, W, 3]."""
  rows = axis_weights(shape[1], windows.size[0], windows.stride[0],
                      windows.blending)
  cols = axis_weights(shape[2], windows.size[1], windows.stride[1],
                      windows.blending)
  per_row = (tf.size(cols[0]) + windows.batch_size - 1) // windows.batch_size
  return _Grid(*rows, *cols, windows.batch_size, per_row)


def _tiles(rows_first, grid, row, first, last):
  """Windows first..last-1 of a row of windows, each cut by one gather.

  Args:
    rows_first: float32 [H, B, W, 3], the images with rows first, so that a
      row's band is a view, not a copy.
    grid: a `_Grid`.
    row: int32 scalar, the row of windows.
    first, last: int32 scalars, its windows.

  Returns:
    (float32 [k, B, h, w, 3] windows, int32 [k, w] their columns).
  """
  band = rows_first[grid.rows[row]:grid.rows[row] + grid.row_side]
  columns = grid.cols[first:last, None] + tf.range(grid.col_side)[None, :]
  tiles = tf.gather(band, columns, axis=2)  # [h, B, k, w, 3]
  return tf.transpose(tiles, [2, 1, 0, 3, 4]), columns


def _blended_batch(predict_fn, rows_first, grid, batch):
  """The weighted sum of one model call's windows, all in one row.

  A batch never spans two rows of windows, so its windows share their rows
  of pixels and sum into one block of columns of their row's strip.

  Returns:
    (float32 [span, h * B * C], the block's columns, each its h pixels of
    each image and class; int32 scalar, the block's first column;
    `TensorShape` [C], the static classes).
  """
  row = batch // grid.per_row
  first = (batch % grid.per_row) * grid.batch_size
  last = tf.minimum(first + grid.batch_size, tf.size(grid.cols))
  tiles, columns = _tiles(rows_first, grid, row, first, last)
  shape = tf.shape(tiles)
  probabilities = tf.cast(predict_fn(tf.reshape(
      tiles, tf.concat([[-1], shape[2:]], 0))), tf.float32)
  probabilities = tf.reshape(probabilities, tf.concat(
      [shape[:4], tf.shape(probabilities)[-1:]], 0))
  weights = (grid.row_weights[row][None, :, None] *
             grid.col_weights[first:last][:, None, :])
  weighted = probabilities * weights[:, None, :, :, None]
  by_column = tf.transpose(weighted, [0, 3, 2, 1, 4])  # [k, w, h, B, C]
  start = grid.cols[first]
  # Overlapping windows share columns: summed first, so that each column
  # of the strip is added once.
  block = tf.math.unsorted_segment_sum(
      tf.reshape(by_column, [tf.size(columns), -1]),
      tf.reshape(columns - start, [-1]), columns[-1, -1] + 1 - start)
  return block, start, probabilities.shape[-1:]


def _zeros(shape):
  """float32 zeros in a buffer of their own, for `_add_rows` to write in."""
  return tf.raw_ops.Empty(shape=shape, dtype=tf.float32, init=True)


def _add_rows(tensor, start, rows):
  """`tensor` with `rows` added to its rows from `start`, in its buffer.

  The add writes into `tensor`'s buffer instead of copying it (the canvas
  is as large as the image): `tensor` must come from `_zeros` or
  `_add_rows` and be read by nothing else.
  """
  return tf.raw_ops.InplaceAdd(
      x=tensor, i=start + tf.range(tf.shape(rows)[0]), v=rows)


def _flushed(canvas, strip, grid, row):
  """`canvas` [H, W * B * C] with the `strip` [W, h * B * C] of a row added."""
  width = tf.shape(strip)[0]
  rows = tf.transpose(tf.reshape(strip, [width, grid.row_side, -1]),
                      [1, 0, 2])
  return _add_rows(canvas, grid.rows[row],
                   tf.reshape(rows, [grid.row_side, -1]))


def tiled_probabilities(predict_fn, images, windows):
  """Probabilities of windows run through `predict_fn`, blended.

  Windows run at most `windows.batch_size` at a time, each call's windows
  from one row of windows, in a `tf.while_loop` of one call at a time, so
  only one batch of windows is in the model at once. A row's windows sum
  into a strip as wide as the image, and each finished strip into the
  image's canvas: each pixel's result is the weighted sum of its windows'
  results, with weights summing to 1. When one window covers the (static)
  image, this is `predict_fn(images)` itself.

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
  grid = _grid(shape, windows)
  rows_first = tf.transpose(images, [1, 0, 2, 3])
  # The first batch runs outside the loop: it builds the model's variables
  # (none may be created inside a loop) and gives the canvas its classes.
  block, start, classes = _blended_batch(predict_fn, rows_first, grid, 0)
  strip = _add_rows(_zeros(tf.stack([shape[2], tf.shape(block)[1]])), start,
                    block)
  canvas = _zeros(tf.stack([shape[1], shape[2] * tf.shape(block)[1] //
                            grid.row_side]))

  def body(batch, canvas, strip):
    row = batch // grid.per_row
    canvas, strip = tf.cond(
        batch % grid.per_row > 0, lambda: (canvas, strip),
        lambda: (_flushed(canvas, strip, grid, row - 1),
                 _zeros(tf.shape(strip))))
    block, start, _ = _blended_batch(predict_fn, rows_first, grid, batch)
    return batch + 1, canvas, _add_rows(strip, start, block)

  _, canvas, strip = tf.while_loop(
      lambda batch, *_: batch < grid.count, body,
      (tf.constant(1), canvas, strip), parallel_iterations=1)
  canvas = _flushed(canvas, strip, grid, tf.size(grid.rows) - 1)
  result = tf.transpose(tf.reshape(canvas, [shape[1], shape[2], shape[0], -1]),
                        [2, 0, 1, 3])
  result.set_shape(images.shape[:3].concatenate(classes))
  return result
