"""fit_temperature on a stand-in export of known probabilities and a tiny split."""

import io
import json
import os

from absl.testing import parameterized
import gin
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.commands import fit_temperature
from official_seg.export import predictor
from official_seg.export import saved_model
from tests import testing_utils
from tests.commands import command_testing
from tests.commands import predict_images_test
from tests.commands import pseudo_label_quality_test
from tests.evaluation import calibration_test


class FitTemperatureToolTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    root = self.create_tempdir().full_path
    self.data_dir = os.path.join(root, 'data')
    testing_utils.write_tiny_dataset(self.data_dir, num_train=1, num_val=3,
                                     num_shards=1)
    self.model_dir = os.path.join(root, 'model')
    self.export_dir = os.path.join(self.model_dir, 'export', '1700000000')
    predict_images_test.write_stand_in_with_maps(self.export_dir)
    # The stand-in serves each image at its decoded size.
    path = os.path.join(self.export_dir, 'assets.extra',
                        saved_model.METADATA_FILE)
    with open(path) as f:
      metadata = json.load(f)
    with open(path, 'w') as f:
      json.dump(dict(metadata, resize_range=[None, None, None]), f)

  def _run(self, **flags):
    flags = dict(dict(
        model_dir=self.model_dir, gin_file=['experiments/quickstart.gin'],
        gin_param=testing_utils.tiny_bindings(self.data_dir)), **flags)
    return command_testing.run(fit_temperature, **flags)

  def test_temperature_nll_and_ece_equal_numpy_and_reach_predict(self):
    logits, labels = [], []
    for encoded, label in pseudo_label_quality_test._records(
        self.data_dir, 'val', 3):
      image = np.asarray(Image.open(io.BytesIO(encoded)), np.float64)
      keep = label != 255
      logits.append(np.log(
          predict_images_test.numpy_probabilities(image)[keep]))
      labels.append(label[keep])
    logits, labels = np.concatenate(logits), np.concatenate(labels)
    expected = calibration_test.numpy_fitted_temperature(logits, labels)
    self.assertNotAllClose(expected, 1.0, rtol=0.05)
    output = os.path.join(self.create_tempdir().full_path, 'fit.json')
    result = self._run(output=output)
    self.assertEqual(result.status, 0, result.stderr)
    with open(output) as f:
      found = json.load(f)
    with open(predictor.temperature_path(self.export_dir)) as f:
      self.assertEqual(json.load(f), found)
    self.assertAllClose(found['temperature'], expected, rtol=1e-5)
    self.assertEqual(found['num_pixels'], len(labels))
    self.assertEqual((found['num_images'], found['split']), (3, 'val'))
    for when, t in (('before', 1.0), ('after', expected)):
      self.assertAllClose(found[f'nll_{when}'],
                          calibration_test.numpy_nll(logits, labels, t),
                          rtol=1e-5)
      self.assertAllClose(
          found[f'expected_calibration_error_{when}'],
          calibration_test.numpy_ece(
              calibration_test.numpy_softmax(logits / t), labels, 255),
          rtol=1e-4)
    self.assertLess(found['nll_after'], found['nll_before'])
    self.assertRegex(result.stdout, rf'temperature {expected:.4f}')
    self.assertEqual(predictor.Predictor(self.export_dir).temperature,
                     found['temperature'])

  @parameterized.named_parameters(
      ('saved_model_without_one', dict(model_dir=None, saved_model='{data}'),
       '--saved_model={data} holds no SavedModel'),
      ('missing_split', dict(split='nope'), 'No TFRecord shards match'))
  def test_a_mistake_is_one_line(self, flags, message):
    flags = {name: value and value.format(data=self.data_dir)
             for name, value in flags.items()}
    result = self._run(**flags)
    self.assertEqual(result.status, 2, result.stderr)
    lines = result.stderr.splitlines()
    self.assertLen(lines, 2, result.stderr)
    self.assertStartsWith(lines[1], message.format(data=self.data_dir))
    self.assertFalse(os.path.exists(
        predictor.temperature_path(self.export_dir)))


if __name__ == '__main__':
  tf.test.main()
