"""The TFLite fold ensemble: the interpreter's probabilities are the mean of the members' own .tflite probabilities.

Members here are small frozen graphs of the serving layout (uint8 image and
size in, semantic and probabilities out); the folds of a trained
configuration are tested in tests/commands/cross_validate_test.py.
"""

import json
import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import dataset_info
from official_seg.export import tflite
from official_seg.export import tflite_ensemble
from official_seg.export import tflite_runner

_SIZE = (9, 11)
_CLASSES = 4
_DATASET = dataset_info.DatasetInfo(num_classes=_CLASSES)


def _member(seed, size=_SIZE, channels=3):
  """A frozen serving graph: a random 3x3 convolution of the normalized
  image (zero beyond 'size'), its softmax and arg max."""
  rng = np.random.default_rng(seed)
  with tf.Graph().as_default() as graph:
    image = tf.compat.v1.placeholder(tf.uint8, [1, *size, channels],
                                     name=tflite_runner.IMAGE_INPUT)
    inside_size = tf.compat.v1.placeholder(tf.int32, [2],
                                           name=tflite_runner.SIZE_INPUT)
    inside = tf.logical_and(
        tf.range(size[0])[:, None] < inside_size[0],
        tf.range(size[1])[None, :] < inside_size[1])
    pixels = ((tf.cast(image, tf.float32) - 127.5) / 64.0 *
              tf.cast(inside, tf.float32)[None, :, :, None])
    kernel = rng.normal(size=(3, 3, channels, _CLASSES)).astype(np.float32)
    probabilities = tf.nn.softmax(
        tf.nn.conv2d(pixels, tf.constant(kernel), 1, 'SAME'))
    tf.identity(tf.argmax(probabilities, -1, output_type=tf.int32),
                name=tflite_runner.SEMANTIC_OUTPUT)
    tf.identity(probabilities, name=tflite_runner.PROBABILITIES_OUTPUT)
  return graph.as_graph_def()


def _member_tflite(member):
  """The .tflite of one member alone, converted as tflite_export does."""
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    tf.compat.v1.import_graph_def(member, name='')
    graph = session.graph
    tensors = [graph.get_tensor_by_name(f'{name}:0') for name in (
        tflite_runner.IMAGE_INPUT, tflite_runner.SIZE_INPUT,
        tflite_runner.SEMANTIC_OUTPUT, tflite_runner.PROBABILITIES_OUTPUT)]
    converter = tf.compat.v1.lite.TFLiteConverter.from_session(
        session, tensors[:2], tensors[2:])
    return converter.convert()


class TfliteEnsembleTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.folder = self.create_tempdir().full_path
    self.members = [_member(seed) for seed in range(3)]
    rng = np.random.default_rng(7)
    # Images of the input size and smaller, placed in its corner.
    self.inputs = [(rng.integers(0, 256, (1, *_SIZE, 3)).astype(np.uint8),
                    np.array(size, np.int32))
                   for size in (_SIZE, (5, 8), (9, 3))]

  def _probabilities(self, path):
    model = tflite_runner.TfliteModel(path, num_threads=1)
    return np.stack([model.run_probabilities(image, size)
                     for image, size in self.inputs])

  def _write(self, name, content):
    path = os.path.join(self.folder, name)
    with open(path, 'wb') as f:
      f.write(content)
    return path

  def test_float32_is_the_mean_of_the_members_own_tflite(self):
    written = tflite_ensemble.export_ensemble(
        self.members, self.folder, ['float32'],
        _DATASET, {'resize_range': [None] * 3})
    own = [self._probabilities(self._write(f'm{i}.tflite',
                                           _member_tflite(member)))
           for i, member in enumerate(self.members)]
    # Members differ: their mean is none of them.
    self.assertGreater(np.abs(own[0] - own[1]).max(), 0.1)
    mean = np.mean(np.stack(own).astype(np.float64), axis=0)
    served = self._probabilities(written['float32'])
    # float32 sums of three members' float32 outputs.
    self.assertAllClose(served, mean, rtol=1e-5, atol=1e-6)
    model = tflite_runner.TfliteModel(written['float32'], num_threads=1)
    for (image, size), probabilities in zip(self.inputs, mean):
      self.assertAllEqual(model.run(image, size)[0],
                          np.argmax(probabilities, axis=-1))
    with open(os.path.join(self.folder, tflite_runner.METADATA_FILE)) as f:
      metadata = json.load(f)
    self.assertIsNone(metadata['global_step'])
    self.assertEqual(metadata['image_channels'], 3)

  def test_float16_stays_near_the_float32_mean(self):
    written = tflite_ensemble.export_ensemble(
        self.members, self.folder, ['float32', 'float16'],
        _DATASET, {})
    self.assertAllClose(self._probabilities(written['float16']),
                        self._probabilities(written['float32']), atol=2e-2)

  @parameterized.parameters('int8', 'int8_per_tensor', 'qat_int8')
  def test_calibrated_kinds_are_refused(self, kind):
    with self.assertRaisesRegex(tflite.KindError,
                                f'TFLite ensemble kinds {kind}: an ensemble '
                                'converts only float32, float16, '
                                'dynamic_range'):
      tflite_ensemble.check_kinds(['float32', kind])

  def test_the_sigmoid_kind_is_refused(self):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'serves one class per pixel'):
      tflite_ensemble.check_output_kind(True)
    tflite_ensemble.check_output_kind(False)

  def test_members_of_other_inputs_are_refused(self):
    other = _member(5, size=(9, 13))
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'Model 1 of the ensemble has inputs'):
      tflite_ensemble.convert([self.members[0], other], 'float32')
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'at least two models; got 1'):
      tflite_ensemble.convert(self.members[:1], 'float32')


if __name__ == '__main__':
  tf.test.main()
