"""cross_validate: two folds of the tiny quickstart trained, evaluated, summarized, resumed and served as one ensemble (SavedModel and TFLite)."""

import io
import json
import os

import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.commands import cross_validate
from official_seg.data import input_fn
from official_seg.export import predictor
from official_seg.export import signatures
from official_seg.export import tflite_runner
from official_seg.runtime import cross_validation
from tests import testing_utils
from tests.commands import command_testing


def _png(seed, height, width):
  pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3))
  buffer = io.BytesIO()
  Image.fromarray(pixels.astype(np.uint8)).save(buffer, format='PNG')
  return buffer.getvalue()


def _served(export_dir, signature, images):
  """NumPy outputs of one signature of a SavedModel on encoded images."""
  outputs = tf.saved_model.load(export_dir).signatures[signature](
      **{signatures.INPUT_KEY: images})
  return {key: value.numpy() for key, value in outputs.items()}


class CrossValidateTest(testing_utils.TinyDataTestCase):

  num_train = 6
  num_val = 1

  def _run(self, **flags):
    return command_testing.run(
        cross_validate, gin_file=['experiments/quickstart.gin'],
        gin_param=testing_utils.tiny_bindings(self.data_dir, 1),
        work_dir=self.work_dir, **flags)

  def setUp(self):
    super().setUp()
    self.work_dir = self.create_tempdir().full_path

  def test_folds_trained_summarized_and_not_run_again(self):
    result = self._run(folds=2)
    self.assertEqual(result.status, 0, result.stderr)
    self.assertIn("Wrote 2 folds of split 'train'", result.stdout)
    for index in range(2):
      self.assertNotEmpty(input_fn.list_shards(
          self.data_dir, f'train_fold{index}of2_val'))
    with open(os.path.join(self.work_dir, cross_validation.SUMMARY_FILE)) as f:
      summary = json.load(f)['configurations']['experiment']
    mious = [record['mean_iou'] for record in summary['folds']]
    self.assertLen(mious, 2)
    self.assertEqual([r['global_step'] for r in summary['folds']], [1, 1])
    self.assertAllClose(summary['mean_iou']['mean'], np.mean(mious))
    self.assertAllClose(summary['mean_iou']['std'], np.std(mious, ddof=1))

    again = self._run(folds=2, ensemble=True, ensemble_tflite=['float32'])
    self.assertEqual(again.status, 0, again.stderr)
    self.assertIn('Folds of split \'train\': written earlier', again.stdout)
    self.assertEqual(again.stdout.count('done earlier'), 2)
    mean = self._check_ensemble()
    self._check_tflite_ensemble(mean)

  def _check_tflite_ensemble(self, mean):
    """The TFLite interpreter's probabilities are the folds' mean too."""
    path = os.path.join(self.work_dir, 'experiment',
                        cross_validation.TFLITE_ENSEMBLE_DIR,
                        'model_float32.tflite')
    model = tflite_runner.TfliteModel(path, num_threads=1)
    self.assertEqual(model.input_size, (41, 41))  # EVAL_CROP_SIZE.
    for index, (seed, height, width) in enumerate([(0, 30, 37),
                                                   (1, 41, 26)]):
      image = np.asarray(Image.open(io.BytesIO(_png(seed, height, width))))
      fitted, size = tflite_runner.fit_image(image, model.input_size)
      served = model.run_probabilities(fitted, size)
      # The SavedModels' float32 in TensorFlow, the .tflite's in TFLite's
      # kernels: equal to float32 rounding of the sums.
      self.assertAllClose(served[:height, :width],
                          mean[index, :height, :width], rtol=1e-5,
                          atol=1e-5)
      self.assertAllEqual(
          model.run(fitted, size)[0, :height, :width],
          np.argmax(served[:height, :width], axis=-1))

  def _check_ensemble(self):
    """The ensemble serves the mean of the folds' probabilities."""
    folder = os.path.join(self.work_dir, 'experiment')
    members = [predictor.find_saved_model(os.path.join(folder, f'fold{i}'))
               for i in range(2)]
    output = os.path.join(folder, cross_validation.ENSEMBLE_DIR)
    images = tf.constant([_png(0, 30, 37), _png(1, 41, 26)])
    first, second = (_served(d, signatures.PROBABILITIES, images)
                     for d in members)
    # Folds trained on other images: their mean is neither's.
    self.assertGreater(np.abs(first['probabilities'] -
                              second['probabilities']).max(), 1e-4)
    mean = (first['probabilities'].astype(np.float64) +
            second['probabilities']) / 2
    served = _served(output, signatures.PROBABILITIES, images)
    self.assertAllClose(served['probabilities'], mean, rtol=1e-6, atol=1e-7)
    self.assertAllClose(served['logits'], np.log(mean), rtol=1e-5, atol=1e-6)
    for key in signatures.SIZE_OUTPUTS:
      self.assertAllEqual(served[key], first[key])
    labels = _served(output, signatures.SERVING_DEFAULT, images)
    self.assertAllEqual(labels['height'], [30, 41])
    for index, (height, width) in enumerate([(30, 37), (41, 26)]):
      self.assertAllEqual(labels['semantic'][index, :height, :width],
                          np.argmax(mean[index, :height, :width], axis=-1))
      self.assertAllClose(labels['confidence'][index, :height, :width],
                          np.max(mean[index, :height, :width], axis=-1),
                          rtol=1e-6)
    self.assertAllEqual(np.unique(labels['semantic'][0, 30:]),
                        [signatures.PAD_LABEL])
    # predict_images reads an ensemble as any export; it has no one step.
    self.assertIsNone(predictor.Predictor(output).global_step)
    metadata = predictor.read_metadata(output)
    self.assertEqual(metadata.pop('ensemble_of'), members)
    self.assertEqual(metadata, predictor.read_metadata(members[0]))
    return mean

  def test_configurations_of_one_name_exit_2(self):
    result = self._run(folds=2,
                       configurations=['losses/dice.gin', 'mine/dice.gin'])
    self.assertEqual(result.status, 2)
    self.assertIn('each file names its configuration\'s folder',
                  result.stderr)

  def test_more_folds_than_images_exits_2(self):
    result = self._run(folds=7)
    self.assertEqual(result.status, 2)
    self.assertIn('--folds=7: give 2 to 6 folds', result.stderr)


if __name__ == '__main__':
  tf.test.main()
