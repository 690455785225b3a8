"""The temperature of an export, fitted on a labelled split and kept beside it."""

import json

import numpy as np
import tensorflow as tf

from official_seg.data import storage
from official_seg.evaluation import calibration
from official_seg.export import predictor


def labelled_logits(model, examples, resize_range, ignore_label):
  """The log probabilities and classes of every labelled pixel.

  softmax(log p / T) = softmax(z / T) for p = softmax(z): the log of the
  served probabilities stands in for the logits (of the averaged
  probabilities, when the export averages scales or windows).

  Args:
    model: a `predictor.Predictor`.
    examples: iterable of (encoded image, label [h, w]), e.g.
      `predictor.split_examples`.
    resize_range: the eval parser's (`Predictor.resize_range`).
    ignore_label: int; these pixels are left out.

  Returns:
    (logits float32 [N, C], labels int64 [N], number of images).
  """
  logits, labels, images = [], [], 0
  for encoded, label in examples:
    probabilities = predictor.probabilities_at_decoded_size(
        model.probabilities(encoded), label.shape, resize_range)
    keep = label != ignore_label
    logits.append(np.log(np.maximum(probabilities[keep], 1e-30)))
    labels.append(label[keep].astype(np.int64))
    images += 1
  num_classes = len(model.metadata['class_names'])
  return (np.concatenate(logits or [np.zeros([0, num_classes])]).astype(
      np.float32), np.concatenate(labels or [np.zeros([0], np.int64)]),
          images)


def _ece(logits, labels, temperature):
  probabilities = tf.nn.softmax(logits.astype(np.float64) / temperature)
  return calibration.expected_calibration_error(
      calibration.bin_counts(probabilities, labels, ignore_label=-1))


def fit(logits, labels):
  """Fits T and measures the NLL and ECE before (T = 1) and after.

  Args:
    logits: float [N, C] of labelled pixels.
    labels: int [N], their classes.

  Returns:
    dict: 'temperature', 'num_pixels', 'nll_before', 'nll_after',
    'expected_calibration_error_before' and '_after' (15 bins).
  """
  temperature = calibration.fit_temperature(logits, labels)
  return {
      'temperature': temperature,
      'num_pixels': int(len(labels)),
      'nll_before': calibration.negative_log_likelihood(logits, labels, 1.0),
      'nll_after': calibration.negative_log_likelihood(logits, labels,
                                                       temperature),
      'num_bins': calibration.NUM_BINS,
      'expected_calibration_error_before': _ece(logits, labels, 1.0),
      'expected_calibration_error_after': _ece(logits, labels, temperature),
  }


def write(saved_model_dir, record):
  """Writes `record` as the export's temperature file; returns its path."""
  path = predictor.temperature_path(saved_model_dir)
  storage.write_whole(path, json.dumps(record, indent=2))
  return path
