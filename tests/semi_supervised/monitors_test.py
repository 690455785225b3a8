"""Tests of the semi-supervised step's monitors against NumPy."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg.data import dataset_info
from official_seg.semi_supervised import monitors as monitors_lib

_IGNORE = 255
_CLASSES = 4


def _balanced_accuracy(predictions, truth, counted):
  """NumPy: mean over the classes counted of the share predicted right."""
  recalls = [np.mean(predictions[counted & (truth == c)] == c)
             for c in range(_CLASSES) if (counted & (truth == c)).any()]
  return np.mean(recalls)


class FusionMonitorsTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    rng = np.random.RandomState(3)
    self.decoder = rng.normal(size=(2, 6, 7, _CLASSES)).astype(np.float32)
    self.cam = rng.normal(size=(2, 6, 7, _CLASSES)).astype(np.float32)
    label = rng.randint(0, _CLASSES, size=(2, 6, 7))
    label[:, 0] = _IGNORE
    # Image 1 shows class 3 only in pixels that are not valid.
    label[1][label[1] == 3] = 2
    label[1, 5, 6] = 3
    self.label = label.astype(np.int32)
    self.valid = np.ones((2, 6, 7), np.float32)
    self.valid[1, 5, :] = 0
    # Image 0 picks classes 1 and 3; image 1 picks 3, which it does not
    # show in a valid pixel, and 1.
    self.picked = np.array([[1, 0, 1], [1, 0, 1]], np.float32)
    self.features = {
        'monitor/unlabeled_label': self.label[..., None],
        'unlabeled/weak_valid': self.valid[..., None]}

  def test_equal_numpy(self):
    got = self.evaluate(monitors_lib.fusion_monitors(
        tf.constant(self.decoder), tf.constant(self.cam),
        tf.constant(self.picked),
        {k: tf.constant(v) for k, v in self.features.items()},
        dataset_info.DatasetInfo(num_classes=_CLASSES,
                                 ignore_label=_IGNORE)))
    counted = (self.valid > 0) & (self.label != _IGNORE)
    present = np.array([[((self.label[b] == c) & (self.valid[b] > 0)).any()
                         for c in range(1, _CLASSES)] for b in range(2)])
    # Image 0 shows 1, 2 and 3 (2 of them picked); image 1 shows 1 and 2
    # (1 picked) and picks 3, which it does not show.
    self.assertAllEqual(present, [[True, True, True], [True, True, False]])
    self.assertAllClose(got, {
        'decoder_balanced_accuracy': _balanced_accuracy(
            self.decoder.argmax(-1), self.label, counted),
        'cam_balanced_accuracy': _balanced_accuracy(
            self.cam.argmax(-1), self.label, counted),
        'cam_class_recall': 3 / 5,
        'cam_class_precision': 3 / 4}, rtol=1e-6)
    self.assertAllClose(monitors_lib.classes_picked(tf.constant(self.picked)),
                        2.0)

  def test_nothing_picked_scores_zero_not_nan(self):
    got = self.evaluate(monitors_lib.fusion_monitors(
        tf.constant(self.decoder), tf.constant(self.cam),
        tf.zeros([2, _CLASSES - 1]),
        {k: tf.constant(v) for k, v in self.features.items()},
        dataset_info.DatasetInfo(num_classes=_CLASSES,
                                 ignore_label=_IGNORE)))
    for name in ('cam_class_recall', 'cam_class_precision'):
      self.assertEqual(got[name], 0.0, name)
    self.assertEqual(monitors_lib.classes_picked(tf.zeros([2, 3])), 0.0)


if __name__ == '__main__':
  tf.test.main()
