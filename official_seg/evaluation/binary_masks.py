"""Metrics of the sigmoid kind's per-class masks at their thresholds: a 2x2 confusion per class."""

import functools

import tensorflow as tf

from official_seg.evaluation import boundary
from official_seg.evaluation import metrics
from official_seg.evaluation import scores
from official_seg.modeling import outputs


def binary_confusions(labels, masks, ignore_label):
  """Per-example, per-class 2x2 confusion of the masks over labelled pixels.

  Args:
    labels: int [B, H, W, 1], bit masks of the classes, or `ignore_label`
      (padding too), which counts nowhere.
    masks: int32 [B, H, W, C], 1 where a class is predicted.
    ignore_label: int.

  Returns:
    int32 [B, C, 2, 2]: [b, c, t, p] the pixels of example b whose truth
    for class c is t and prediction p (so [..., 1, 1] the true positives,
    [..., 0, 1] the false positives, [..., 1, 0] the false negatives).
  """
  targets, valid = outputs.label_bits(labels, masks.shape[-1], ignore_label)
  targets = tf.cast(targets, tf.int32)
  valid = tf.cast(valid, tf.int32)[..., tf.newaxis]
  cells = [tf.reduce_sum(tf.cast(tf.logical_and(
      tf.equal(targets, truth), tf.equal(masks, predicted)), tf.int32) * valid,
                         [1, 2]) for truth in (0, 1) for predicted in (0, 1)]
  counts = tf.stack(cells, -1)
  return tf.reshape(counts, tf.concat([tf.shape(counts)[:2], [2, 2]], 0))


def binary_boundary_counts(labels, masks, ignore_label, tolerance):
  """int32 [B, C, 2]: each class's contour-band counts (Boundary IoU).

  Class c is scored as the foreground of a two-class map, its 0/1 truth
  against its 0/1 mask, ignored pixels counting nowhere.
  """
  targets, valid = outputs.label_bits(labels, masks.shape[-1], ignore_label)
  truth = tf.where(valid[..., tf.newaxis] > 0, tf.cast(targets, tf.int32),
                   ignore_label)
  return tf.stack([boundary.boundary_counts(
      truth[..., c], masks[..., c], 2, ignore_label, tolerance)[:, 1]
                   for c in range(masks.shape[-1])], 1)


def scores_of_counts(confusions, boundary_counts):
  """Every score of the summed per-class confusions, as `metrics.SCORES`.

  Each class's scores are those of the foreground of its 2x2 confusion:
  IoU TP / (TP + FP + FN), Dice, precision, recall (NaN for a class neither
  labelled nor predicted); the means run over the classes, pixel accuracy
  is the share of right (pixel, class) decisions, and frequency-weighted
  IoU weighs each class by its labelled pixels.

  Args:
    confusions: float64 [C, 2, 2], `binary_confusions` summed.
    boundary_counts: float64 [C, 2], `binary_boundary_counts` summed.

  Returns:
    (per_class, overall) as `metrics.scores_of_counts`.
  """
  num_classes = confusions.shape[0]
  each = [scores.per_class_scores(confusions[c]) for c in range(num_classes)]
  per_class = {name: tf.stack([s[name][1] for s in each])
               for name in scores.CONFUSION_SCORES}
  per_class['boundary_iou'] = boundary.boundary_iou(boundary_counts)
  overall = {f'mean_{score}': scores.class_mean(values)
             for score, values in per_class.items()}
  right = tf.linalg.trace(confusions)
  labelled = tf.reduce_sum(confusions[:, 1], -1)
  iou = tf.where(labelled > 0, per_class['iou'], 0.0)
  overall.update(
      pixel_accuracy=tf.math.divide_no_nan(tf.reduce_sum(right),
                                           tf.reduce_sum(confusions)),
      frequency_weighted_iou=tf.math.divide_no_nan(
          tf.reduce_sum(labelled * iou), tf.reduce_sum(labelled)))
  return per_class, overall


def eval_metrics(features, labels, masks, dataset, boundary_tolerance):
  """TPUEstimatorSpec's `eval_metrics` of a sigmoid kind's evaluation batch.

  The record holds what a softmax evaluation's does ('iou/<class>',
  'mean_iou', ...; `metrics.metric_fn`), of the thresholded masks, and
  'confusion_matrix' the [C, 2, 2] confusions.

  Args:
    features: dict with 'valid' float [B] (0 marks batch padding).
    labels: int32 [B, H, W, 1], bit masks of the classes.
    masks: int32 [B, H, W, C], the masks at the thresholds.
    dataset: the `DatasetInfo`.
    boundary_tolerance: int >= 1, the contour band's width in pixels.

  Returns:
    (metric_fn, dict of its tensors).
  """
  metric_fn = functools.partial(metrics.metric_fn,
                                class_names=list(dataset.class_names),
                                scores_fn=scores_of_counts)
  return metric_fn, {
      'confusion': binary_confusions(labels, masks, dataset.ignore_label),
      'boundary_counts': binary_boundary_counts(
          labels, masks, dataset.ignore_label, boundary_tolerance),
      'valid': features['valid']}
