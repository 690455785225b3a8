"""tflite_size: a tiny converted model's bytes against its Keras weights."""

import copy

import flatbuffers
import numpy as np
import tensorflow as tf
from tensorflow.lite.python import schema_py_generated as schema

from official_seg.export import tflite_size
from tests import testing_utils

def _unshared(content):
  """The model with a copy of each constant that a second operator reads."""
  model = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
  tensors = model.subgraphs[0].tensors
  seen = set()
  for operator in model.subgraphs[0].operators:
    for position, index in enumerate(operator.inputs):
      data = model.buffers[tensors[index].buffer].data if index >= 0 else None
      if index in seen and data is not None:
        buffer = schema.BufferT()
        buffer.data = np.array(data)
        model.buffers.append(buffer)
        tensor = copy.deepcopy(tensors[index])
        tensor.buffer = len(model.buffers) - 1
        tensors.append(tensor)
        operator.inputs[position] = len(tensors) - 1
      seen.add(index)
  builder = flatbuffers.Builder(0)
  builder.Finish(model.Pack(builder), file_identifier=b'TFL3')
  return bytes(builder.Output())


def _interpreter_tensors(content):
  interpreter = tf.lite.Interpreter(model_content=content)
  return interpreter.get_tensor_details()


class TfliteSizeTest(tf.test.TestCase):
  """Expected bytes from the Keras weights and the TFLite interpreter."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model, cls.layers = testing_utils.tiny_conv_model()
    cls.float32 = testing_utils.convert_to_tflite(cls.model, int8=False)
    cls.int8 = testing_utils.convert_to_tflite(cls.model, int8=True)

  def _check_sums(self, result, content):
    self.assertEqual(result.total, len(content))
    self.assertEqual(sum(result.parts.values()), len(content))
    self.assertGreater(result.parts['graph'], 0)
    names = sum(len(d['name'].encode('utf-8'))
                for d in _interpreter_tensors(content))
    self.assertEqual(result.parts['tensor_names'], names)

  def test_float32_holds_every_weight_in_float32(self):
    result = tflite_size.breakdown(self.float32)
    self._check_sums(result, self.float32)
    values = sum(int(np.prod(w.shape)) for w in self.model.weights)
    shared = int(self.layers[1].bias.shape[0])
    # The equal biases are one buffer, counted once.
    self.assertEqual(result.parts['weights_FLOAT32'], 4 * (values - shared))
    self.assertEqual(result.duplicate_buffer_bytes, 0)
    for part in ('bias_int32', 'quantization_scales',
                 'quantization_zero_points'):
      self.assertEqual(result.parts[part], 0, part)

  def test_duplicate_buffers_are_counted(self):
    content = _unshared(self.float32)
    result = tflite_size.breakdown(content)
    self._check_sums(result, content)
    values = sum(int(np.prod(w.shape)) for w in self.model.weights)
    self.assertEqual(result.parts['weights_FLOAT32'], 4 * values)
    self.assertEqual(result.duplicate_buffer_bytes,
                     4 * int(self.layers[1].bias.shape[0]))

  def test_int8_weights_biases_and_per_channel_parameters(self):
    result = tflite_size.breakdown(self.int8)
    self._check_sums(result, self.int8)
    kernels = sum(int(np.prod(layer.weights[0].shape))
                  for layer in self.layers)
    channels = sum(int(layer.bias.shape[0]) for layer in self.layers)
    self.assertEqual(result.parts.get('weights_FLOAT32', 0), 0)
    self.assertEqual(result.parts['weights_INT8'], kernels)
    self.assertEqual(result.parts['bias_int32'], 4 * channels)
    # One scale per output channel for each kernel and each bias.
    self.assertEqual(result.per_channel_scales, 2 * channels)
    scales = [len(d['quantization_parameters']['scales'])
              for d in _interpreter_tensors(self.int8)]
    self.assertEqual(result.per_tensor_scales, scales.count(1))
    self.assertEqual(result.parts['quantization_scales'], 4 * sum(scales))
    self.assertEqual(result.parts['quantization_zero_points'],
                     8 * sum(scales))
    self.assertEqual(result.duplicate_buffer_bytes, 0)

  def test_convolutions_fan_in_and_channels(self):
    # Keras kernels: Conv2D [kh, kw, in, out], DepthwiseConv2D
    # [kh, kw, in, multiplier].
    expected = []
    for layer in self.layers:
      height, width, inputs, outputs = layer.weights[0].shape
      if isinstance(layer, tf.keras.layers.DepthwiseConv2D):
        expected.append(('DEPTHWISE_CONV_2D', f'{height}x{width}',
                         height * width, inputs * outputs))
      else:
        expected.append(('CONV_2D', f'{height}x{width}',
                         height * width * inputs, outputs))
    self.assertEqual(tflite_size.convolutions(self.float32), expected)
    self.assertEqual(tflite_size.convolutions(self.int8), expected)
    self.assertEqual(
        tflite_size.format_convolutions(expected),
        'CONV_2D 3x3: 1 layers, 16 output channels, fan-in 27-27\n'
        'DEPTHWISE_CONV_2D 3x3: 1 layers, 16 output channels, fan-in 9-9\n'
        'CONV_2D 1x1: 1 layers, 4 output channels, fan-in 16-16')


if __name__ == '__main__':
  tf.test.main()
