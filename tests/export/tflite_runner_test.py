"""Running a .tflite: fitting images to its input, labels back, scoring."""

import os

import numpy as np
import tensorflow as tf

from official_seg.data import dataset_info
from official_seg.export import tflite_runner
from tests import testing_utils


class LayoutTest(tf.test.TestCase):

  def test_an_image_that_fits_is_copied_unchanged_into_the_corner(self):
    image = np.random.default_rng(0).integers(0, 256, (5, 7, 3), np.uint8)
    fitted, size = tflite_runner.fit_image(image, (9, 8))
    self.assertEqual(fitted.shape, (1, 9, 8, 3))
    self.assertAllEqual(size, [5, 7])
    self.assertAllEqual(fitted[0, :5, :7], image)
    self.assertEqual(fitted[0, 5:].sum() + fitted[0, :, 7:].sum(), 0)

  def test_a_larger_image_is_scaled_to_fit_keeping_its_aspect(self):
    self.assertEqual(tflite_runner.fitted_size((40, 20), (10, 10)), (10, 5))
    self.assertEqual(tflite_runner.fitted_size((30, 90), (10, 10)), (3, 10))
    # The eval parser's resize comes first: shorter side to 20, factor 8.
    self.assertEqual(
        tflite_runner.fitted_size((30, 40), (64, 64), (20, 33, 8)), (25, 33))

  def test_labels_come_back_at_the_decoded_size(self):
    semantic = np.arange(16).reshape(1, 4, 4)
    self.assertAllEqual(tflite_runner.labels_at_original_size(
        semantic, (2, 3), (2, 3)), semantic[0, :2, :3])
    # Nearest neighbours, aligned corners: rows 0, 0, 1, 1 of a 2-row map.
    back = tflite_runner.labels_at_original_size(semantic, (2, 2), (4, 4))
    self.assertAllEqual(back, np.array([[0, 0, 1, 1], [0, 0, 1, 1],
                                        [4, 4, 5, 5], [4, 4, 5, 5]]))


class EvaluateTest(testing_utils.TinyDataTestCase):
  """evaluate() on a stand-in .tflite in the real interpreter."""

  def test_mean_iou_equals_a_numpy_confusion_matrix(self):
    dataset = dataset_info.DatasetInfo(
        num_classes=4, class_names=['a', 'b', 'c', 'd'], ignore_label=255,
        data_dir=self.data_dir, eval_split='val')
    path = os.path.join(self.create_tempdir().full_path, 'm.tflite')
    testing_utils.write_stand_in_tflite(path, (41, 41), {'global_step': 5})
    model = tflite_runner.TfliteModel(path, num_threads=1)
    record, confusion = tflite_runner.evaluate(model, dataset)
    expected = testing_utils.stand_in_confusion(self.data_dir, 'val')
    self.assertAllEqual(confusion, expected)
    union = expected.sum(0) + expected.sum(1) - np.diag(expected)
    present = union > 0
    iou = np.diag(expected)[present] / union[present]
    self.assertGreater(present.sum(), 1, 'a vacuous comparison')
    self.assertAllClose(record['mean_iou'], iou.mean())
    self.assertAllClose(record['pixel_accuracy'],
                        np.trace(expected) / expected.sum())
    self.assertEqual(record['num_images'], self.num_val)
    self.assertEqual(record['global_step'], 5)
    self.assertEqual(record['model_bytes'], os.path.getsize(path))
    self.assertGreater(record['latency_ms'], 0)

  def test_a_missing_model_names_its_path(self):
    with self.assertRaisesRegex(FileNotFoundError, 'No TFLite model /no/m'):
      tflite_runner.TfliteModel('/no/m.tflite')


if __name__ == '__main__':
  tf.test.main()
