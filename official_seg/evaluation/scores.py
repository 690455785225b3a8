"""Per-class scores beside IoU from a confusion matrix: Dice/F1, precision, recall."""

import numpy as np
import tensorflow as tf

# The per-class scores of a confusion matrix, in the order tables list them.
CONFUSION_SCORES = ('iou', 'dice', 'precision', 'recall')


def _present_ratio(numerator, denominator, present):
  """numerator / denominator; 0 where it is 0 / 0, NaN where not `present`."""
  ratio = tf.math.divide_no_nan(numerator, denominator)
  return tf.where(present, ratio, tf.constant(np.nan, tf.float64))


def _sums(confusion):
  """(true positives, predicted, labelled, present) of each class, [C] each."""
  true_positive = tf.linalg.diag_part(confusion)
  predicted = tf.reduce_sum(confusion, 0)
  labelled = tf.reduce_sum(confusion, 1)
  return true_positive, predicted, labelled, predicted + labelled > 0


def _iou(true_positive, predicted, labelled, present):
  return _present_ratio(true_positive,
                        predicted + labelled - true_positive, present)


def per_class_scores(confusion):
  """IoU, Dice/F1, precision and recall of each class.

  All four leave out (NaN) the same classes as IoU: those absent from both
  labels and predictions. A class that is labelled but never predicted has
  precision 0, one predicted but never labelled recall 0: a ratio of no
  pixels counts as a miss, so every mean runs over the classes of mean IoU.

  Args:
    confusion: float64 [C, C] tensor, rows true class, columns predicted.

  Returns:
    dict of each name of `CONFUSION_SCORES` to float64 [C]: 'dice' is
    2 TP / (2 TP + FP + FN) (the F1 score of the class's pixels),
    'precision' TP / (TP + FP), 'recall' TP / (TP + FN).
  """
  sums = _sums(confusion)
  true_positive, predicted, labelled, present = sums
  return {
      'iou': _iou(*sums),
      'dice': _present_ratio(2.0 * true_positive, predicted + labelled,
                             present),
      'precision': _present_ratio(true_positive, predicted, present),
      'recall': _present_ratio(true_positive, labelled, present),
  }


def class_mean(per_class):
  """The mean over the classes that have a score (not NaN); 0 if none has.

  Args:
    per_class: float64 [C] tensor, NaN for a class left out.

  Returns:
    float64 scalar tensor.
  """
  scored = tf.logical_not(tf.math.is_nan(per_class))
  return tf.math.divide_no_nan(
      tf.reduce_sum(tf.where(scored, per_class, 0.0)),
      tf.reduce_sum(tf.cast(scored, tf.float64)))


def frequency_weighted_iou(confusion):
  """IoU of each class weighted by its share of the labelled pixels (FCN).

  sum_i t_i IoU_i / sum_i t_i, t_i the pixels labelled i: large classes
  dominate it, so it stays high when a rare class is missed.

  Args:
    confusion: float64 [C, C] tensor, rows true class, columns predicted.

  Returns:
    float64 scalar tensor; 0 when nothing is labelled.
  """
  sums = _sums(confusion)
  labelled, iou = sums[2], _iou(*sums)
  weighted = tf.where(labelled > 0, labelled * iou, 0.0)
  return tf.math.divide_no_nan(tf.reduce_sum(weighted),
                               tf.reduce_sum(labelled))


def never_predicted(confusion, class_names):
  """The classes that are labelled but predicted for no pixel.

  Args:
    confusion: [C, C] counts (NumPy or a list), rows true class; or the
      sigmoid kind's [C, 2, 2] (`binary_masks.binary_confusions`).
    class_names: C names.

  Returns:
    list of names, in class order.
  """
  confusion = np.asarray(confusion)
  if confusion.ndim == 3:
    labelled, predicted = confusion[:, 1].sum(-1), confusion[:, :, 1].sum(-1)
  else:
    labelled, predicted = confusion.sum(1), confusion.sum(0)
  return [name for name, truth, guess in zip(class_names, labelled, predicted)
          if truth > 0 and guess == 0]
