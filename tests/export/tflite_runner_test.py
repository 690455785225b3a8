"""Running a .tflite: fitting images to its input, labels back, scoring."""

import os

import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import dataset_info
from official_seg.export import tflite_runner
from official_seg.export import tflite_scoring
from official_seg.modeling import tiling
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
    record, confusion = tflite_scoring.evaluate(model, dataset)
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
    with self.assertRaisesRegex(validation.MissingFileError,
                                'No TFLite model /no/m'):
      tflite_runner.TfliteModel('/no/m.tflite')


def _context_logits(normalized):
  """2-class logits that depend on the whole window (its mean)."""
  context = tf.reduce_mean(normalized[..., :1], axis=[1, 2], keepdims=True)
  context = tf.broadcast_to(context, tf.shape(normalized[..., :1]))
  return tf.concat([normalized[..., :1] * 4.0 - context,
                    normalized[..., 1:2] * 3.0 + context], -1)


def _write_context_tflite(path, input_size):
  """A .tflite of the export's layout whose classes depend on context."""
  def outputs(image, inside):
    normalized = (tf.cast(image, tf.float32) / 255.0 - 0.5) * tf.cast(
        inside, tf.float32)[None, :, :, None]
    probabilities = tf.nn.softmax(_context_logits(normalized))
    return [tf.identity(tf.argmax(probabilities, -1, output_type=tf.int32),
                        name=tflite_runner.SEMANTIC_OUTPUT),
            tf.identity(probabilities,
                        name=tflite_runner.PROBABILITIES_OUTPUT)]
  testing_utils.write_export_layout_tflite(path, input_size, outputs)


class WindowsTest(tf.test.TestCase):
  """The runner's windows against evaluation's in-graph tiling."""

  def test_runner_tiles_as_evaluation_does(self):
    input_size = (12, 14)
    path = os.path.join(self.create_tempdir().full_path, 'm.tflite')
    _write_context_tflite(path, input_size)
    model = tflite_runner.TfliteModel(path, num_threads=1,
                                      window_stride=(5, 6),
                                      window_blending='gaussian')
    windows = tiling.make_windows(list(input_size), [5, 6], 'gaussian')
    rng = np.random.default_rng(0)
    # Larger than the input both ways; shorter than it (padded, as the
    # eval parser pads to EVAL_CROP_SIZE = the input size).
    for shape in ((23, 31), (9, 40)):
      image = rng.integers(0, 256, shape + (3,), np.uint8)
      canvas = np.zeros((max(shape[0], 12), max(shape[1], 14), 3),
                        np.float32)
      canvas[:shape[0], :shape[1]] = image / 255.0 - 0.5
      probabilities = tiling.tiled_probabilities(
          lambda tiles: tf.nn.softmax(_context_logits(tiles)),
          tf.constant(canvas[None]), windows)
      expected = np.argmax(probabilities[0], -1)[:shape[0], :shape[1]]
      whole = np.argmax(_context_logits(canvas[None])[0], -1)
      self.assertGreater((expected != whole[:shape[0], :shape[1]]).sum(), 0,
                         'the windows must change some labels')
      self.assertAllEqual(model.predict(image), expected)

  def test_windows_need_the_probabilities_output(self):
    path = os.path.join(self.create_tempdir().full_path, 'm.tflite')
    testing_utils.write_stand_in_tflite(path, (9, 9))
    with self.assertRaisesRegex(ValueError, "no 'probabilities' output"):
      tflite_runner.TfliteModel(path, window_blending='uniform')


if __name__ == '__main__':
  tf.test.main()
