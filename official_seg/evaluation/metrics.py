"""Exact segmentation metrics from a streaming confusion matrix."""

import numpy as np
import tensorflow as tf

from official_seg.evaluation import boundary
from official_seg.evaluation import scores

CONFUSION_MATRIX = 'confusion_matrix'
# Of the top probability in 15 equal-width bins (`calibration`), at T = 1.
EXPECTED_CALIBRATION_ERROR = 'expected_calibration_error'
# The per-class scores of an evaluation, each with its mean over classes.
SCORES = scores.CONFUSION_SCORES + ('boundary_iou',)
# The scores of all classes at once: those means, and two more.
OVERALL = tuple(f'mean_{score}' for score in SCORES) + (
    'pixel_accuracy', 'frequency_weighted_iou')


def confusion_matrices(labels, predictions, num_classes, ignore_label):
  """Per-example confusion matrices over the pixels that are not ignored.

  Computed on the device (TPU included) so only [B, C, C] counts leave it.

  Args:
    labels: int32 [B, H, W] or [B, H, W, 1].
    predictions: int32 [B, H, W].
    num_classes: int, C.
    ignore_label: int; these pixels, and padding, count nowhere.

  Returns:
    int32 [B, C, C]; row is the true class, column the predicted one.
  """
  labels = tf.reshape(labels, tf.shape(predictions))
  batch = tf.shape(labels)[0]
  valid = tf.not_equal(labels, ignore_label)
  safe_labels = tf.where(valid, labels, tf.zeros_like(labels))
  example = tf.broadcast_to(
      tf.reshape(tf.range(batch), [-1, 1, 1]), tf.shape(labels))
  index = (example * num_classes + safe_labels) * num_classes + predictions
  counts = tf.math.unsorted_segment_sum(
      tf.cast(valid, tf.int32), index, batch * num_classes * num_classes)
  return tf.reshape(counts, [batch, num_classes, num_classes])


def checked_pair(labels, predictions, num_classes, ignore_label):
  """One image's labels and predictions as int32 NumPy arrays, checked.

  Args:
    labels: int [H, W] ground truth.
    predictions: int [H, W] class ids.
    num_classes: int, C.
    ignore_label: int.

  Returns:
    (labels, predictions), int32 [H, W] each.

  Raises:
    ValueError: sizes differ, or a label is neither a class nor ignored.
  """
  labels = np.asarray(labels, np.int32)
  if labels.shape != np.shape(predictions):
    raise ValueError(f'Label of size {labels.shape} and prediction of size '
                     f'{np.shape(predictions)} differ.')
  stray = (labels != ignore_label) & ((labels < 0) | (labels >= num_classes))
  if stray.any():
    raise ValueError(f'Label values {np.unique(labels[stray])} are neither a '
                     f'class (0-{num_classes - 1}) nor the ignore label '
                     f'{ignore_label}.')
  return labels, np.asarray(predictions, np.int32)


def confusion_matrix(labels, predictions, num_classes, ignore_label):
  """The confusion matrix of one image, from NumPy arrays.

  Args:
    labels: int [H, W] ground truth; `ignore_label` pixels count nowhere.
    predictions: int [H, W] class ids.
    num_classes: int, C.
    ignore_label: int.

  Returns:
    int64 [C, C] NumPy array; rows true class, columns predicted.

  Raises:
    ValueError: sizes differ, or a label is neither a class nor ignored.
  """
  labels, predictions = checked_pair(labels, predictions, num_classes,
                                     ignore_label)
  confusion = confusion_matrices(labels[None], predictions[None], num_classes,
                                 ignore_label)
  return confusion.numpy()[0].astype(np.int64)


def boundary_counts_of_image(labels, predictions, num_classes, ignore_label,
                             tolerance):
  """`boundary.boundary_counts` of one image, from NumPy arrays.

  Args:
    labels: int [H, W] ground truth; `ignore_label` pixels count nowhere.
    predictions: int [H, W] class ids.
    num_classes: int, C.
    ignore_label: int.
    tolerance: int d >= 1, the contour band's width in pixels.

  Returns:
    int64 [C, 2] NumPy array: intersection and union of the bands.

  Raises:
    ValueError: sizes differ, or a label is neither a class nor ignored.
  """
  labels, predictions = checked_pair(labels, predictions, num_classes,
                                     ignore_label)
  counts = boundary.boundary_counts(labels[None], predictions[None],
                                    num_classes, ignore_label, tolerance)
  return counts.numpy()[0].astype(np.int64)


def iou_from_confusion(confusion):
  """Per-class IoU, mean IoU and pixel accuracy from a confusion matrix.

  A class absent from both labels and predictions has no IoU (NaN) and is
  left out of the mean, as in the PASCAL VOC and Cityscapes benchmarks.

  Args:
    confusion: float64 [C, C] tensor, rows true class, columns predicted.

  Returns:
    (per_class_iou [C], mean_iou scalar, pixel_accuracy scalar), float64.
  """
  per_class = scores.per_class_scores(confusion)['iou']
  return per_class, scores.class_mean(per_class), pixel_accuracy(confusion)


def pixel_accuracy(confusion):
  """The share of labelled pixels predicted right; float64, 0 if none."""
  return tf.math.divide_no_nan(tf.reduce_sum(tf.linalg.diag_part(confusion)),
                               tf.reduce_sum(confusion))


def _metric_variable(name, shape):
  return tf.compat.v1.get_local_variable(
      name, shape=shape, dtype=tf.float64,
      initializer=tf.compat.v1.zeros_initializer(),
      collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES,
                   tf.compat.v1.GraphKeys.METRIC_VARIABLES])


def _accumulated(name, counts, shape):
  """(float64 total of `counts` summed over the batch, its update op)."""
  total = _metric_variable(name, shape)
  update = tf.compat.v1.assign_add(
      total, tf.reduce_sum(tf.cast(counts, tf.float64), 0))
  return total, update


def scores_of_counts(confusion, boundary_counts):
  """Every score of an evaluation's summed counts.

  Args:
    confusion: float64 [C, C] tensor, rows true class, columns predicted.
    boundary_counts: float64 [C, 2] tensor, the contour bands' intersection
      and union (`boundary.boundary_counts` summed).

  Returns:
    (per_class, overall): per_class maps each name of `SCORES` to float64
    [C] (NaN for a class absent from labels and predictions); overall
    maps each name of `OVERALL` to a float64 scalar.
  """
  per_class = scores.per_class_scores(confusion)
  per_class['boundary_iou'] = boundary.boundary_iou(boundary_counts)
  overall = {f'mean_{score}': scores.class_mean(values)
             for score, values in per_class.items()}
  overall.update(pixel_accuracy=pixel_accuracy(confusion),
                 frequency_weighted_iou=scores.frequency_weighted_iou(
                     confusion))
  return per_class, overall


def metric_fn(confusion, boundary_counts, valid, class_names,
              scores_fn=scores_of_counts):
  """Streaming metrics; runs on the host (TPU) or as eval_metric_ops (CPU/GPU).

  Accumulates in float64 so counts stay exact far beyond 2**24 pixels.

  Args:
    confusion: int32 [B, C, C] from `confusion_matrices` (or the counts
      `scores_fn` reads, e.g. `binary_masks.binary_confusions`).
    boundary_counts: int32 [B, C, 2] from `boundary.boundary_counts`.
    valid: float [B], 1 for real examples and 0 for batch padding.
    class_names: list of C class names, naming the per-class metrics.
    scores_fn: (summed confusion, summed boundary counts) -> (per_class,
      overall), as `scores_of_counts`.

  Returns:
    dict of metric name to (value, update_op): each name of `OVERALL`,
    '<score>/<class name>' of each score of `SCORES`, 'num_images', and
    'confusion_matrix', the matrix as a serialized tensor `Summary` (see
    `CONFUSION_MATRIX`).
  """
  total, update_cm = _accumulated('total_confusion_matrix', confusion,
                                  confusion.shape[1:])
  bands, update_bands = _accumulated('total_boundary_counts',
                                     boundary_counts, [len(class_names), 2])
  images, update_images = _accumulated('num_images', valid, [])
  per_class, overall = scores_fn(total, bands)

  def update(name):
    return update_bands if 'boundary' in name else update_cm

  metrics = {name: (value, update(name)) for name, value in overall.items()}
  for score, values in per_class.items():
    for index, name in enumerate(class_names):
      metrics[f'{score}/{name}'] = (values[index], update(score))
  metrics['num_images'] = (tf.identity(images), update_images)
  # Estimator writes a serialized Summary value to TensorBoard as it is and
  # leaves it out of its log line, which a 151x151 matrix would flood.
  metrics[CONFUSION_MATRIX] = (tf.compat.v1.summary.tensor_summary(
      CONFUSION_MATRIX, total, collections=[]), update_cm)
  return metrics


def calibration_metric(counts):
  """The streaming expected calibration error of confidence-bin counts.

  Args:
    counts: float [B, M, 3] of `calibration.batch_bin_counts`: per bin,
      labelled pixels, their summed confidence and pixels predicted right.

  Returns:
    {EXPECTED_CALIBRATION_ERROR: (value, update_op)}; the value is
    sum over bins |hits - summed confidence| / pixels, 0 with none.
  """
  total, update = _accumulated('total_calibration_counts', counts,
                               counts.shape[1:])
  error = tf.math.divide_no_nan(
      tf.reduce_sum(tf.abs(total[:, 2] - total[:, 1])),
      tf.reduce_sum(total[:, 0]))
  return {EXPECTED_CALIBRATION_ERROR: (error, update)}


def confusion_from_summary(serialized):
  """Recovers the float64 [C, C] matrix from the 'confusion_matrix' result."""
  summary = tf.compat.v1.Summary.FromString(serialized)
  return tf.make_ndarray(summary.value[0].tensor)
