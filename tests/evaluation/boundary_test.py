"""Tests that the contour bands and Boundary IoU counts equal a pixel-loop reference."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg.evaluation import boundary
from official_seg.evaluation import metrics

IGNORE = 255


def reference_band(label_map, valid, tolerance):
  """Pixels at most `tolerance` (Chebyshev) from their region's contour.

  Explicit loops: a pixel's distance to the contour is the distance to the
  nearest place outside its region, past the map's edge or at a pixel of
  another value or ignored.
  """
  height, width = label_map.shape
  band = np.zeros((height, width), bool)
  for y in range(height):
    for x in range(width):
      if not valid[y, x]:
        continue
      distance = min(y + 1, x + 1, height - y, width - x)
      for qy in range(height):
        for qx in range(width):
          if not valid[qy, qx] or label_map[qy, qx] != label_map[y, x]:
            distance = min(distance, max(abs(qy - y), abs(qx - x)))
      band[y, x] = distance <= tolerance
  return band


def shifted_band(label_map, valid, tolerance):
  """`reference_band` by comparing each pixel with its shifted neighbours.

  Faster, for larger images; the tests check it against the loops.
  """
  height, width = label_map.shape
  filled = np.where(valid, label_map, -1)
  padded = np.pad(filled, tolerance, constant_values=-1)
  band = np.zeros((height, width), bool)
  for dy in range(2 * tolerance + 1):
    for dx in range(2 * tolerance + 1):
      band |= padded[dy:dy + height, dx:dx + width] != filled
  return band & valid


def reference_counts(labels, predictions, num_classes, tolerance,
                     band=reference_band):
  """int64 [C, 2]: intersection and union of each class's bands.

  `band` finds the bands: by default by loops over pixels.
  """
  valid = labels != IGNORE
  truth_band = band(labels, valid, tolerance)
  predicted_band = band(predictions, valid, tolerance)
  counts = np.zeros((num_classes, 2), np.int64)
  for c in range(num_classes):
    truth = truth_band & (labels == c)
    predicted = predicted_band & (predictions == c)
    counts[c] = [(truth & predicted).sum(), (truth | predicted).sum()]
  return counts


def random_pair(rng, height=9, width=11):
  """Blocky labels and predictions over classes 0, 1, 2 and 4, some ignored.

  Class 3 appears in neither; blocks of 3x3 make regions of several pixels.
  """
  def blocky():
    blocks = rng.choice([0, 1, 2, 4], size=(height // 3 + 1, width // 3 + 1))
    return np.kron(blocks, np.ones((3, 3), np.int32))[:height, :width]
  labels, predictions = blocky(), blocky()
  flips = rng.random(labels.shape) < 0.1
  predictions[flips] = rng.choice([0, 1, 2, 4], size=flips.sum())
  labels[rng.random(labels.shape) < 0.1] = IGNORE
  return labels.astype(np.int32), predictions.astype(np.int32)


class BoundaryTest(tf.test.TestCase, parameterized.TestCase):

  def test_square_in_background_closed_form(self):
    labels = np.zeros((11, 11), np.int32)
    labels[2:9, 2:9] = 1
    # d = 1: the square's band is 7x7 - 5x5 = 24 pixels; the background's
    # is the map's edge (11x11 - 9x9 = 40) and the ring around the square
    # (9x9 - 7x7 = 32).
    self.assertAllEqual(
        metrics.boundary_counts_of_image(labels, labels, 2, IGNORE, 1),
        [[72, 72], [24, 24]])
    # All background predicted: its band is the map's edge alone.
    self.assertAllEqual(
        metrics.boundary_counts_of_image(labels, np.zeros_like(labels), 2,
                                         IGNORE, 1),
        [[40, 72], [0, 24]])

  @parameterized.parameters(1, 2, 4)
  def test_near_contour_equals_the_pixel_loops(self, tolerance):
    labels, _ = random_pair(np.random.default_rng(tolerance))
    valid = labels != IGNORE
    filled = np.where(valid, labels, 5)
    band = boundary.near_contour(filled[None], 5, tolerance).numpy()[0]
    self.assertAllEqual(band & valid, reference_band(labels, valid,
                                                     tolerance))

  @parameterized.parameters(1, 2, 3)
  def test_shifted_band_equals_the_pixel_loops(self, tolerance):
    labels, predictions = random_pair(np.random.default_rng(20 + tolerance))
    valid = labels != IGNORE
    for label_map in (labels, predictions):
      self.assertAllEqual(shifted_band(label_map, valid, tolerance),
                          reference_band(label_map, valid, tolerance))

  @parameterized.parameters(1, 2, 3)
  def test_batch_counts_equal_the_pixel_loops(self, tolerance):
    rng = np.random.default_rng(10 + tolerance)
    pairs = [random_pair(rng) for _ in range(3)]
    labels = np.stack([p[0] for p in pairs])
    predictions = np.stack([p[1] for p in pairs])
    counts = boundary.boundary_counts(labels[..., None], predictions, 5,
                                      IGNORE, tolerance).numpy()
    self.assertEqual(counts.shape, (3, 5, 2))
    for index, (label, prediction) in enumerate(pairs):
      expected = reference_counts(label, prediction, 5, tolerance)
      self.assertGreater(expected[:, 0].sum(), 0, 'no band in common')
      self.assertAllEqual(counts[index], expected)
      self.assertAllEqual(counts[index, 3], [0, 0])  # Class 3 is absent.

  def test_padding_counts_nowhere(self):
    """An image padded with ignored pixels counts as the image alone.

    As in evaluation: the eval parser pads below and right with the ignore
    label, and the model predicts something there.
    """
    labels, predictions = random_pair(np.random.default_rng(7))
    padded_labels = np.full((14, 17), IGNORE, np.int32)
    padded_labels[:9, :11] = labels
    padded_predictions = np.random.default_rng(8).choice([0, 1], (14, 17))
    padded_predictions[:9, :11] = predictions
    self.assertAllEqual(
        metrics.boundary_counts_of_image(padded_labels, padded_predictions, 5,
                                         IGNORE, 2),
        reference_counts(labels, predictions, 5, 2))

  def test_an_ignore_label_among_the_classes(self):
    labels, predictions = random_pair(np.random.default_rng(3))
    labels[labels == IGNORE] = 0
    expected = reference_counts(np.where(labels == 0, IGNORE, labels),
                                predictions, 5, 1)
    self.assertAllEqual(
        metrics.boundary_counts_of_image(labels, predictions, 5, 0, 1),
        expected)

  def test_compiles_at_static_shapes_as_on_a_tpu(self):
    labels, predictions = random_pair(np.random.default_rng(4))
    compiled = tf.function(
        lambda l, p: boundary.boundary_counts(l, p, 5, IGNORE, 2),
        jit_compile=True)
    self.assertAllEqual(compiled(labels[None], predictions[None])[0],
                        reference_counts(labels, predictions, 5, 2))

  def test_boundary_iou_of_counts(self):
    counts = tf.constant([[3, 4], [0, 5], [0, 0]], tf.float64)
    iou = boundary.boundary_iou(counts).numpy()
    self.assertAllEqual(iou[:2], [0.75, 0.0])
    self.assertTrue(np.isnan(iou[2]))

  def test_counts_of_an_image_are_int64_and_checked(self):
    labels, predictions = random_pair(np.random.default_rng(5))
    counts = metrics.boundary_counts_of_image(labels, predictions, 5, IGNORE,
                                              1)
    self.assertEqual(counts.dtype, np.int64)
    with self.assertRaisesRegex(ValueError, r'\(9, 11\).*\(9, 10\) differ'):
      metrics.boundary_counts_of_image(labels, predictions[:, :10], 5,
                                       IGNORE, 1)


if __name__ == '__main__':
  tf.test.main()
