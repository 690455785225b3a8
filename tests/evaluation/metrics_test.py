"""Tests that the streaming scores (mIoU, Dice, Boundary IoU, ...) equal a NumPy reference."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg.evaluation import boundary
from official_seg.evaluation import calibration
from official_seg.evaluation import metrics
from tests.evaluation import boundary_test
from tests.evaluation import calibration_test
from tests.evaluation import scores_test

IGNORE = 255
NAMES = ['bg', 'a', 'b', 'absent', 'c']


def _random_batch(rng, batch=3, height=13, width=17):
  """Labels and predictions over 5 classes; class 3 appears in neither."""
  present = np.array([0, 1, 2, 4])
  labels = rng.choice(present, size=(batch, height, width))
  labels[rng.random(labels.shape) < 0.2] = IGNORE
  predictions = rng.choice(present, size=(batch, height, width))
  return labels.astype(np.int32), predictions.astype(np.int32)


def _blocky_batch(rng, batch=3):
  """Like `_random_batch`, in regions of several pixels (contour bands)."""
  pairs = [boundary_test.random_pair(rng, 13, 17) for _ in range(batch)]
  return (np.stack([labels for labels, _ in pairs]),
          np.stack([predictions for _, predictions in pairs]))


def _numpy_reference(labels, predictions, num_classes):
  valid = labels != IGNORE
  confusion = np.zeros((num_classes, num_classes), np.int64)
  np.add.at(confusion, (labels[valid], predictions[valid]), 1)
  tp = np.diag(confusion).astype(np.float64)
  union = confusion.sum(0) + confusion.sum(1) - tp
  with np.errstate(invalid='ignore'):
    iou = tp / union
  return confusion, iou, np.nanmean(iou), tp.sum() / confusion.sum()


class MetricsTest(tf.test.TestCase, parameterized.TestCase):

  def test_confusion_matrices_per_example(self):
    labels, predictions = _random_batch(np.random.default_rng(0))
    confusion = metrics.confusion_matrices(
        tf.constant(labels[..., None]), tf.constant(predictions), 5, IGNORE)
    self.assertEqual(confusion.shape, (3, 5, 5))
    for i in range(3):
      expected, _, _, _ = _numpy_reference(labels[i], predictions[i], 5)
      self.assertAllEqual(confusion[i], expected)

  def _stream(self, batches, tolerance):
    """The metrics after every batch, the last one's last example padding."""
    with tf.Graph().as_default():
      labels_ph = tf.compat.v1.placeholder(tf.int32, [None, 13, 17])
      predictions_ph = tf.compat.v1.placeholder(tf.int32, [None, 13, 17])
      valid_ph = tf.compat.v1.placeholder(tf.float32, [None])
      confusion = metrics.confusion_matrices(labels_ph, predictions_ph, 5,
                                             IGNORE)
      bands = boundary.boundary_counts(
          labels_ph, predictions_ph, 5, IGNORE, tolerance)
      ops = metrics.metric_fn(confusion, bands, valid_ph, NAMES)
      updates = tf.group(*[update for _, update in ops.values()])
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.local_variables_initializer())
        for index, (labels, predictions) in enumerate(batches):
          valid = np.ones(len(labels), np.float32)
          if index == len(batches) - 1:
            valid[-1] = 0.0
          sess.run(updates, {labels_ph: labels, predictions_ph: predictions,
                             valid_ph: valid})
        return sess.run({name: value for name, (value, _) in ops.items()})

  @parameterized.parameters(1, 2, 4)
  def test_streaming_metrics_equal_numpy(self, num_batches):
    rng = np.random.default_rng(num_batches)
    batches = [_blocky_batch(rng) for _ in range(num_batches)]
    # A padding example (all ignore, valid 0) rides along in the last batch.
    padded_labels = np.full((1, 13, 17), IGNORE, np.int32)
    batches[-1] = (np.concatenate([batches[-1][0], padded_labels]),
                   np.concatenate([batches[-1][1], np.zeros_like(padded_labels)]))
    all_labels = np.concatenate([b[0] for b in batches])
    all_predictions = np.concatenate([b[1] for b in batches])
    confusion, iou, mean_iou, accuracy = _numpy_reference(
        all_labels, all_predictions, 5)
    self.assertTrue(np.isnan(iou[3]))
    values = self._stream(batches, tolerance=1)

    self.assertAllClose(values['mean_iou'], mean_iou, rtol=1e-12)
    self.assertAllClose(values['pixel_accuracy'], accuracy, rtol=1e-12)
    self.assertEqual(values['num_images'], 3 * num_batches)
    expected = scores_test.numpy_scores(confusion)
    bands = sum(boundary_test.reference_counts(label, prediction, 5, 1)
                for label, prediction in zip(all_labels, all_predictions))
    with np.errstate(invalid='ignore'):
      expected['boundary_iou'] = bands[:, 0] / bands[:, 1]
    self.assertGreater(np.nanmax(np.abs(expected['boundary_iou'] - iou)),
                       1e-3, 'Boundary IoU as IoU: bands cover everything')
    for score, per_class in expected.items():
      self.assertAllClose(values[f'mean_{score}'], np.nanmean(per_class),
                          rtol=1e-12)
      for index, name in enumerate(NAMES):
        if np.isnan(per_class[index]):
          self.assertTrue(np.isnan(values[f'{score}/{name}']))
        else:
          self.assertAllClose(values[f'{score}/{name}'], per_class[index],
                              rtol=1e-12)
    self.assertAllClose(values['frequency_weighted_iou'],
                        scores_test.numpy_frequency_weighted_iou(confusion),
                        rtol=1e-12)

  def test_streaming_calibration_error_equals_numpy(self):
    rng = np.random.default_rng(7)
    logits = rng.normal(0.0, 2.0, (2, 3, 13, 17, 5))
    probabilities = calibration_test.numpy_softmax(logits).astype(np.float32)
    labels = rng.integers(0, 5, (2, 3, 13, 17)).astype(np.int32)
    labels[rng.random(labels.shape) < 0.2] = IGNORE
    with tf.Graph().as_default():
      probabilities_ph = tf.compat.v1.placeholder(tf.float32,
                                                  [None, 13, 17, 5])
      labels_ph = tf.compat.v1.placeholder(tf.int32, [None, 13, 17])
      ops = metrics.calibration_metric(calibration.batch_bin_counts(
          probabilities_ph, labels_ph, IGNORE))
      value, update = ops[metrics.EXPECTED_CALIBRATION_ERROR]
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.local_variables_initializer())
        self.assertEqual(sess.run(value), 0.0)
        for batch in range(2):
          sess.run(update, {probabilities_ph: probabilities[batch],
                            labels_ph: labels[batch]})
        found = sess.run(value)
    self.assertAllClose(found, calibration_test.numpy_ece(
        probabilities, labels, IGNORE), rtol=1e-5)

  def test_confusion_matrix_of_one_image_equals_numpy(self):
    labels, predictions = _random_batch(np.random.default_rng(5), batch=1)
    expected, _, _, _ = _numpy_reference(labels[0], predictions[0], 5)
    got = metrics.confusion_matrix(labels[0], predictions[0].astype(np.int64),
                                   5, IGNORE)
    self.assertIsInstance(got, np.ndarray)
    self.assertEqual(got.dtype, np.int64)
    self.assertAllEqual(got, expected)

  def test_confusion_matrix_counts_known_pixels(self):
    labels = np.array([[0, 1, 1], [2, IGNORE, 0]])
    predictions = np.array([[0, 1, 2], [2, 1, 1]])
    self.assertAllEqual(metrics.confusion_matrix(labels, predictions, 3,
                                                 IGNORE),
                        [[1, 1, 0], [0, 1, 1], [0, 0, 1]])

  def test_confusion_matrix_with_a_class_as_ignore_label(self):
    labels = np.array([[0, 1, 2]])
    self.assertAllEqual(
        metrics.confusion_matrix(labels, np.array([[1, 1, 1]]), 3, 0),
        [[0, 0, 0], [0, 1, 0], [0, 1, 0]])

  def test_confusion_matrix_refuses_other_sizes(self):
    with self.assertRaisesRegex(ValueError, r'\(2, 2\).*\(2, 3\) differ'):
      metrics.confusion_matrix(np.zeros((2, 2)), np.zeros((2, 3)), 3, IGNORE)

  @parameterized.parameters(3, -1, 254)
  def test_confusion_matrix_refuses_labels_of_no_class(self, value):
    with self.assertRaisesRegex(ValueError, rf'\[{value}\] are neither a '
                                r'class \(0-2\) nor the ignore label 255'):
      metrics.confusion_matrix(np.array([[0, value]]), np.zeros((1, 2)), 3,
                               IGNORE)

  def test_perfect_prediction_is_one(self):
    labels = np.array([[[0, 1], [IGNORE, 1]]], np.int32)
    confusion = metrics.confusion_matrices(tf.constant(labels),
                                           tf.constant(np.where(labels == IGNORE, 0, labels)),
                                           3, IGNORE)
    per_class, mean_iou, accuracy = metrics.iou_from_confusion(
        tf.cast(tf.reduce_sum(confusion, 0), tf.float64))
    self.assertAllClose(per_class[:2], [1.0, 1.0])
    self.assertTrue(np.isnan(per_class[2]))
    self.assertEqual(float(mean_iou), 1.0)
    self.assertEqual(float(accuracy), 1.0)


if __name__ == '__main__':
  tf.test.main()
