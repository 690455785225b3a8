"""SavedModel export: signatures, Estimator.predict equality, exporters."""

import glob
import io
import json
import os
import shutil
import tempfile

import gin
import numpy as np
from official.vision.ops import preprocess_ops
from PIL import Image
import tensorflow as tf

from official_seg import validation
from official_seg.data import dataset_info
from official_seg.data import image_ops
from official_seg.data import preprocess
from official_seg.data import tfexample
from official_seg.evaluation import best_checkpoint
from official_seg.export import predictor
from official_seg.export import saved_model
from official_seg.export import serving_images
from official_seg.export import signatures
from official_seg.runtime import experiment
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import run_config as run_config_lib
from tests import testing_utils

# A learning rate of 0 keeps the seeded initial weights, whose label maps mix
# classes, so a preprocessing difference shows in the comparison.
# The exporters are off in tiny_bindings for the other tests; on here.
_EXTRA = ['BASE_LEARNING_RATE = 0.0', 'train/build_dataset.seed = 1',
          'make_exporters.latest = True', 'export_best.enabled = True']


def _png(array):
  buffer = io.BytesIO()
  Image.fromarray(array).save(buffer, format='PNG')
  return buffer.getvalue()


class ExportTest(tf.test.TestCase):
  """One tiny model trained with train_and_eval, its export loaded once."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    root = cls.root
    cls.data_dir = os.path.join(root, 'data')
    # One shard: the eval pipeline then reads examples in file order.
    testing_utils.write_tiny_dataset(cls.data_dir, num_train=4, num_val=5,
                                     num_shards=1)
    cls.model_dir = os.path.join(root, 'model')
    testing_utils.parse_tiny_quickstart(cls.data_dir, train_steps=2,
                                        extra=_EXTRA)
    # Keras draws initializer seeds from Python's generator; seed 2 gives
    # label maps of all four classes.
    tf.keras.utils.set_random_seed(2)
    experiment.run('train_and_eval', cls.model_dir)
    # The newest of the exporters' SavedModels (latest and best, both of
    # step 2); --mode=export writes its own in
    # test_windowed_export_tiles_as_evaluation_does.
    cls.export_dir = predictor.find_saved_model(cls.model_dir)
    cls.loaded = tf.saved_model.load(cls.export_dir)
    files = glob.glob(tfexample.shard_pattern(cls.data_dir, 'val'))
    cls.encoded = [
        tf.train.Example.FromString(record.numpy()).features.feature[
            tfexample.IMAGE_ENCODED].bytes_list.value[0]
        for record in tf.data.TFRecordDataset(files)]

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def setUp(self):
    super().setUp()
    testing_utils.parse_tiny_quickstart(self.data_dir, train_steps=2,
                                        extra=_EXTRA)

  def _serve(self, signature, images):
    return {key: value.numpy() for key, value in
            self.loaded.signatures[signature](images=images).items()}

  def test_signatures_and_metadata(self):
    self.assertCountEqual(self.loaded.signatures, [
        signatures.SERVING_DEFAULT, signatures.PROBABILITIES,
        signatures.IMAGE_TENSOR_PROBABILITIES,
        f'{signatures.IMAGE_TENSOR}:{signatures.SERVING_DEFAULT}'])
    inputs = {key: self.loaded.signatures[key].structured_input_signature[1][
        signatures.INPUT_KEY].dtype for key in self.loaded.signatures}
    self.assertEqual(inputs[signatures.SERVING_DEFAULT], tf.string)
    self.assertEqual(inputs[signatures.IMAGE_TENSOR_PROBABILITIES], tf.float32)
    metadata = predictor.read_metadata(self.export_dir)
    self.assertEqual(metadata['class_names'],
                     ['background', 'disk', 'box', 'triangle'])
    self.assertEqual(metadata['ignore_label'], 255)
    self.assertEqual(metadata['palette'], 'synthetic')
    self.assertEqual(metadata['resize_range'], [None, None, None])

  def test_label_maps_equal_estimator_predict(self):
    estimator, _, eval_fn = estimator_lib.build_estimator(
        run_config_lib.build_run_config(self.model_dir))[:3]
    expected = list(estimator.predict(eval_fn))[:len(self.encoded)]
    served = self._serve(signatures.SERVING_DEFAULT, tf.constant(self.encoded))
    probabilities = self._serve(signatures.PROBABILITIES,
                                tf.constant(self.encoded))['probabilities']
    largest = max(int(e['height']) for e in expected), max(
        int(e['width']) for e in expected)
    self.assertEqual(served['semantic'].shape, (len(expected),) + largest)
    classes = set()
    for index, example in enumerate(expected):
      height, width = int(example['height']), int(example['width'])
      self.assertEqual((served['height'][index], served['width'][index]),
                       (height, width))
      labels = served['semantic'][index]
      self.assertAllEqual(labels[:height, :width],
                          example['semantic'][:height, :width])
      self.assertTrue((labels[height:] == signatures.PAD_LABEL).all())
      self.assertTrue((labels[:, width:] == signatures.PAD_LABEL).all())
      # Both pad to EVAL_CROP_SIZE (41): same input, same probabilities.
      self.assertAllClose(probabilities[index], example['probabilities'],
                          atol=1e-5)
      # Confidence and entropy (nats) of those probabilities, at the size.
      cut = example['probabilities'][:height, :width]
      self.assertAllClose(served['confidence'][index, :height, :width],
                          cut.max(-1), atol=1e-5)
      self.assertAllClose(served['entropy'][index, :height, :width],
                          -(cut * np.log(np.maximum(cut, 1e-30))).sum(-1),
                          atol=1e-4)
      self.assertTrue((served['confidence'][index, height:] == 0).all())
      classes.update(np.unique(labels[:height, :width]))
    self.assertGreater(len(classes), 1, 'a vacuous comparison')

  def test_windowed_export_tiles_as_evaluation_does(self):
    # Images up to 40 pixels, windows of 20 x 24 over crops of 16: the
    # eval parser and the receiver both pad an image to its own size.
    windowed = ['EVAL_CROP_SIZE = [16, 16]', 'EVAL_BATCH_SIZE = 1',
                'WINDOW_SIZE = [20, 24]',
                "InferenceOptions.window_blending = 'gaussian'"]
    testing_utils.parse_tiny_quickstart(self.data_dir, train_steps=2,
                                        extra=_EXTRA + windowed)
    before = set(os.listdir(os.path.join(self.model_dir, 'export')))
    experiment.run('export', self.model_dir)
    export_dir = predictor.find_saved_model(self.model_dir)
    try:
      # --mode=export writes export/<timestamp>/, the newest SavedModel.
      self.assertRegex(export_dir, r'/export/\d+$')
      estimator, _, eval_fn = estimator_lib.build_estimator(
          run_config_lib.build_run_config(self.model_dir))[:3]
      expected = list(estimator.predict(eval_fn))[:len(self.encoded)]
      loaded = tf.saved_model.load(export_dir)
      classes = set()
      for encoded, example in zip(self.encoded, expected):
        height, width = int(example['height']), int(example['width'])
        self.assertGreater(max(height, width), 24, 'one window covers')
        served = loaded.signatures[signatures.SERVING_DEFAULT](
            images=tf.constant([encoded]))['semantic'].numpy()[0]
        self.assertAllEqual(served, example['semantic'][:height, :width])
        classes.update(np.unique(served))
      self.assertGreater(len(classes), 1, 'a vacuous comparison')
    finally:
      for name in (set(os.listdir(os.path.join(self.model_dir, 'export')))
                   - before):
        shutil.rmtree(os.path.join(self.model_dir, 'export', name))

  def test_resizing_parser_labels_come_back_at_the_decoded_size(self):
    # ADE20K's eval resize: the export resizes like eval, then resizes the
    # labels back with nearest neighbours and aligned corners.
    testing_utils.parse_tiny_quickstart(self.data_dir, train_steps=2, extra=[
        'Parser.min_resize_value = 20', 'Parser.max_resize_value = 33',
        'Parser.resize_factor = 8'] + _EXTRA)
    estimator, _, eval_fn = estimator_lib.build_estimator(
        run_config_lib.build_run_config(self.model_dir))[:3]
    expected = list(estimator.predict(eval_fn))[:len(self.encoded)]
    built = estimator_lib.build_estimator(
        run_config_lib.build_run_config(self.model_dir))
    export_dir = built.serving_estimator.export_saved_model(
        self.create_tempdir().full_path,
        saved_model.serving_input_receiver_fn(built.eval_parser)).decode(
            'utf-8')
    served = tf.saved_model.load(export_dir).signatures[
        signatures.SERVING_DEFAULT](images=tf.constant(self.encoded))
    for index, example in enumerate(expected):
      height, width = int(served['height'][index]), int(served['width'][index])
      resized = example['semantic'][:example['height'], :example['width']]
      self.assertNotEqual(resized.shape, (height, width))
      back = tf.compat.v1.image.resize_nearest_neighbor(
          resized[None, :, :, None], [height, width], align_corners=True)
      self.assertAllEqual(served['semantic'][index, :height, :width],
                          back[0, :, :, 0])

  def test_export_records_the_eval_parser_s_resize(self):
    testing_utils.parse_tiny_quickstart(self.data_dir, train_steps=2, extra=[
        'Parser.min_resize_value = 20', 'Parser.max_resize_value = 33',
        'Parser.resize_factor = 8'] + _EXTRA)
    before = set(os.listdir(os.path.join(self.model_dir, 'export')))
    experiment.run('export', self.model_dir)
    try:
      export_dir = predictor.find_saved_model(self.model_dir)
      self.assertEqual(predictor.read_metadata(export_dir)['resize_range'],
                       [20, 33, 8])
      self.assertEqual(predictor.Predictor(export_dir).resize_range,
                       (20, 33, 8))
    finally:
      for name in (set(os.listdir(os.path.join(self.model_dir, 'export')))
                   - before):
        shutil.rmtree(os.path.join(self.model_dir, 'export', name))

  def test_image_tensor_signature_runs_pixels_as_given(self):
    image = tf.io.decode_image(self.encoded[0], channels=3).numpy()
    mean = preprocess_ops.MEAN_RGB
    padded = np.broadcast_to(np.float32(mean), (41, 41, 3)).copy()
    padded[:image.shape[0], :image.shape[1]] = image
    outputs = self._serve(signatures.IMAGE_TENSOR_PROBABILITIES,
                          tf.constant(padded[None]))
    self.assertEqual(outputs['logits'].shape, (1, 41, 41, 4))
    # Padded with the mean pixel to EVAL_CROP_SIZE, pixels give exactly the
    # probabilities of the encoded image.
    served = self._serve(signatures.PROBABILITIES,
                         tf.constant(self.encoded[:1]))
    self.assertAllClose(outputs['probabilities'], served['probabilities'],
                        atol=1e-6)
    labels = self._serve(
        f'{signatures.IMAGE_TENSOR}:{signatures.SERVING_DEFAULT}',
        tf.constant(padded[None]))
    self.assertEqual(labels['semantic'].shape, (1, 41, 41))
    self.assertAllEqual(labels['height'], [41])

  def test_image_larger_than_eval_crop_is_served_at_its_size(self):
    image = np.random.default_rng(0).integers(0, 255, (50, 45, 3), np.uint8)
    served = self._serve(signatures.SERVING_DEFAULT,
                         tf.constant([_png(image), self.encoded[0]]))
    self.assertEqual(served['semantic'].shape, (2, 50, 45))
    self.assertTrue((served['semantic'][0] >= 0).all())

  def test_bytes_that_are_not_an_image_name_the_input(self):
    with self.assertRaisesRegex(
        tf.errors.InvalidArgumentError,
        r'input 1 of the batch \(12 bytes\) is not a JPEG or PNG image'):
      self._serve(signatures.SERVING_DEFAULT,
                  tf.constant([self.encoded[0], b'not an image']))
    model = predictor.Predictor(self.export_dir)
    with self.assertRaisesRegex(ValueError, 'notes.txt: .*input 0 of the '
                                'batch .* is not a JPEG or PNG image'):
      model(b'GIF89a', name='notes.txt')

  def test_predictor_returns_the_served_labels(self):
    model = predictor.Predictor(self.export_dir)
    self.assertEqual(model.global_step, 2)
    served = self._serve(signatures.SERVING_DEFAULT,
                         tf.constant(self.encoded[:1]))
    labels = model(self.encoded[0])
    height, width = labels.shape
    self.assertEqual((height, width), (served['height'][0], served['width'][0]))
    self.assertAllEqual(labels, served['semantic'][0, :height, :width])
    outputs = model.outputs(self.encoded[0])
    self.assertAllEqual(outputs['semantic'], labels)
    for key in ('confidence', 'entropy'):
      self.assertAllEqual(outputs[key], served[key][0, :height, :width])

  def test_exporters_write_latest_and_best(self):
    best_step = best_checkpoint.read_best(self.model_dir)['global_step']
    for name, step in (('latest', 2), ('best', best_step)):
      exports = sorted(glob.glob(os.path.join(self.model_dir, 'export', name,
                                              '*', 'saved_model.pb')))
      self.assertNotEmpty(exports, name)
      export_dir = os.path.dirname(exports[-1])
      self.assertTrue(os.path.exists(os.path.join(
          export_dir, 'assets.extra', saved_model.METADATA_FILE)))
      variables = tf.train.load_checkpoint(
          os.path.join(export_dir, 'variables', 'variables'))
      self.assertEqual(variables.get_tensor('global_step'), step, name)

  def test_export_without_checkpoint_names_the_model_dir(self):
    empty = self.create_tempdir().full_path
    with self.assertRaisesRegex(validation.MissingFileError,
                                f'No checkpoint to export in {empty}'):
      experiment.run('export', empty)
    with self.assertRaisesRegex(validation.MissingFileError,
                                'No SavedModel under'):
      predictor.find_saved_model(empty)


class ExportGraphTest(tf.test.TestCase):
  """The receiver's decoding against NumPy; the metadata; the serving estimator."""

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def _parser(self, crop_size, **kwargs):
    return preprocess.Parser(False, ignore_label=255, crop_size=crop_size,
                             **kwargs)

  def _eval_examples(self, images, parser):
    """The eval parser's (image, height, width) of each image, as evaluated."""
    out = []
    for image in images:
      decoded = {'image': tf.constant(image), 'filename': tf.constant('x'),
                 'label': tf.zeros(image.shape[:2] + (1,), tf.uint8),
                 'height': image.shape[0], 'width': image.shape[1]}
      features, _ = parser(decoded)
      out.append(features)
    return out

  def test_served_pixels_equal_the_evaluated_ones_exactly(self):
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 255, size, np.uint8)
              for size in ((5, 7, 3), (9, 4, 3))]
    parser = self._parser((9, 9))
    served, sizes, original = serving_images.decode_images(
        tf.constant([_png(image) for image in images]), parser)
    self.assertAllEqual(sizes, [[5, 7], [9, 4]])
    self.assertAllEqual(original, sizes)
    self.assertEqual(served.shape, (2, 9, 9, 3))
    for index, features in enumerate(self._eval_examples(images, parser)):
      # Equal, not close: the receiver runs the eval parser's own ops.
      self.assertAllEqual(served[index], features['image'])
    self.assertAllEqual(served[0, 5:], np.zeros((4, 9, 3)))

  def test_served_pixels_equal_the_evaluated_ones_with_a_resize(self):
    image = np.random.default_rng(2).integers(0, 255, (30, 20, 3), np.uint8)
    parser = self._parser((33, 33), min_resize_value=16, max_resize_value=16,
                          resize_factor=4)
    served, sizes, original = serving_images.decode_images(
        tf.constant([_png(image)]), parser)
    self.assertAllEqual(original, [[30, 20]])
    self.assertAllEqual(sizes[0], image_ops.resize_to_range_size(
        30, 20, 16, 16, 4))
    (features,) = self._eval_examples([image], parser)
    self.assertAllEqual(sizes[0], [features['height'], features['width']])
    self.assertAllEqual(served[0], features['image'])

  def test_batch_with_a_larger_image_pads_to_its_size(self):
    images = [np.zeros((12, 3, 3), np.uint8), np.zeros((2, 2, 3), np.uint8)]
    served, _, _ = serving_images.decode_images(
        tf.constant([_png(image) for image in images]), self._parser((6, 6)))
    self.assertEqual(served.shape, (2, 12, 6, 3))

  def test_metadata_records_the_dataset_facts(self):
    dataset = dataset_info.DatasetInfo(num_classes=2,
                                       class_names=['sky', 'road'],
                                       palette='cityscapes',
                                       image_channels=4, image_bit_depth=16)
    path = os.path.join(self.create_tempdir().full_path, 'meta.json')
    saved_model.write_metadata(path, dataset)
    with open(path) as f:
      self.assertEqual(json.load(f), {
          'class_names': ['sky', 'road'], 'num_classes': 2,
          'ignore_label': 255, 'palette': 'cityscapes',
          'image_channels': 4, 'image_bit_depth': 16})

  def test_a_tpu_estimator_exports_through_an_estimator(self):
    testing_utils.parse_tiny_quickstart(
        self.create_tempdir().full_path,
        extra=['USE_TPU_ESTIMATOR = True'])
    model_dir = self.create_tempdir().full_path
    built = estimator_lib.build_estimator(
        run_config_lib.build_run_config(model_dir))
    self.assertIsInstance(built.estimator,
                          tf.compat.v1.estimator.tpu.TPUEstimator)
    self.assertNotIsInstance(built.serving_estimator,
                             tf.compat.v1.estimator.tpu.TPUEstimator)
    self.assertEqual(built.serving_estimator.model_dir, model_dir)

  def test_an_estimator_exports_itself(self):
    testing_utils.parse_tiny_quickstart(self.create_tempdir().full_path)
    built = estimator_lib.build_estimator(
        run_config_lib.build_run_config(self.create_tempdir().full_path))
    self.assertIs(built.serving_estimator, built.estimator)


if __name__ == '__main__':
  tf.test.main()
