"""The model_fn's eval metrics: counts on the device, scores and pictures on the host."""

import functools

from official_seg.evaluation import binary_masks
from official_seg.evaluation import boundary
from official_seg.evaluation import calibration
from official_seg.evaluation import eval_summaries
from official_seg.evaluation import metrics


def eval_metrics(features, labels, predictions, dataset, boundary_tolerance,
                 probabilities=None, masks=None):
  """TPUEstimatorSpec's `eval_metrics` of an evaluation batch.

  The device computes per-example counts (confusion matrices, contour-band
  counts) and the first pictures, so only those small tensors leave it;
  the metric function sums them on the host (TPU) or as eval_metric_ops
  (CPU, GPU). Only eval graphs build the contour bands.

  Args:
    features: dict with 'image' float [B, H, W, 3] and 'valid' float [B]
      (0 marks batch padding).
    labels: int32 [B, H, W, 1].
    predictions: int32 [B, H, W].
    dataset: the `DatasetInfo` (classes, names, ignore label, palette).
    boundary_tolerance: int >= 1, the contour band's width in pixels.
    probabilities: optional float [B, H, W, C]; with them, the metrics hold
      the expected calibration error of their top probabilities.
    masks: the sigmoid output kind's int32 [B, H, W, C] masks at the
      thresholds, or None (softmax); with them, the metrics are
      `binary_masks.eval_metrics`' (labels and predictions bit masks).

  Returns:
    (metric_fn, dict of its tensors).
  """
  if masks is not None:
    return binary_masks.eval_metrics(features, labels, masks, dataset,
                                     boundary_tolerance)
  confusion = metrics.confusion_matrices(labels, predictions,
                                         dataset.num_classes,
                                         dataset.ignore_label)
  bands = boundary.boundary_counts(labels, predictions, dataset.num_classes,
                                   dataset.ignore_label, boundary_tolerance)
  pictures = {}
  # Windowed evaluation of images larger than EVAL_CROP_SIZE has no fixed
  # size, and TensorBoard pictures need one: they are left out then.
  if features['image'].shape[1:3].is_fully_defined():
    pictures = eval_summaries.eval_pictures(features['image'], labels,
                                            predictions, dataset)
  if probabilities is not None:
    pictures[_CALIBRATION] = calibration.batch_bin_counts(
        probabilities, labels, dataset.ignore_label)
  metric_fn = functools.partial(_metric_fn,
                                class_names=list(dataset.class_names))
  return metric_fn, dict(pictures, confusion=confusion,
                         boundary_counts=bands, valid=features['valid'])


# The metric_fn argument of the confidence-bin counts.
_CALIBRATION = 'calibration_counts'


def _metric_fn(confusion, boundary_counts, valid, class_names, **pictures):
  """The metrics of `metrics.metric_fn`, the ECE and the validation pictures."""
  result = metrics.metric_fn(confusion, boundary_counts, valid, class_names)
  if _CALIBRATION in pictures:
    result.update(metrics.calibration_metric(pictures.pop(_CALIBRATION)))
  result.update(eval_summaries.picture_metrics(pictures, valid))
  return result
