"""Tests that Dice/F1, precision, recall and frequency-weighted IoU equal NumPy references."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg.evaluation import scores

# Rows true class, columns predicted: 'bg' and 'cat' are labelled and
# predicted, 'rare' labelled but never predicted, 'ghost' predicted but never
# labelled, 'absent' neither.
CONFUSION = np.array([[50, 3, 0, 2, 0],
                      [4, 20, 0, 0, 0],
                      [5, 1, 0, 0, 0],
                      [0, 0, 0, 0, 0],
                      [0, 0, 0, 0, 0]])
NAMES = ['bg', 'cat', 'rare', 'ghost', 'absent']


def numpy_scores(confusion):
  """Per-class IoU, Dice, precision, recall by the formulas, class by class."""
  confusion = np.asarray(confusion, np.float64)
  found = {name: [] for name in ('iou', 'dice', 'precision', 'recall')}
  for c in range(len(confusion)):
    tp = confusion[c, c]
    fp = confusion[:, c].sum() - tp
    fn = confusion[c, :].sum() - tp
    if tp + fp + fn == 0:
      for values in found.values():
        values.append(np.nan)
      continue
    found['iou'].append(tp / (tp + fp + fn))
    found['dice'].append(2 * tp / (2 * tp + fp + fn))
    found['precision'].append(tp / (tp + fp) if tp + fp else 0.0)
    found['recall'].append(tp / (tp + fn) if tp + fn else 0.0)
  return {name: np.array(values) for name, values in found.items()}


def numpy_frequency_weighted_iou(confusion):
  confusion = np.asarray(confusion, np.float64)
  labelled = confusion.sum(1)
  total = 0.0
  for c in range(len(confusion)):
    if labelled[c]:
      union = labelled[c] + confusion[:, c].sum() - confusion[c, c]
      total += labelled[c] * confusion[c, c] / union
  return total / labelled.sum()


class ScoresTest(tf.test.TestCase, parameterized.TestCase):

  def _scores(self, confusion):
    found = scores.per_class_scores(tf.constant(confusion, tf.float64))
    return {name: values.numpy() for name, values in found.items()}

  def test_closed_forms_of_a_known_matrix(self):
    found = self._scores(CONFUSION)
    # bg: TP 50, FP 4 + 5, FN 3 + 2; cat: TP 20, FP 3 + 1, FN 4.
    self.assertAllClose(found['dice'][:2], [100 / 114, 40 / 48], rtol=1e-15)
    self.assertAllClose(found['precision'][:2], [50 / 59, 20 / 24],
                        rtol=1e-15)
    self.assertAllClose(found['recall'][:2], [50 / 55, 20 / 24], rtol=1e-15)
    # Labelled, never predicted: precision 0 (no predicted pixel), recall 0.
    self.assertAllEqual([found[n][2] for n in ('dice', 'precision', 'recall')],
                        [0.0, 0.0, 0.0])
    # Predicted, never labelled: recall 0 (no labelled pixel).
    self.assertAllEqual([found[n][3] for n in ('dice', 'precision', 'recall')],
                        [0.0, 0.0, 0.0])
    for values in found.values():
      self.assertTrue(np.isnan(values[4]))

  @parameterized.parameters(0, 1, 2)
  def test_random_matrices_equal_numpy(self, seed):
    rng = np.random.default_rng(seed)
    confusion = rng.integers(0, 40, (6, 6)) * (rng.random((6, 6)) < 0.6)
    confusion[4, :] = 0  # A class never labelled,
    confusion[:, 4] = 0  # nor predicted: left out.
    confusion[:, 2] = 0  # A labelled class never predicted.
    expected = numpy_scores(confusion)
    found = self._scores(confusion)
    for name in scores.CONFUSION_SCORES:
      self.assertAllEqual(np.isnan(found[name]), np.isnan(expected[name]))
      self.assertAllClose(found[name], expected[name], rtol=1e-15)
      mean = scores.class_mean(tf.constant(found[name])).numpy()
      self.assertAllClose(mean, np.nanmean(expected[name]), rtol=1e-15)
    self.assertAllClose(
        scores.frequency_weighted_iou(tf.constant(confusion, tf.float64)),
        numpy_frequency_weighted_iou(confusion), rtol=1e-15)

  def test_dice_is_the_f1_of_precision_and_recall(self):
    found = self._scores(CONFUSION)
    precision, recall = found['precision'][:2], found['recall'][:2]
    self.assertAllClose(found['dice'][:2],
                        2 * precision * recall / (precision + recall),
                        rtol=1e-14)

  def test_frequency_weighted_iou_closed_form(self):
    # bg: 55 labelled, IoU 50 / 64; cat: 24, IoU 20 / 28; rare: 6, IoU 0.
    self.assertAllClose(
        scores.frequency_weighted_iou(tf.constant(CONFUSION, tf.float64)),
        (55 * 50 / 64 + 24 * 20 / 28) / 85, rtol=1e-15)

  def test_means_of_nothing_are_zero(self):
    empty = tf.zeros([3, 3], tf.float64)
    for values in scores.per_class_scores(empty).values():
      self.assertEqual(float(scores.class_mean(values)), 0.0)
    self.assertEqual(float(scores.frequency_weighted_iou(empty)), 0.0)

  def test_never_predicted_names_labelled_classes_only(self):
    self.assertEqual(scores.never_predicted(CONFUSION, NAMES), ['rare'])
    self.assertEqual(scores.never_predicted(np.eye(3), ['a', 'b', 'c']), [])


if __name__ == '__main__':
  tf.test.main()
