"""ASPP without padding-only taps: the Model Garden's values, names and gradients."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf
from official.vision.modeling import decoders

from official_seg.modeling import aspp
from official_seg.modeling import model as model_lib

# The same sums without zero terms: float32 rounding of a different order.
_RTOL, _ATOL = 1e-5, 1e-5


def _convs(rate, kernel_size=3):
  """A Conv2D and a PaddingAwareConv2D sharing one random kernel."""
  full = tf.keras.layers.Conv2D(4, kernel_size, padding='same',
                                dilation_rate=rate, use_bias=False)
  aware = aspp.PaddingAwareConv2D(4, kernel_size, padding='same',
                                  dilation_rate=rate, use_bias=False)
  full.build([None, None, None, 3])
  aware.build([None, None, None, 3])
  aware.set_weights(full.get_weights())
  return full, aware


def _output_and_kernel_gradient(conv, images):
  with tf.GradientTape() as tape:
    outputs = conv(images)
    loss = tf.reduce_sum(outputs * tf.sin(outputs))  # Not linear in outputs.
  return outputs.numpy(), tape.gradient(loss, conv.kernel).numpy()


def _op_types(function, *args):
  graph = tf.function(function).get_concrete_function(*args).graph
  return [op.type for op in graph.get_operations()]


class KeptTapsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(
      (3, 6, 6, (1, 2)),    # Rate equal to the size: centre only.
      (3, 6, 7, (0, 3)),    # One row in reach.
      (3, 18, 13, (1, 2)),
      (5, 2, 4, (1, 4)),    # Offsets -4..4 by 2: only |2| < 4 stays.
      (1, 4, 2, (0, 1)),
      (4, 9, 3, (0, 4)))    # Even kernels pad asymmetrically: all kept.
  def test_taps_within_reach(self, size, rate, length, expected):
    self.assertEqual(aspp.kept_taps(size, rate, length), expected)


class PaddingAwareConv2DTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      # (height, width), rate, the kernel shape computed, taps dropped.
      ('past_height_and_width', (5, 6), 6, [1, 1], True),
      ('past_height_only', (4, 9), 6, [1, 3], True),
      ('past_width_only', (9, 3), 4, [3, 1], True),
      ('within_both', (7, 7), 3, [3, 3], False))
  def test_equals_the_full_dilated_convolution(self, size, rate, computed,
                                               dropped):
    full, aware = _convs(rate)
    images = tf.random.stateless_normal([2, *size, 3], [3, 4])
    expected, expected_grad = _output_and_kernel_gradient(full, images)
    outputs, grad = _output_and_kernel_gradient(aware, images)
    self.assertAllClose(outputs, expected, rtol=_RTOL, atol=_ATOL)
    self.assertAllClose(grad, expected_grad, rtol=_RTOL, atol=_ATOL)
    # The taps left out have no gradient in the full convolution either.
    rows, cols = [aspp.kept_taps(3, rate, n) for n in size]
    mask = np.ones([3, 3], bool)
    mask[rows[0]:rows[1], cols[0]:cols[1]] = False
    self.assertEqual(mask.any(), dropped)
    self.assertAllEqual(expected_grad[mask], np.zeros_like(grad[mask]))
    self.assertAllEqual(grad[mask], np.zeros_like(grad[mask]))
    kernels = [op.inputs[1].shape.as_list()[:2] for op in tf.function(
        aware).get_concrete_function(images).graph.get_operations()
               if op.type == 'Conv2D']
    self.assertEqual(kernels, [computed])

  def test_unknown_spatial_shape_keeps_the_full_op(self):
    full, aware = _convs(6)
    spec = tf.TensorSpec([None, None, None, 3])
    self.assertEqual(_op_types(aware, spec), _op_types(full, spec))
    self.assertIn('SpaceToBatchND', _op_types(aware, spec))

  def test_mixed_bfloat16(self):
    previous = tf.keras.mixed_precision.global_policy()
    tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')
    try:
      full, aware = _convs(6)
      images = tf.random.stateless_normal([1, 4, 9, 3], [5, 6])
      outputs, expected = aware(images), full(images)
    finally:
      tf.keras.mixed_precision.set_global_policy(previous)
    self.assertEqual(outputs.dtype, tf.bfloat16)
    self.assertEqual(aware.kernel.dtype, tf.float32)
    # The same bfloat16 products, summed in a different order.
    self.assertAllClose(tf.cast(outputs, tf.float32),
                        tf.cast(expected, tf.float32), rtol=2e-2, atol=2e-2)


def _aspp_graph(cls, size, **kwargs):
  """Builds `cls` on a [1, size, size, 8] map in a graph of its own.

  Returns:
    (the layer, [(variable name, shape)], its graph's op types).
  """
  graph = tf.Graph()
  with graph.as_default():
    layer = cls(level=4, dilation_rates=[3, 6, 9], num_filters=4, **kwargs)
    layer({'4': tf.zeros([1, size, size, 8])})
    variables = [(v.name, v.shape.as_list()) for v in layer.variables]
  return layer, variables, [op.type for op in graph.get_operations()]


class ASPPTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_variables_are_the_model_gardens(self):
    _, expected, _ = _aspp_graph(decoders.ASPP, 5)
    _, variables, _ = _aspp_graph(aspp.ASPP, 5)
    self.assertEqual(variables, expected)
    self.assertIn(('aspp/spatial_pyramid_pooling/sequential_3/conv2d_3/'
                   'kernel:0', [3, 3, 8, 4]), variables)

  def test_switch_off_builds_the_model_gardens_ops(self):
    gin.parse_config('decoders.ASPP.drop_padding_taps = False')
    _, _, expected = _aspp_graph(decoders.ASPP, 5)
    _, _, ops = _aspp_graph(model_lib.ASPP, 5)
    self.assertEqual(ops, expected)
    self.assertEqual(ops.count('SpaceToBatchND'), 3)  # One per rate.
    # On: rate 3 reaches the 5x5 map; rates 6 and 9 are 1x1 convolutions.
    gin.clear_config()
    _, _, ops = _aspp_graph(aspp.ASPP, 5)
    self.assertEqual(ops.count('SpaceToBatchND'), 1)

  def test_outputs_equal_the_model_gardens(self):
    images = {'4': tf.random.stateless_normal([2, 5, 7, 8], [7, 8])}
    reference = decoders.ASPP(level=4, dilation_rates=[2, 6], num_filters=4)
    layer = aspp.ASPP(level=4, dilation_rates=[2, 6], num_filters=4)
    expected = reference(images, training=False)['4']
    layer(images, training=False)
    layer.set_weights(reference.get_weights())
    self.assertAllClose(layer(images, training=False)['4'], expected,
                        rtol=_RTOL, atol=_ATOL)
    self.assertEqual(aspp.ASPP.from_config(layer.get_config()).get_config(),
                     layer.get_config())


if __name__ == '__main__':
  tf.test.main()
