"""TFLite of a 4-channel 16-bit model: its input, its labels against the SavedModel's, the tools on its images."""

import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf
import tifffile

from official_seg import validation
from official_seg.commands import predict_images
from official_seg.data import dataset_info
from official_seg.data import encode
from official_seg.data import input_fn
from official_seg.data import tfexample
from official_seg.datasets import channel_evidence
from official_seg.datasets import synthetic
from official_seg.export import predictor
from official_seg.export import tflite
from official_seg.export import tflite_runner
from official_seg.export import tflite_scoring
from official_seg.runtime import experiment
from tests import testing_utils
from tests.commands import command_testing

# As tflite_test: untrained weights whose label maps mix classes.
_EXTRA = ['BASE_LEARNING_RATE = 0.0', 'train/build_dataset.seed = 1',
          'IMAGE_CHANNELS = 4', 'IMAGE_BIT_DEPTH = 16', 'NUM_CLASSES = 4',
          'Parser.mean_rgb = [120.0, 110.0, 100.0, 130.0]',
          'Parser.stddev_rgb = [50.0, 40.0, 45.0, 30.0]']
_SIZES = {'min_size': 32, 'max_size': 40}


def _write_dataset(data_dir):
  """The fourth_channel set's images spread to 16 bits (v * 257)."""
  synthetic.write_splits(
      data_dir, {'train': 2, 'val': 4}, 1,
      lambda count, seed, tally: channel_evidence.examples(
          ((image.astype(np.uint16) * 257, label) for image, label in
           channel_evidence.samples('fourth_channel', count, seed,
                                    **_SIZES)), f'rgbn_{seed}', tally))


class TfliteChannelsTest(tf.test.TestCase):
  """One tiny model of 4 channels of 16 bits, exported both ways once."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.data_dir = os.path.join(cls.root, 'data')
    _write_dataset(cls.data_dir)
    cls.model_dir = os.path.join(cls.root, 'model')
    testing_utils.parse_tiny_quickstart(cls.data_dir, train_steps=1,
                                        extra=_EXTRA)
    tf.keras.utils.set_random_seed(2)
    experiment.run('train', cls.model_dir)
    experiment.run('export', cls.model_dir)
    experiment.run('export_tflite', cls.model_dir)
    cls.path = tflite.tflite_path(cls.model_dir, 'float32')
    decoder = tfexample.Decoder(channels=4, bit_depth=16)
    records = tf.data.TFRecordDataset(
        input_fn.list_shards(cls.data_dir, 'val'))
    cls.encoded = [decoder.encoded(r)[0].numpy() for r in records]
    saved = predictor.Predictor(predictor.find_saved_model(cls.model_dir))
    cls.expected = [saved(encoded) for encoded in cls.encoded]

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def setUp(self):
    super().setUp()
    testing_utils.parse_tiny_quickstart(self.data_dir, train_steps=1,
                                        extra=_EXTRA)
    self.model = tflite_runner.TfliteModel(self.path, num_threads=1)

  def test_the_input_takes_four_channels_of_16_bit_values(self):
    interpreter = tf.lite.Interpreter(model_path=self.path)
    image = [d for d in interpreter.get_input_details()
             if d['name'] == tflite_runner.IMAGE_INPUT][0]
    self.assertAllEqual(image['shape'], [1, 41, 41, 4])
    self.assertEqual(image['dtype'], np.int32)
    self.assertEqual((self.model.channels, self.model.bit_depth), (4, 16))

  def test_labels_agree_with_the_saved_model(self):
    classes = set(np.unique(np.concatenate(
        [e.ravel() for e in self.expected])))
    self.assertGreater(len(classes), 1, 'a vacuous comparison')
    same = total = 0
    for encoded, expected in zip(self.encoded, self.expected):
      labels = self.model(encoded)
      self.assertEqual(labels.shape, expected.shape)
      same += (labels == expected).sum()
      total += expected.size
    # float32 differs from TensorFlow by kernels' summation order alone
    # (tflite_test's bound).
    self.assertGreaterEqual(same / total, 0.99)

  def test_scoring_reads_the_16_bit_records(self):
    record, confusion = tflite_scoring.evaluate(self.model,
                                                dataset_info.DatasetInfo())
    self.assertEqual(confusion.sum(), sum(e.size for e in self.expected))
    self.assertEqual(record['global_step'], 1)

  def test_an_rgb_8_bit_image_is_refused_naming_it(self):
    rgb = encode.encode_pixels_png(np.zeros((5, 6, 3), np.uint8))
    with self.assertRaisesRegex(
        validation.ConfigurationError,
        r'^photo.png has 3 channels of 8 bits; the model reads 4 channels '
        r'of 16 bits'):
      self.model(rgb, name='photo.png')

  def test_predict_images_reads_tiffs_and_refuses_another_kind(self):
    folder = self.create_tempdir().full_path
    image = tf.io.decode_png(self.encoded[0], dtype=tf.uint16).numpy()
    tifffile.imwrite(os.path.join(folder, 'a.tif'), image)
    output = self.create_tempdir().full_path
    result = command_testing.run(predict_images, tflite=self.path,
                                 input=folder, output_dir=output)
    self.assertEqual(result.status, 0, result.stderr)
    written = tf.io.decode_png(tf.io.read_file(
        os.path.join(output, 'labels', 'a.png'))).numpy()[..., 0]
    self.assertAllEqual(written, self.model.predict(image))
    tifffile.imwrite(os.path.join(folder, 'b.tif'), image[..., :3])
    result = command_testing.run(predict_images, tflite=self.path,
                                 input=folder, output_dir=output)
    self.assertEqual(result.status, 2)
    self.assertRegex(result.stderr, r'b.tif has 3 channels of 16 bits; the '
                     r'model reads 4 channels of 16 bits .*\n$')

  def test_predict_images_gives_a_saved_model_the_tiff_as_a_png(self):
    folder = self.create_tempdir().full_path
    image = tf.io.decode_png(self.encoded[0], dtype=tf.uint16).numpy()
    tifffile.imwrite(os.path.join(folder, 'a.tif'), image)
    # The export's metadata gives its kind: an 8-bit RGB photo is refused,
    # after a.tif (files go in name order).
    with open(os.path.join(folder, 'b.png'), 'wb') as f:
      f.write(encode.encode_pixels_png(image[..., :3].astype(np.uint8)))
    output = self.create_tempdir().full_path
    result = command_testing.run(predict_images, model_dir=self.model_dir,
                                 input=folder, output_dir=output)
    written = tf.io.decode_png(tf.io.read_file(
        os.path.join(output, 'labels', 'a.png'))).numpy()[..., 0]
    self.assertAllEqual(written, self.expected[0])
    self.assertEqual(result.status, 2)
    self.assertRegex(result.stderr, r'b.png has 3 channels of 8 bits; the '
                     r'model reads 4 channels of 16 bits .*\n$')


if __name__ == '__main__':
  tf.test.main()
