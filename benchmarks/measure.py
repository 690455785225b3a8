"""Machine measurements shared by the benchmarks: FLOPs, matmul peak, memory."""

import json
import resource
import sys
import time

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import ops

RESULT_PREFIX = 'BENCHMARK_RESULT '
_CALL_OPS = ('PartitionedCall', 'StatefulPartitionedCall')
# Backward convolutions, each counted at the forward convolution's cost.
# TensorFlow registers no FLOP statistics for the depthwise ones, and its
# statistics of the dense ones count the forward input's size as the output's:
# right for 'SAME' stride-1 convolutions, but many times too much for a
# 'VALID' convolution on space-to-batch blocks (how dilated convolutions run
# off TPUs), whose output is much smaller than its input.
_BACKWARD_CONVS = (
    'DepthwiseConv2dNativeBackpropInput', 'DepthwiseConv2dNativeBackpropFilter',
    'Conv2DBackpropInput', 'Conv2DBackpropFilter')


def peak_rss_mb():
  """Peak resident memory of this process so far, in MiB (Linux: KiB units)."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _backward_conv_flops(op):
  """The forward convolution's FLOPs, from the output gradient (input 2).

  Returns:
    int: 2 * kh * kw per element of the output gradient, times the input
    channels for a dense convolution (a depthwise one reads one input
    channel per output element); None when a shape is not static.
  """
  grad_shape = op.inputs[2].shape
  filter_shape = (op.inputs[1].shape if op.type.endswith('Input')
                  else op.outputs[0].shape)
  if not (grad_shape.is_fully_defined() and filter_shape.is_fully_defined()):
    return None
  reads = 1 if op.type.startswith('Depthwise') else filter_shape[2]
  return (2 * int(np.prod(grad_shape)) * filter_shape[0] * filter_shape[1]
          * reads)


def _called_graph(graph, op):
  """The FuncGraph a function-call op runs, or None."""
  name = op.get_attr('f').name
  function = graph._get_function(name)  # pylint: disable=protected-access
  return getattr(function, 'graph', None) if function else None


def _op_flops(graph, op):
  """FLOPs of one op and what it could not count: (flops, unknown ops)."""
  if op.type in _CALL_OPS:
    called = _called_graph(graph, op)
    return graph_flops_and_unknown(called) if called else (0, 0)
  if op.type in _BACKWARD_CONVS:
    flops = _backward_conv_flops(op)
    return (flops, 0) if flops is not None else (0, 1)
  try:
    stats = ops.get_stats_for_node_def(graph, op.node_def, 'flops')
  except ValueError:  # A registered op whose shapes are not static.
    return 0, 1
  return (stats.value or 0), 0


def fanin_ops(targets):
  """The ops that running `targets` (ops or tensors) runs: their fan-in."""
  stack = [getattr(t, 'op', t) for t in targets]
  seen = {}
  while stack:
    op = stack.pop()
    if op.name in seen:
      continue
    seen[op.name] = op
    stack.extend(t.op for t in op.inputs)
    stack.extend(op.control_inputs)
  return list(seen.values())


def graph_flops_and_unknown(graph, targets=None):
  """FLOPs of the ops of a graph, and the count of ops it could not count.

  Counted with TensorFlow's registered FLOP statistics (as
  `tf.compat.v1.profiler` counts them), except backward convolutions,
  each counted at its forward convolution's cost, and recursing into called functions (a `tf.function`'s
  nested calls). Element-wise ops without statistics (batch norm, ReLU,
  resizes) count 0, so the figure is a lower bound dominated by
  convolutions.

  Args:
    graph: a `tf.Graph` or `FuncGraph` with static shapes.
    targets: optional list of ops or tensors; only the ops they run count
      (a Keras functional model built in graph mode leaves ops behind that
      never run). None counts every op.

  Returns:
    (flops int, unknown int): unknown counts ops with statistics whose
    shapes were not static.
  """
  flops = unknown = 0
  ops_run = fanin_ops(targets) if targets else graph.get_operations()
  for op in ops_run:
    op_flops, op_unknown = _op_flops(graph, op)
    flops += op_flops
    unknown += op_unknown
  return flops, unknown


def matmul_peak_gflops(dtype=tf.float32, size=2048, iterations=10,
                       repeats=3):
  """This machine's dense matmul rate: the best of `repeats` timed loops.

  Args:
    dtype: tf.float32 or tf.bfloat16.
    size: int, square matrix side.
    iterations: int, matmuls per timed loop.
    repeats: int, timed loops; the fastest counts.

  Returns:
    float, GFLOP/s (2 * size**3 per matmul).
  """
  a = tf.cast(tf.random.normal([size, size]), dtype)
  b = tf.cast(tf.random.normal([size, size]), dtype)

  @tf.function
  def loop():
    total = tf.zeros([], tf.float32)
    for i in range(iterations):
      # Distinct inputs: grappler merges identical matmuls into one.
      product = tf.linalg.matmul(a + tf.cast(i, dtype), b)
      total += tf.cast(product[0, 0], tf.float32)
    return total

  loop().numpy()  # Traces and warms up oneDNN's kernels.
  best = float('inf')
  for _ in range(repeats):
    start = time.perf_counter()
    loop().numpy()
    best = min(best, time.perf_counter() - start)
  return 2.0 * size**3 * iterations / best / 1e9


def emit(result, stream=None):
  """Prints one `BENCHMARK_RESULT <json>` line: a benchmark runner's output."""
  stream = stream or sys.stdout
  # Counts summed from NumPy shapes can be NumPy scalars.
  line = json.dumps(result, sort_keys=True,
                    default=lambda value: value.item())
  stream.write(RESULT_PREFIX + line + '\n')
  stream.flush()


def parse_result(output):
  """The last result line printed by `emit` in a runner's output; dict.

  Raises:
    ValueError: no result line (the runner failed before finishing).
  """
  for line in reversed(output.splitlines()):
    if line.startswith(RESULT_PREFIX):
      return json.loads(line[len(RESULT_PREFIX):])
  raise ValueError('The benchmark runner printed no BENCHMARK_RESULT line.')
