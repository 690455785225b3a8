"""Counts of images scored one at a time, summed into one record (commands, .tflite)."""

import numpy as np

from official_seg.evaluation import metrics
from official_seg.evaluation import results


class Tally:
  """The confusion matrix and contour-band counts of images scored in turn.

  The NumPy twin of the evaluator's streaming metrics: each image is scored
  at its own size by the evaluator's ops, and the sums give the same record.
  """

  def __init__(self, class_names, ignore_label, boundary_tolerance):
    """Starts from no image.

    Args:
      class_names: C names.
      ignore_label: int; these pixels count nowhere.
      boundary_tolerance: int >= 1, the contour bands' width in pixels.
    """
    self.class_names = list(class_names)
    self.ignore_label = ignore_label
    self.boundary_tolerance = boundary_tolerance
    num_classes = len(self.class_names)
    self.confusion = np.zeros([num_classes, num_classes], np.int64)
    self.bands = np.zeros([num_classes, 2], np.int64)
    self.images = 0

  def add(self, labels, predictions):
    """Adds one image: int [H, W] labels and predicted class ids.

    Raises:
      ValueError: sizes differ, or a label is neither a class nor ignored.
    """
    scored = (labels, predictions, len(self.class_names), self.ignore_label)
    self.confusion += metrics.confusion_matrix(*scored)
    self.bands += metrics.boundary_counts_of_image(*scored,
                                                   self.boundary_tolerance)
    self.images += 1

  def record(self, global_step=None):
    """The `results.record_from_confusion` record of the images added."""
    return results.record_from_confusion(
        self.confusion, self.bands, self.class_names, self.images,
        self.boundary_tolerance, global_step)
