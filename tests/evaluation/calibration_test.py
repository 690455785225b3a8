"""Tests confidence, entropy, ECE and the fitted temperature against NumPy references."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg.evaluation import calibration


def numpy_softmax(logits):
  shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
  return shifted / shifted.sum(axis=-1, keepdims=True)


def numpy_ece(probabilities, labels, ignore_label, num_bins=15):
  """Guo et al.'s ECE, bin by bin: (lo, hi] bins, the first taking 0."""
  probabilities = probabilities.reshape(-1, probabilities.shape[-1])
  labels = labels.reshape(-1)
  keep = labels != ignore_label
  top = probabilities[keep].max(axis=1).astype(np.float64)
  right = probabilities[keep].argmax(axis=1) == labels[keep]
  ece = 0.0
  for b in range(num_bins):
    lo, hi = b / num_bins, (b + 1) / num_bins
    in_bin = (top > lo) & (top <= hi)
    if b == 0:
      in_bin |= top == 0
    if in_bin.any():
      share = in_bin.sum() / len(top)
      ece += share * abs(right[in_bin].mean() - top[in_bin].mean())
  return ece


def numpy_nll(logits, labels, temperature):
  probabilities = numpy_softmax(logits.astype(np.float64) / temperature)
  return -np.mean(np.log(probabilities[np.arange(len(labels)), labels]))


def numpy_nll_gradient(logits, labels, beta):
  """d NLL / d beta at beta = 1 / T: E_p[z] - z_label, averaged."""
  probabilities = numpy_softmax(beta * logits)
  expected = (probabilities * logits).sum(axis=1)
  return np.mean(expected - logits[np.arange(len(labels)), labels])


def numpy_fitted_temperature(logits, labels):
  """The T of least NLL: bisection on the NLL's derivative in beta = 1 / T."""
  low, high = 1e-3, 1e2
  for _ in range(200):
    middle = (low + high) / 2
    if numpy_nll_gradient(logits, labels, middle) < 0:
      low = middle
    else:
      high = middle
  return 1.0 / low


class CalibrationTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(3)
    self.logits = rng.normal(0.0, 3.0, (4, 5, 6, 7))
    self.probabilities = numpy_softmax(self.logits).astype(np.float32)
    self.labels = rng.integers(0, 7, (4, 5, 6))
    self.labels[0, :2] = 255

  def test_confidence_is_the_top_probability(self):
    self.assertAllEqual(calibration.confidence(self.probabilities),
                        self.probabilities.max(axis=-1))

  def test_entropy_in_nats_with_zero_log_zero_zero(self):
    probabilities = self.probabilities.astype(np.float64)
    probabilities[0, 0, 0] = [1, 0, 0, 0, 0, 0, 0]
    probabilities[0, 0, 1] = [0.5, 0.5, 0, 0, 0, 0, 0]
    logs = np.log(np.where(probabilities > 0, probabilities, 1.0))
    expected = -(probabilities * logs).sum(axis=-1)
    found = calibration.entropy(probabilities).numpy()
    self.assertAllClose(found, expected, rtol=1e-12, atol=1e-12)
    self.assertEqual(found[0, 0, 0], 0.0)
    self.assertAllClose(found[0, 0, 1], np.log(2.0), rtol=1e-12)

  @parameterized.parameters(0.5, 1.0, 2.5)
  def test_tempered_is_the_softmax_of_logits_over_t(self, temperature):
    self.assertAllClose(
        calibration.tempered(self.probabilities, temperature),
        numpy_softmax(self.logits / temperature), rtol=1e-4, atol=1e-6)

  @parameterized.parameters(15, 4)
  def test_ece_equals_the_binned_reference(self, num_bins):
    counts = calibration.bin_counts(self.probabilities, self.labels, 255,
                                    num_bins)
    self.assertEqual(counts[:, 0].sum(), (self.labels != 255).sum())
    self.assertAllClose(
        calibration.expected_calibration_error(counts),
        numpy_ece(self.probabilities, self.labels, 255, num_bins),
        rtol=1e-9, atol=1e-12)

  def test_counts_of_images_sum_to_those_of_the_set(self):
    whole = calibration.bin_counts(self.probabilities, self.labels, 255)
    parts = sum(calibration.bin_counts(p, l, 255)
                for p, l in zip(self.probabilities, self.labels))
    self.assertAllClose(parts, whole, rtol=1e-12)

  def test_batch_counts_are_each_example_s(self):
    counts = calibration.batch_bin_counts(
        tf.constant(self.probabilities), tf.constant(self.labels[..., None]),
        255)
    self.assertEqual(counts.dtype, tf.float32)
    for probabilities, labels, found in zip(self.probabilities, self.labels,
                                            counts.numpy()):
      self.assertAllClose(found,
                          calibration.bin_counts(probabilities, labels, 255),
                          rtol=1e-6)
      self.assertAllClose(
          calibration.expected_calibration_error(found),
          numpy_ece(probabilities, labels, 255), rtol=1e-5)

  def test_confidence_on_a_bin_edge_and_no_labelled_pixel(self):
    # 0.6 = 9/15 closes bin 8; 1.0 closes the last.
    probabilities = np.array([[0.6, 0.4], [1.0, 0.0]], np.float64)
    counts = calibration.bin_counts(probabilities, np.array([1, 0]), 255)
    self.assertAllEqual(np.nonzero(counts[:, 0])[0], [8, 14])
    self.assertAllClose(calibration.expected_calibration_error(counts),
                        0.5 * 0.6 + 0.5 * 0.0)
    none = calibration.bin_counts(probabilities, np.array([255, 255]), 255)
    self.assertIsNone(calibration.expected_calibration_error(none))

  @parameterized.parameters(0.4, 1.0, 2.5)
  def test_fitted_temperature_of_scaled_calibrated_logits(self, scale):
    # Three classes, the first right in 80 % of the pixels; the calibrated
    # logits (a, 0, 0) give it softmax 0.8, a = log(2 * 0.8 / 0.2): the NLL
    # of (scale * a, 0, 0) / T is least at T = scale exactly.
    labels = np.array([0] * 8 + [1, 2])
    calibrated = np.tile([np.log(8.0), 0.0, 0.0], (10, 1))
    self.assertAllClose(
        numpy_softmax(calibrated)[0, 0], 0.8, rtol=1e-12)
    fitted = calibration.fit_temperature(scale * calibrated, labels)
    self.assertAllClose(fitted, scale, rtol=1e-7)

  def test_fitted_temperature_zeroes_the_nll_gradient(self):
    rng = np.random.default_rng(5)
    calibrated = rng.normal(0.0, 2.0, (4000, 5))
    labels = np.array([rng.choice(5, p=p) for p in numpy_softmax(calibrated)])
    fitted = calibration.fit_temperature(1.7 * calibrated, labels)
    self.assertAllClose(
        fitted, numpy_fitted_temperature(1.7 * calibrated, labels),
        rtol=1e-6)
    # Labels drawn from the calibrated softmax: near the scale it was given.
    self.assertAllClose(fitted, 1.7, rtol=0.1)
    self.assertAllClose(
        calibration.negative_log_likelihood(1.7 * calibrated, labels, fitted),
        numpy_nll(1.7 * calibrated, labels, fitted), rtol=1e-12)


if __name__ == '__main__':
  tf.test.main()
