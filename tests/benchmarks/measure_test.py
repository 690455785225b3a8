"""Tests for measure: FLOP counts, the matmul peak and the result line."""

import io

import tensorflow as tf

from benchmarks import measure


def _conv_graph():
  """A graph with a 3x3 convolution, its gradients and an unused matmul."""
  graph = tf.Graph()
  with graph.as_default():
    images = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3])
    kernel = tf.compat.v1.placeholder(tf.float32, [3, 3, 3, 4])
    depthwise = tf.compat.v1.placeholder(tf.float32, [3, 3, 4, 1])
    conv = tf.nn.conv2d(images, kernel, 1, 'SAME')
    out = tf.nn.depthwise_conv2d(conv, depthwise, [1, 1, 1, 1], 'SAME')
    grads = tf.gradients(tf.reduce_sum(out), [kernel, depthwise])
    unused = tf.linalg.matmul(tf.ones([10, 10]), tf.ones([10, 10]))
  return graph, grads, unused


# 2 * outputs * kernel area * input channels, per convolution.
CONV = 2 * (2 * 8 * 8 * 4) * 9 * 3
DEPTHWISE = 2 * (2 * 8 * 8 * 4) * 9


class MeasureTest(tf.test.TestCase):

  def test_counts_the_ops_the_targets_run(self):
    graph, grads, unused = _conv_graph()
    # The forward conv, its filter gradient, and the depthwise's input and
    # filter gradients; the forward depthwise output is never needed (the
    # gradient of a sum is ones), nor the conv's input gradient.
    expected = 2 * CONV + 2 * DEPTHWISE
    self.assertEqual(measure.graph_flops_and_unknown(graph, grads),
                     (expected, 0))
    everything, _ = measure.graph_flops_and_unknown(graph)
    self.assertGreaterEqual(everything - expected, 2 * 10 * 10 * 10)

  def test_backward_convs_of_a_dilated_conv_cost_the_forward_conv(self):
    graph = tf.Graph()
    with graph.as_default():
      images = tf.compat.v1.placeholder(tf.float32, [1, 5, 5, 2])
      kernel = tf.compat.v1.placeholder(tf.float32, [3, 3, 2, 3])
      # Off TPUs, rate 6 on 5x5 runs as a 'VALID' convolution on
      # space-to-batch blocks: 36 blocks of 3x3 inputs and 1x1 outputs.
      out = tf.nn.atrous_conv2d(images, kernel, 6, 'SAME')
      grads = tf.gradients(tf.reduce_sum(out * out), [images, kernel])
    conv_types = sorted(op.type for op in graph.get_operations()
                        if op.type.startswith('Conv2D'))
    self.assertEqual(conv_types, ['Conv2D', 'Conv2DBackpropFilter',
                                  'Conv2DBackpropInput'])
    # Each of the three: 2 * 36 outputs * 3 channels * 9 taps * 2 inputs
    # (TensorFlow's statistics count the backward two at 9 times that);
    # out * out, its gradient's product and their sum: 75 each.
    conv = 2 * (36 * 1 * 1 * 3) * 9 * 2
    self.assertEqual(measure.graph_flops_and_unknown(graph, grads),
                     (3 * conv + 3 * 75, 0))

  def test_counts_inside_called_functions(self):

    @tf.function
    def inner(x):
      return tf.linalg.matmul(x, x)

    @tf.function
    def outer(x):
      return inner(x) + 1.0

    graph = outer.get_concrete_function(tf.TensorSpec([4, 4])).graph
    self.assertEqual(measure.graph_flops_and_unknown(graph),
                     (2 * 4 * 4 * 4 + 16, 0))

  def test_unknown_shapes_are_reported(self):
    graph = tf.Graph()
    with graph.as_default():
      x = tf.compat.v1.placeholder(tf.float32, [None, 4])
      product = tf.linalg.matmul(x, tf.ones([4, 4]))
    self.assertEqual(measure.graph_flops_and_unknown(graph, [product]), (0, 1))

  def test_matmul_peak_is_a_rate(self):
    self.assertGreater(measure.matmul_peak_gflops(size=64, iterations=2,
                                                  repeats=1), 0)

  def test_peak_rss_is_positive(self):
    self.assertGreater(measure.peak_rss_mb(), 0)

  def test_emit_and_parse_round_trip(self):
    stream = io.StringIO()
    measure.emit({'a': 1.5}, stream)
    self.assertEqual(measure.parse_result('log\n' + stream.getvalue()),
                     {'a': 1.5})
    with self.assertRaisesRegex(ValueError, 'no BENCHMARK_RESULT'):
      measure.parse_result('Traceback ...')


if __name__ == '__main__':
  tf.test.main()
