"""Per-class quality of thresholded hard pseudo labels on labelled images."""

import numpy as np

from official_seg import validation
from official_seg.evaluation import metrics


def check_thresholds(thresholds):
  """Raises unless every threshold lies in [0, 1), as `PseudoLabeler`'s.

  Raises:
    validation.ConfigurationError: none given, or one outside [0, 1).
  """
  if not thresholds:
    raise validation.ConfigurationError('Give at least one threshold.')
  for threshold in thresholds:
    if not 0.0 <= threshold < 1.0:
      raise validation.ConfigurationError(
          f'Threshold {threshold} must lie in [0, 1), as '
          'PseudoLabeler.threshold.')


def hard_labels(probabilities):
  """FixMatch-style hard pseudo labels of one image.

  Args:
    probabilities: float [H, W, C], a softmax over the classes.

  Returns:
    (labels int32 [H, W], the argmax; confidence float [H, W], its
    probability, compared with a threshold to keep a pixel).
  """
  probabilities = np.asarray(probabilities)
  labels = np.argmax(probabilities, axis=-1).astype(np.int32)
  confidence = np.take_along_axis(probabilities, labels[..., None], -1)
  return labels, confidence[..., 0]


class PseudoLabelCounts:
  """Counts of kept pseudo labels by (true, pseudo) class, per threshold.

  Attributes:
    thresholds: the thresholds, in the order given.
    kept: int64 [T, C, C]; kept[t, i, j] counts labelled pixels of true
      class i whose pseudo label j reaches threshold t.
    labelled: int64 [C], labelled pixels (not ignored) of each true class.
    num_images: images added.
  """

  def __init__(self, thresholds, num_classes, ignore_label):
    """Starts empty counts.

    Raises:
      validation.ConfigurationError: a threshold outside [0, 1).
    """
    check_thresholds(thresholds)
    self.thresholds = list(thresholds)
    self.num_classes = num_classes
    self.ignore_label = ignore_label
    self.kept = np.zeros([len(thresholds), num_classes, num_classes],
                         np.int64)
    self.labelled = np.zeros([num_classes], np.int64)
    self.num_images = 0

  def add(self, probabilities, labels):
    """Adds one image.

    Args:
      probabilities: float [H, W, C] at the label's size.
      labels: int [H, W], class ids or the ignore label.

    Raises:
      ValueError: sizes differ, or a label is neither a class nor ignored.
    """
    pseudo, confidence = hard_labels(probabilities)
    labels = np.asarray(labels, np.int32)
    for index, threshold in enumerate(self.thresholds):
      # Unkept pixels become ignored: the confusion matrix skips them.
      kept_labels = np.where(confidence >= threshold, labels,
                             self.ignore_label)
      self.kept[index] += metrics.confusion_matrix(
          kept_labels, pseudo, self.num_classes, self.ignore_label)
    valid = labels[labels != self.ignore_label]
    self.labelled += np.bincount(valid.ravel(), minlength=self.num_classes)
    self.num_images += 1


def _ratio(numerator, denominator):
  """numerator / denominator as floats; None where nothing is counted."""
  numerator, denominator = np.broadcast_arrays(numerator, denominator)
  return [None if d == 0 else float(n) / float(d)
          for n, d in zip(numerator.ravel(), denominator.ravel())]


def figures(kept, labelled):
  """The quality figures of one threshold's counts.

  Args:
    kept: int [C, C], kept pixels by (true class, pseudo label).
    labelled: int [C], labelled pixels of each true class.

  Returns:
    A JSON-serializable dict; per class lists of C values, None where a
    share has nothing to count:
    - 'labelled': labelled pixels; 'labelled_share': of all labelled;
    - 'coverage': share of the class's labelled pixels kept;
    - 'kept_accuracy': share of its kept pixels whose pseudo label is right;
    - 'pseudo_share': share of all kept pixels with it as pseudo label;
    - 'precision': share of those whose true class it is;
    - 'kept_share', 'pixel_accuracy': all kept pixels, over all labelled
      and right among kept; 'balanced_accuracy': mean of 'kept_accuracy'
      over the classes with kept pixels.
  """
  kept = np.asarray(kept, np.int64)
  labelled = np.asarray(labelled, np.int64)
  right = np.diag(kept)
  by_true, by_pseudo = kept.sum(1), kept.sum(0)
  kept_accuracy = _ratio(right, by_true)
  present = [value for value in kept_accuracy if value is not None]
  return {
      'labelled': [int(v) for v in labelled],
      'labelled_share': _ratio(labelled, labelled.sum()),
      'coverage': _ratio(by_true, labelled),
      'kept_accuracy': kept_accuracy,
      'pseudo_share': _ratio(by_pseudo, kept.sum()),
      'precision': _ratio(right, by_pseudo),
      'kept_share': _ratio(kept.sum(), labelled.sum())[0],
      'pixel_accuracy': _ratio(right.sum(), kept.sum())[0],
      'balanced_accuracy': float(np.mean(present)) if present else None,
  }


def record(counts, class_names):
  """Figures of every threshold of a `PseudoLabelCounts`, JSON-serializable."""
  return {'num_images': counts.num_images, 'class_names': list(class_names),
          'thresholds': [dict(threshold=threshold, **figures(kept,
                                                              counts.labelled))
                         for threshold, kept in zip(counts.thresholds,
                                                    counts.kept)]}


_COLUMNS = ('labelled_share', 'coverage', 'kept_accuracy', 'pseudo_share',
            'precision')


def _cell(value):
  return f'{"n/a" if value is None else f"{value:.4f}":>10}'


def format_table(figures_of_threshold, class_names):
  """One threshold's table: a row per class, then the overall figures."""
  found = figures_of_threshold
  rows = [f'threshold {found["threshold"]}',
          f'{"class":<20}' + ''.join(f'{c[:10]:>10}' for c in (
              'labelled', 'kept', 'right', 'of kept', 'precision'))]
  for index, name in enumerate(class_names):
    rows.append(f'{name:<20}' + ''.join(_cell(found[column][index])
                                        for column in _COLUMNS))
  for key in ('kept_share', 'pixel_accuracy', 'balanced_accuracy'):
    rows.append(f'{key.replace("_", " "):<20}{_cell(found[key])}')
  return '\n'.join(rows)
