"""Tests for memory: bytes moved by a graph's ops, the measured bandwidth."""

import math

import tensorflow as tf

from benchmarks import memory

B, D, K = 4, 8, 16  # Batch, input and output features.
F32, BF16 = 4, 2  # Bytes per element.


def _update_graph(dtype=tf.float32):
  """x [B, D] -> y = 2x -> z = relu(y w) -> w -= y^T z, w a [D, K] variable."""
  graph = tf.Graph()
  with graph.as_default():
    x = tf.compat.v1.placeholder(dtype, [B, D])
    w = tf.Variable(tf.zeros([D, K], dtype), use_resource=True)
    y = x * tf.constant(2.0, dtype)
    z = tf.nn.relu(tf.linalg.matmul(y, w))
    update = w.assign_sub(tf.linalg.matmul(y, z, transpose_a=True))
    unused = tf.linalg.matmul(tf.ones([64, 64]), tf.ones([64, 64]))
  return graph, update, unused


def _update_bytes(size):
  """The closed form of `_update_graph`'s step, `size` bytes per element."""
  mul = (B * D + 1 + B * D) * size  # Reads x and the scalar, writes y.
  matmul = (B * D + D * K + B * K) * size  # Reads y and w, writes y w.
  relu = 2 * B * K * size
  gradient = (B * D + B * K + D * K) * size  # Reads y and z, writes y^T z.
  assign_sub = (D * K + 2 * D * K) * size  # Reads y^T z; reads, writes w.
  return mul + matmul + relu + gradient + assign_sub


class GraphBytesTest(tf.test.TestCase):

  def test_counts_the_ops_the_targets_run(self):
    graph, update, unused = _update_graph()
    self.assertEqual(memory.graph_bytes_and_unknown(graph, [update]),
                     (_update_bytes(F32), 0))
    everything, _ = memory.graph_bytes_and_unknown(graph)
    self.assertGreaterEqual(everything - _update_bytes(F32), 3 * 64 * 64 * 4)
    del unused

  def test_bytes_follow_the_dtype(self):
    graph, update, _ = _update_graph(tf.bfloat16)
    self.assertEqual(memory.graph_bytes_and_unknown(graph, [update]),
                     (_update_bytes(BF16), 0))

  def test_counts_inside_called_functions(self):

    @tf.function
    def inner(x):
      return tf.nn.relu(x)

    @tf.function
    def outer(x):
      return inner(x) * 3.0

    graph = outer.get_concrete_function(tf.TensorSpec([5, 6])).graph
    # relu: 30 in, 30 out; mul: 30 and a scalar in, 30 out.
    self.assertEqual(memory.graph_bytes_and_unknown(graph),
                     ((60 + 61) * F32, 0))

  def test_unknown_shapes_are_reported(self):
    graph = tf.Graph()
    with graph.as_default():
      x = tf.compat.v1.placeholder(tf.float32, [None, 4])
      y = tf.nn.relu(x)
    self.assertEqual(memory.graph_bytes_and_unknown(graph, [y]), (0, 1))


class BandwidthTest(tf.test.TestCase):

  def test_bandwidth_is_positive_and_finite(self):
    gbps = memory.memory_bandwidth_gbps(megabytes=8, calls=2, repeats=2)
    self.assertGreater(gbps, 0.0)
    self.assertTrue(math.isfinite(gbps))


if __name__ == '__main__':
  tf.test.main()
