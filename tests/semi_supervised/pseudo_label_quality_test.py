"""Counts and figures of thresholded pseudo labels against NumPy loops."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.semi_supervised import pseudo_label_quality as quality

_CLASSES = 4
_IGNORE = 255
_THRESHOLDS = (0.0, 0.5, 0.7)


def _images(seed=0):
  """Random softmaxes and labels; class 2's pixels never reach 0.7.

  Class 3 is never labelled; a tenth of the pixels are ignored.
  """
  rng = np.random.default_rng(seed)
  images = []
  for shape in ((6, 7), (5, 9), (8, 4)):
    probabilities = rng.dirichlet([0.3] * _CLASSES, shape)
    labels = rng.integers(0, 3, shape)
    labels[rng.random(shape) < 0.1] = _IGNORE
    # Halfway to uniform: the largest probability is at most 0.625.
    flat = labels == 2
    probabilities[flat] = 0.5 * probabilities[flat] + 0.5 / _CLASSES
    images.append((probabilities, labels))
  return images


def _reference(images, threshold):
  """Per-pixel loop: the (true, pseudo) counts of kept pixels, labelled."""
  kept = np.zeros((_CLASSES, _CLASSES), np.int64)
  labelled = np.zeros(_CLASSES, np.int64)
  for probabilities, labels in images:
    for (row, col), label in np.ndenumerate(labels):
      if label == _IGNORE:
        continue
      labelled[label] += 1
      pixel = probabilities[row, col]
      if pixel.max() >= threshold:
        kept[label, int(np.argmax(pixel))] += 1
  return kept, labelled


def _share(numerator, denominator):
  return None if denominator == 0 else numerator / denominator


def _reference_figures(kept, labelled):
  """The figures by their definitions, class by class."""
  total_kept = kept.sum()
  per_class = {name: [] for name in (
      'labelled_share', 'coverage', 'kept_accuracy', 'pseudo_share',
      'precision')}
  for c in range(_CLASSES):
    per_class['labelled_share'].append(_share(labelled[c], labelled.sum()))
    per_class['coverage'].append(_share(kept[c, :].sum(), labelled[c]))
    per_class['kept_accuracy'].append(_share(kept[c, c], kept[c, :].sum()))
    per_class['pseudo_share'].append(_share(kept[:, c].sum(), total_kept))
    per_class['precision'].append(_share(kept[c, c], kept[:, c].sum()))
  accuracies = [a for a in per_class['kept_accuracy'] if a is not None]
  return dict(per_class, labelled=list(labelled),
              kept_share=_share(total_kept, labelled.sum()),
              pixel_accuracy=_share(np.trace(kept), total_kept),
              balanced_accuracy=sum(accuracies) / len(accuracies))


class PseudoLabelQualityTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.images = _images()
    self.counts = quality.PseudoLabelCounts(_THRESHOLDS, _CLASSES, _IGNORE)
    for probabilities, labels in self.images:
      self.counts.add(probabilities, labels)

  def test_hard_labels_are_the_argmax_and_its_probability(self):
    probabilities, _ = self.images[0]
    labels, confidence = quality.hard_labels(probabilities)
    self.assertAllEqual(labels, probabilities.argmax(-1))
    self.assertAllEqual(confidence, probabilities.max(-1))

  def test_counts_of_every_threshold_equal_a_pixel_loop(self):
    self.assertEqual(self.counts.num_images, len(self.images))
    for index, threshold in enumerate(_THRESHOLDS):
      kept, labelled = _reference(self.images, threshold)
      self.assertAllEqual(self.counts.kept[index], kept)
      self.assertAllEqual(self.counts.labelled, labelled)
    # Not vacuous: the thresholds keep fewer pixels, and at 0.7 class 2
    # (labelled) and class 3 (never labelled) have no kept pixel.
    kept_sums = self.counts.kept.sum((1, 2))
    self.assertTrue((np.diff(kept_sums) < 0).all(), kept_sums)
    self.assertGreater(self.counts.labelled[2], 0)
    self.assertEqual(self.counts.kept[2][2].sum(), 0)
    self.assertEqual(self.counts.labelled[3], 0)

  @parameterized.parameters(*_THRESHOLDS)
  def test_figures_equal_their_definitions(self, threshold):
    kept, labelled = _reference(self.images, threshold)
    found = quality.figures(kept, labelled)
    expected = _reference_figures(kept, labelled)
    self.assertCountEqual(found, expected)
    for key, value in expected.items():
      if isinstance(value, list):
        self.assertEqual([v is None for v in found[key]],
                         [v is None for v in value], key)
        value = [np.nan if v is None else v for v in value]
        found[key] = [np.nan if v is None else v for v in found[key]]
      self.assertAllClose(found[key], value, msg=key)

  def test_a_class_without_kept_pixels_has_no_accuracy_and_no_weight(self):
    found = quality.figures(self.counts.kept[2], self.counts.labelled)
    self.assertEqual(found['coverage'][2], 0.0)
    self.assertIsNone(found['kept_accuracy'][2])
    self.assertIsNone(found['coverage'][3])  # Never labelled.
    self.assertAllClose(found['balanced_accuracy'],
                        np.mean(found['kept_accuracy'][:2]))

  def test_record_and_table_hold_every_threshold(self):
    names = ['background', 'disk', 'box', 'triangle']
    found = quality.record(self.counts, names)
    self.assertEqual([f['threshold'] for f in found['thresholds']],
                     list(_THRESHOLDS))
    table = quality.format_table(found['thresholds'][2], names)
    coverage = found['thresholds'][2]['coverage'][1]
    self.assertRegex(table, rf'disk\s+\d\.\d{{4}}\s+{coverage:.4f}')
    self.assertRegex(table, r'box\s+\d\.\d{4}\s+0\.0000\s+n/a')

  def test_a_probability_equal_to_the_threshold_is_kept(self):
    counts = quality.PseudoLabelCounts([0.5], _CLASSES, _IGNORE)
    counts.add(np.array([[[0.25, 0.5, 0.25, 0.0]]]), np.array([[1]]))
    self.assertEqual(counts.kept[0, 1, 1], 1)

  @parameterized.parameters(([],), ([0.5, 1.0],), ([-0.1],))
  def test_thresholds_outside_0_1_are_a_mistake(self, thresholds):
    with self.assertRaises(validation.ConfigurationError):
      quality.PseudoLabelCounts(thresholds, _CLASSES, _IGNORE)


if __name__ == '__main__':
  tf.test.main()
