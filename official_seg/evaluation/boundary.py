"""Boundary IoU: per-class counts of the bands along each region's contour."""

import numpy as np
import tensorflow as tf

# Pixels of a region at most this far (Chebyshev distance) from its contour
# form its band: narrow enough that the interior of a large region counts
# nowhere, wide enough to forgive annotation jitter of a pixel or two.
DEFAULT_TOLERANCE = 3


def _window_max(values, size):
  """The max of each (size x size) window of [B, H, W, 1]: VALID, separable."""
  rows = tf.nn.max_pool2d(values, [size, 1], 1, 'VALID')
  return tf.nn.max_pool2d(rows, [1, size], 1, 'VALID')


def near_contour(label_map, outside, tolerance):
  """Pixels within `tolerance` of a pixel of another value, or of the edge.

  A pixel of class c is in c's band when its (2d+1) x (2d+1) square holds a
  pixel of another value, or reaches past the map: it is removed by eroding
  c's mask by that square, the map's edge counting as outside the mask (as
  Cheng et al.'s zero padding). The square holds one value exactly when its
  max equals its min, so one max-pooling of the map and one of its negation
  erode every class's mask at once.

  Args:
    label_map: int [B, H, W]; values at most 2**24, kept exact in float32.
    outside: int, the value of no class that fills the edge.
    tolerance: int d >= 1, in pixels.

  Returns:
    bool [B, H, W].
  """
  pad = [[0, 0], [tolerance, tolerance], [tolerance, tolerance], [0, 0]]
  values = tf.pad(tf.cast(label_map, tf.float32)[..., None], pad,
                  constant_values=float(outside))
  size = 2 * tolerance + 1
  highest = _window_max(values, size)
  lowest = -_window_max(-values, size)
  return tf.not_equal(highest, lowest)[..., 0]


def _per_class(mask, classes, num_classes):
  """int32 [B, C]: the pixels of `mask` of each class, per example."""
  batch = tf.shape(mask)[0]
  example = tf.broadcast_to(tf.reshape(tf.range(batch), [-1, 1, 1]),
                            tf.shape(mask))
  index = example * num_classes + tf.where(mask, classes,
                                           tf.zeros_like(classes))
  counts = tf.math.unsorted_segment_sum(tf.cast(mask, tf.int32), index,
                                        batch * num_classes)
  return tf.reshape(counts, [batch, num_classes])


def boundary_counts(labels, predictions, num_classes, ignore_label,
                    tolerance):
  """Per-example, per-class intersection and union of the contour bands.

  Computed on the device (TPU included: static window sizes) so only
  [B, C, 2] counts leave it. Ignored pixels (the padding too) count nowhere
  and lie outside every region in both maps: like the image's edge, they
  bound the regions next to them. The band of class c in the labels is
  G_d ∩ G, in the predictions P_d ∩ P (`near_contour`); summed over the
  evaluation, intersection / union is Cheng et al.'s (CVPR 2021) Boundary
  IoU of the class.

  Args:
    labels: int32 [B, H, W] or [B, H, W, 1].
    predictions: int32 [B, H, W].
    num_classes: int, C.
    ignore_label: int.
    tolerance: int d >= 1, the band's width in pixels.

  Returns:
    int32 [B, C, 2]: [..., 0] the intersection, [..., 1] the union.
  """
  labels = tf.reshape(labels, tf.shape(predictions))
  valid = tf.not_equal(labels, ignore_label)
  outside = num_classes
  truth = tf.where(valid, labels, outside)
  predicted = tf.where(valid, predictions, outside)
  truth_band = near_contour(truth, outside, tolerance) & valid
  predicted_band = near_contour(predicted, outside, tolerance) & valid
  both = truth_band & predicted_band & tf.equal(truth, predicted)
  intersection = _per_class(both, truth, num_classes)
  union = (_per_class(truth_band, truth, num_classes)
           + _per_class(predicted_band, predicted, num_classes)
           - intersection)
  return tf.stack([intersection, union], -1)


def boundary_iou(counts):
  """Per-class Boundary IoU of summed counts; NaN for a class in no band.

  With d >= 1 a class has a band exactly when it is labelled or predicted
  somewhere, so the NaN classes are those of IoU.

  Args:
    counts: float64 [C, 2] tensor, intersection and union.

  Returns:
    float64 [C].
  """
  intersection, union = counts[:, 0], counts[:, 1]
  present = union > 0
  return tf.where(present, intersection / tf.where(present, union, 1.0),
                  tf.constant(np.nan, tf.float64))
