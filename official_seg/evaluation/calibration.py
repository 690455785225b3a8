"""Per-pixel confidence and entropy, expected calibration error, temperature scaling."""

import numpy as np
import tensorflow as tf

# Equal-width bins of the top probability, as Guo et al. (2017) count them.
NUM_BINS = 15
# Probabilities a float32 softmax rounds to 0 are read as this before their
# log, so the logits of a confident pixel stay finite.
_SMALLEST_PROBABILITY = 1e-30
# Where the search for a temperature looks: log T in this range.
_LOG_TEMPERATURE_RANGE = (np.log(0.01), np.log(100.0))
_GOLDEN_STEPS = 80


def confidence(probabilities):
  """The top probability of each pixel: float [..., C] to float [...]."""
  return tf.reduce_max(probabilities, axis=-1)


def entropy(probabilities):
  """-sum p log p over classes, in nats (0 log 0 = 0): [..., C] to [...]."""
  return -tf.reduce_sum(tf.math.xlogy(probabilities, probabilities), axis=-1)


def tempered(probabilities, temperature):
  """softmax(log p / T): the probabilities of the logits divided by T.

  Equal to softmax(z / T) for p = softmax(z), since log p = z - logsumexp(z).

  Args:
    probabilities: float [..., C].
    temperature: float > 0.

  Returns:
    float [..., C] of the dtype of `probabilities`.
  """
  logits = tf.math.log(tf.maximum(probabilities, _SMALLEST_PROBABILITY))
  return tf.nn.softmax(logits / temperature, axis=-1)


def bin_counts(probabilities, labels, ignore_label, num_bins=NUM_BINS):
  """Per confidence bin: labelled pixels, their summed confidence and hits.

  Bin b holds the confidences in (b / M, (b + 1) / M]; 0 falls into the
  first. Sums over images give the counts of the whole set.

  Args:
    probabilities: float [..., C].
    labels: int [...], the true class or `ignore_label` (counted nowhere).
    ignore_label: int.
    num_bins: int M.

  Returns:
    float64 [M, 3] NumPy: pixels, summed confidence, pixels predicted right.
  """
  probabilities = tf.convert_to_tensor(probabilities)
  return confidence_bin_counts(
      confidence(probabilities), tf.argmax(probabilities, axis=-1), labels,
      ignore_label, num_bins)


def confidence_bin_counts(top, predicted, labels, ignore_label,
                          num_bins=NUM_BINS):
  """`bin_counts` of confidence maps and the labels predicted with them.

  Args:
    top: float [...], each pixel's confidence.
    predicted: int [...], each pixel's predicted class.
    labels: int [...], the true class or `ignore_label`.
    ignore_label: int.
    num_bins: int M.

  Returns:
    float64 [M, 3] NumPy, as `bin_counts`.
  """
  return _counts(top[None], predicted[None], labels[None], ignore_label,
                 num_bins, tf.float64)[0].numpy()


def batch_bin_counts(probabilities, labels, ignore_label, num_bins=NUM_BINS):
  """`bin_counts` of each example of a batch, in the graph (TPU included).

  Args:
    probabilities: float [B, H, W, C].
    labels: int [B, H, W] or [B, H, W, 1].
    ignore_label: int; these pixels (and padding) count nowhere.
    num_bins: int M.

  Returns:
    float32 [B, M, 3] tensor.
  """
  return _counts(confidence(probabilities),
                 tf.argmax(probabilities, axis=-1, output_type=tf.int32),
                 tf.reshape(labels, tf.shape(probabilities)[:-1]),
                 ignore_label, num_bins, tf.float32)


def _counts(top, predicted, labels, ignore_label, num_bins, dtype):
  """[B, M, 3] counts of [B, ...] confidences, predictions and labels."""
  batch = tf.shape(top)[0]
  top = tf.reshape(tf.cast(top, dtype), [batch, -1])
  labels = tf.reshape(tf.cast(labels, tf.int32), [batch, -1])
  predicted = tf.reshape(tf.cast(predicted, tf.int32), [batch, -1])
  valid = tf.cast(tf.not_equal(labels, ignore_label), dtype)
  index = tf.cast(tf.math.ceil(top * num_bins), tf.int32)
  index = tf.clip_by_value(index - 1, 0, num_bins - 1)
  index += tf.range(batch)[:, None] * num_bins
  right = tf.cast(tf.equal(predicted, labels), dtype)
  columns = tf.stack([valid, valid * top, valid * right], axis=-1)
  counts = tf.math.unsorted_segment_sum(columns, index, batch * num_bins)
  return tf.reshape(counts, [batch, num_bins, 3])


def expected_calibration_error(counts):
  """sum over bins of (bin share) x |accuracy - mean confidence|.

  Args:
    counts: float [M, 3] of `bin_counts`, summed over the images.

  Returns:
    float; None when no pixel is labelled.
  """
  counts = np.asarray(counts, np.float64)
  total = counts[:, 0].sum()
  if total == 0:
    return None
  # share x |hits / n - confidence / n| = |hits - confidence| / total.
  return float(np.abs(counts[:, 2] - counts[:, 1]).sum() / total)


def negative_log_likelihood(logits, labels, temperature):
  """Mean NLL of softmax(logits / T) at the labels.

  Args:
    logits: float [N, C] NumPy.
    labels: int [N], classes.
    temperature: float > 0.

  Returns:
    float.
  """
  scaled = np.asarray(logits, np.float64) / temperature
  top = scaled.max(axis=1, keepdims=True)
  log_norm = top[:, 0] + np.log(np.exp(scaled - top).sum(axis=1))
  return float(np.mean(log_norm - scaled[np.arange(len(labels)), labels]))


def fit_temperature(logits, labels):
  """The T > 0 of least `negative_log_likelihood`, by golden section on log T.

  The NLL is convex in 1 / T, so unimodal in log T: the search over
  [0.01, 100] takes a fixed number of steps and is deterministic.

  Args:
    logits: float [N, C] NumPy, of labelled pixels.
    labels: int [N], their classes.

  Returns:
    float T.
  """
  low, high = _LOG_TEMPERATURE_RANGE
  ratio = (np.sqrt(5.0) - 1.0) / 2.0

  def nll(log_t):
    return negative_log_likelihood(logits, labels, np.exp(log_t))

  left, right = high - ratio * (high - low), low + ratio * (high - low)
  left_nll, right_nll = nll(left), nll(right)
  for _ in range(_GOLDEN_STEPS):
    if left_nll <= right_nll:
      high, right, right_nll = right, left, left_nll
      left = high - ratio * (high - low)
      left_nll = nll(left)
    else:
      low, left, left_nll = left, right, right_nll
      right = low + ratio * (high - low)
      right_nll = nll(right)
  return float(np.exp((low + high) / 2.0))
