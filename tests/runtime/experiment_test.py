"""Evaluation exactness on a trained tiny model: NumPy reference, TPUEstimator parity, TTA."""

import json
import os

import gin
import numpy as np
import tensorflow as tf

from official_seg.data import tfexample
from official_seg.runtime import experiment
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import run_config as run_config_lib
from tests import testing_utils
from tests.evaluation import boundary_test
from tests.modeling import tiling_test

IGNORE = 255


def _original_labels(data_dir):
  """The val labels as written, in the order the eval input reads them.

  The eval input interleaves its shards deterministically, one record from
  each in turn.
  """
  files = sorted(tf.io.gfile.glob(tfexample.shard_pattern(data_dir, 'val')))
  records = tf.data.Dataset.from_tensor_slices(files).interleave(
      tf.data.TFRecordDataset, cycle_length=len(files), block_length=1)
  decoder = tfexample.Decoder()
  return [decoder.decode(r)['label'].numpy()[..., 0] for r in records]


def _reference(labels, predictions, num_classes):
  confusion = np.zeros((num_classes, num_classes), np.int64)
  for label, prediction in zip(labels, predictions):
    valid = label != IGNORE
    np.add.at(confusion, (label[valid], prediction[valid]), 1)
  tp = np.diag(confusion).astype(np.float64)
  union = confusion.sum(0) + confusion.sum(1) - tp
  present = union > 0
  return confusion, np.mean(tp[present] / union[present]), tp.sum() / confusion.sum()


class EvaluationTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = tf.compat.v1.test.get_temp_dir()
    cls.data_dir = os.path.join(root, 'data')
    # Five val images with eval batch 2: the last batch is partial.
    testing_utils.write_tiny_dataset(cls.data_dir, num_train=6, num_val=5)
    cls.model_dir = os.path.join(root, 'model')
    # The evaluation, not the training, is the subject: any trained model.
    testing_utils.copy_trained_tiny_model(cls.model_dir, train_steps=3)

  def _estimator(self, extra=()):
    testing_utils.parse_tiny_quickstart(self.data_dir, extra=extra)
    config = run_config_lib.build_run_config(self.model_dir)
    return estimator_lib.build_estimator(config)[:3]

  def _evaluate(self, extra=()):
    estimator, _, eval_fn = self._estimator(extra)
    return estimator.evaluate(eval_fn, steps=None), estimator, eval_fn

  def test_mean_iou_equals_numpy_on_original_labels(self):
    result, estimator, eval_fn = self._evaluate()
    predictions = list(estimator.predict(eval_fn))[:5]
    labels = _original_labels(self.data_dir)
    cropped = [p['semantic'][:p['height'], :p['width']] for p in predictions]
    for label, prediction in zip(labels, cropped):
      self.assertEqual(label.shape, prediction.shape)
    _, mean_iou, accuracy = _reference(labels, cropped, 4)
    self.assertEqual(result['num_images'], 5)
    self.assertAllClose(result['mean_iou'], mean_iou, rtol=1e-12)
    self.assertAllClose(result['pixel_accuracy'], accuracy, rtol=1e-12)
    # Contour bands of the default 3 px, on the images as written: the eval
    # parser's padding counts nowhere.
    bands = sum(boundary_test.reference_counts(
        label, prediction, 4, 3, band=boundary_test.shifted_band)
                for label, prediction in zip(labels, cropped))
    self.assertGreater(bands[:, 0].sum(), 0, 'no band in common')
    for index, name in enumerate(['background', 'disk', 'box', 'triangle']):
      if bands[index, 1]:
        self.assertAllClose(result[f'boundary_iou/{name}'],
                            bands[index, 0] / bands[index, 1], rtol=1e-12)
      else:
        self.assertTrue(np.isnan(result[f'boundary_iou/{name}']))

  def test_estimator_and_tpu_estimator_agree(self):
    plain, _, _ = self._evaluate()
    tpu, estimator, _ = self._evaluate(['USE_TPU_ESTIMATOR = True'])
    self.assertIsInstance(estimator, tf.compat.v1.estimator.tpu.TPUEstimator)
    self.assertCountEqual(plain, tpu)
    for key in plain:
      if key.startswith('pictures/'):
        continue  # Serialized PNGs, whose bytes need not repeat.
      if isinstance(plain[key], float) and np.isnan(plain[key]):
        self.assertTrue(np.isnan(tpu[key]))
      else:
        self.assertEqual(plain[key], tpu[key], key)

  def _first_probabilities(self, extra=()):
    estimator, _, eval_fn = self._estimator(extra)
    return next(iter(estimator.predict(eval_fn)))['probabilities']

  def test_multi_scale_and_flip_runs_and_differs_from_single_scale(self):
    tta = ['InferenceOptions.eval_scales = [0.75, 1.0, 1.25]',
           'InferenceOptions.add_flipped_images = True']
    single, _, _ = self._evaluate()
    multi, _, _ = self._evaluate(tta)
    self.assertEqual(multi['num_images'], 5)
    # The loss is of the single-scale logits in both.
    self.assertAllClose(single['loss'], multi['loss'], rtol=1e-5)
    single_probs = self._first_probabilities()
    multi_probs = self._first_probabilities(tta)
    self.assertAllClose(multi_probs.sum(-1), np.ones(multi_probs.shape[:2]),
                        rtol=1e-5)
    self.assertGreater(np.abs(single_probs - multi_probs).max(), 0.0)
    # The explicit single scale without flips is the default path exactly.
    self.assertAllEqual(self._first_probabilities(
        ['InferenceOptions.eval_scales = [1.0]']), single_probs)

  def test_one_covering_window_evaluates_as_the_whole_image(self):
    whole, _, _ = self._evaluate()
    windowed, _, _ = self._evaluate(['WINDOW_SIZE = [41, 41]'])
    self.assertAllEqual(windowed['confusion_matrix'],
                        whole['confusion_matrix'])
    self.assertAllClose(windowed['loss'], whole['loss'], rtol=1e-5)
    self.assertAllEqual(self._first_probabilities(['WINDOW_SIZE = [41, 41]']),
                        self._first_probabilities())

  def test_windowed_evaluation_blends_the_models_windows(self):
    """Windowed eval against NumPy blending of whole-image window passes.

    EVAL_CROP_SIZE is smaller than the images, so the parser pads each batch
    to its largest image; the windows' own probabilities come from the
    whole-image path run on each window cut out of those inputs.
    """
    window, stride = (20, 24), (11, 13)
    extra = ['EVAL_CROP_SIZE = [16, 16]', f'WINDOW_SIZE = {list(window)}',
             f'InferenceOptions.window_stride = {list(stride)}',
             "InferenceOptions.window_blending = 'gaussian'"]
    result, estimator, eval_fn = self._evaluate(extra)
    predictions = list(estimator.predict(eval_fn))[:5]
    batches = list(eval_fn({'batch_size': 2}).as_numpy_iterator())
    images = [image for features, _ in batches for image in features['image']]
    canvases = {image.shape[:2] for image in images}
    self.assertGreater(len(canvases), 1, 'batches padded alike')
    expected = self._np_windowed(images, window, stride)
    for blended, prediction in zip(expected, predictions):
      self.assertAllClose(prediction['probabilities'], blended, atol=2e-5)
    labels = _original_labels(self.data_dir)
    cropped = [p['semantic'][:p['height'], :p['width']] for p in predictions]
    for label, prediction in zip(labels, cropped):
      self.assertEqual(label.shape, prediction.shape)
    _, mean_iou, accuracy = _reference(labels, cropped, 4)
    self.assertAllClose(result['mean_iou'], mean_iou, rtol=1e-12)
    self.assertAllClose(result['pixel_accuracy'], accuracy, rtol=1e-12)
    self.assertEqual(result['num_images'], 5)

  def _np_windowed(self, images, window, stride):
    """NumPy blending of the whole-image probabilities of each window.

    Every window of every image runs in one whole-image prediction.
    """
    corners, tiles = [], []
    for image in images:
      rows, _ = tiling_test.np_starts(image.shape[0], window[0], stride[0])
      cols, _ = tiling_test.np_starts(image.shape[1], window[1], stride[1])
      corners.append([(y, x) for y in rows for x in cols])
      self.assertGreater(len(corners[-1]), 1)
      tiles += [image[y:y + window[0], x:x + window[1]]
                for y, x in corners[-1]]
    estimator, _, _ = self._estimator([f'EVAL_CROP_SIZE = {list(window)}'])
    tiles = np.stack(tiles)

    def input_fn(params):
      del params  # Unused.
      features = {'image': tiles, 'height': np.full(len(tiles), window[0]),
                  'width': np.full(len(tiles), window[1]),
                  'valid': np.ones(len(tiles), np.float32)}
      return tf.data.Dataset.from_tensor_slices(features).batch(16)

    probabilities = iter(p['probabilities']
                         for p in estimator.predict(input_fn))
    results = []
    for image, image_corners in zip(images, corners):
      size = image.shape[:2]
      maps, total = tiling_test.np_weight_maps(size, window, stride,
                                               'gaussian')
      result = np.zeros(size + (4,))
      for (y, x), weight in zip(image_corners, maps):
        result[y:y + window[0], x:x + window[1]] += next(probabilities) * (
            weight / total)[y:y + window[0], x:x + window[1], None]
      results.append(result)
    return results

  def test_eval_mode_records_confusion_matrix_and_best(self):
    testing_utils.parse_tiny_quickstart(self.data_dir)
    eval_model_dir = self.model_dir
    record = experiment.run('eval', eval_model_dir)
    eval_dir = os.path.join(eval_model_dir, 'eval')
    with open(os.path.join(eval_dir, f'confusion_matrix-{record["global_step"]}.json')) as f:
      saved = json.load(f)
    matrix = np.array(saved['matrix'])
    self.assertEqual(saved['class_names'], ['background', 'disk', 'box', 'triangle'])
    self.assertAllClose(np.trace(matrix) / matrix.sum(), record['pixel_accuracy'])
    self.assertGreater(record['images_per_second'], 0)
    with open(os.path.join(eval_model_dir, 'best', 'best.json')) as f:
      self.assertGreaterEqual(json.load(f)['mean_iou'], record['mean_iou'])


class TrainingHooksTest(tf.test.TestCase):
  """Which hooks each trainer of a parameter-server cluster runs."""

  _CLUSTER = {'chief': ['127.0.0.1:1'], 'worker': ['127.0.0.1:2',
                                                   '127.0.0.1:3'],
              'ps': ['127.0.0.1:4']}

  def setUp(self):
    super().setUp()
    gin.clear_config()
    gin.parse_config(['startup_delay_hooks.startup_delay_steps = 50',
                      'profile_hooks.profile_steps = [10, 20]'])

  def _hooks(self, task_type, index):
    os.environ['TF_CONFIG'] = json.dumps(
        {'cluster': self._CLUSTER, 'task': {'type': task_type,
                                            'index': index}})
    self.addCleanup(os.environ.pop, 'TF_CONFIG')
    config = tf.estimator.RunConfig(model_dir=self.create_tempdir().full_path)
    return experiment._training_hooks(  # pylint: disable=protected-access
        tf.estimator.Estimator(lambda features, labels, mode: None,
                               config=config))

  def test_worker_k_waits_for_k_times_startup_delay_steps(self):
    # Worker 1 is the cluster's third trainer (chief 0, worker 0 is 1).
    waiters = [h for h in self._hooks('worker', 1)
               if isinstance(h, tf.estimator.GlobalStepWaiterHook)]
    self.assertLen(waiters, 1)
    self.assertEqual(waiters[0]._wait_until_step, 100)  # pylint: disable=protected-access

  def test_chief_starts_at_once_and_alone_saves_config_and_profiles(self):
    kinds = {type(h).__name__ for h in self._hooks('chief', 0)}
    self.assertEqual(kinds, {'GinConfigSaverHook', 'ProfileHook'})


class EvaluatorTimeoutTest(tf.test.TestCase):

  def test_evaluator_that_never_sees_the_last_step_says_so_and_exits_1(self):
    data_dir = self.create_tempdir().full_path
    testing_utils.write_tiny_dataset(data_dir, num_train=2, num_val=2)
    model_dir = self.create_tempdir().full_path
    waited = testing_utils.run_binary(
        model_dir, testing_utils.tiny_bindings(data_dir, 3, extra=[
            'continuous_eval.timeout_secs = 1',
            'continuous_eval.min_interval_secs = 0']), mode='continuous_eval')
    self.assertEqual(waited.returncode, 1, waited.stderr[-3000:])
    self.assertIn(f'Error: No checkpoint of step 3 (TRAIN_STEPS) in {model_dir}'
                  ' before continuous_eval.timeout_secs', waited.stderr)


if __name__ == '__main__':
  tf.test.main()
