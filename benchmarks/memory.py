"""The memory-bound limit of a step: bytes its ops move, the machine's bandwidth."""

import time

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import handle_data_util

from benchmarks import measure

# Ops that move no tensor data: aliases of their input (a variable's value,
# a reshape), metadata (shapes), graph inputs and constants (their bytes
# count where an op reads them), and control.
_NO_DATA = frozenset((
    'Const', 'Placeholder', 'PlaceholderWithDefault', 'VarHandleOp',
    'ReadVariableOp', 'Identity', 'IdentityN', 'StopGradient', 'NoOp',
    'Reshape', 'ExpandDims', 'Squeeze', 'Shape', 'ShapeN', 'Size', 'Rank',
    'VarIsInitializedOp', 'PreventGradient'))
# Ops that only write the variable they are handed; others that take a
# variable handle (ResourceApplyMomentum, AssignAddVariableOp, ...) read and
# write it.
_WRITE_ONLY = frozenset(('AssignVariableOp',))
_NON_DATA_DTYPES = (tf.resource, tf.variant, tf.string)


def _tensor_bytes(shape, dtype):
  """Bytes of a tensor of static `shape`, or None when it is not static."""
  shape = tf.TensorShape(shape)
  if not shape.is_fully_defined():
    return None
  return int(np.prod(shape.as_list(), dtype=np.int64)) * dtype.size


def _variable_bytes(handle):
  """Bytes of the variable a resource handle tensor refers to, or None."""
  if handle.op.type == 'VarHandleOp':
    return _tensor_bytes(handle.op.get_attr('shape'),
                         tf.as_dtype(handle.op.get_attr('dtype')))
  data = handle_data_util.get_resource_handle_data(handle)
  if not data.is_set or len(data.shape_and_type) != 1:
    return None
  entry = data.shape_and_type[0]
  return _tensor_bytes(tf.TensorShape(entry.shape), tf.as_dtype(entry.dtype))


def _op_bytes(op):
  """Bytes one op reads and writes: (bytes, 1 if a shape is not static)."""
  if op.type in _NO_DATA:
    return 0, 0
  sizes = []
  for tensor in op.inputs:
    if tensor.dtype == tf.resource:
      variable = _variable_bytes(tensor)
      copies = 1 if op.type in _WRITE_ONLY else 2
      sizes.append(None if variable is None else copies * variable)
    elif tensor.dtype not in _NON_DATA_DTYPES:
      sizes.append(_tensor_bytes(tensor.shape, tensor.dtype))
  sizes += [_tensor_bytes(t.shape, t.dtype) for t in op.outputs
            if t.dtype not in _NON_DATA_DTYPES]
  if None in sizes:
    return sum(s for s in sizes if s is not None), 1
  return sum(sizes), 0


def graph_bytes_and_unknown(graph, targets=None):
  """Bytes the ops of a graph read and write, op by op, from static shapes.

  Each op counts its data inputs and outputs once (a variable handle counts
  the variable's bytes: read and written by updates, written by
  assignments); aliases, shapes and constants count 0 (see `_NO_DATA`), and
  function-call ops count the ops of the function they call. This is the
  memory traffic of the step run op by op as the graph states it, with no
  tensor kept in cache from one op to the next and none re-read inside an
  op: fusing ops, or a consumer finding its input still in cache, moves
  less, so it bounds a perfectly fused step's traffic from above, not from
  below. It is counted before grappler rewrites the graph.

  Args:
    graph: a `tf.Graph` or `FuncGraph`.
    targets: optional list of ops or tensors; only the ops they run count.

  Returns:
    (bytes int, unknown int): unknown counts ops with a tensor whose shape
    is not static (their other tensors still count).
  """
  total = unknown = 0
  for op in measure.fanin_ops(targets) if targets else graph.get_operations():
    if op.type in ('PartitionedCall', 'StatefulPartitionedCall'):
      function = graph._get_function(op.get_attr('f').name)  # pylint: disable=protected-access
      called = getattr(function, 'graph', None) if function else None
      op_bytes, op_unknown = (graph_bytes_and_unknown(called) if called
                              else (0, 1))
    else:
      op_bytes, op_unknown = _op_bytes(op)
    total += op_bytes
    unknown += op_unknown
  return total, unknown


def memory_bandwidth_gbps(megabytes=256, calls=5, repeats=3):
  """This machine's memory bandwidth as TensorFlow's element-wise ops see it.

  Times `calls` calls of one `x + s` on a float32 tensor of `megabytes` MiB
  (far larger than the caches), each reading x and writing a result of the
  same size, in TensorFlow's intra-op threads. The fastest of `repeats`
  timed loops counts. The figure is bytes read plus bytes written per
  second, as `graph_bytes_and_unknown` counts them (a cache line written
  may also be read first by the hardware, which is not counted).

  Args:
    megabytes: int, the size of x in MiB.
    calls: int, additions per timed loop.
    repeats: int, timed loops.

  Returns:
    float, GB/s (1e9 bytes per second).
  """
  x = tf.zeros([megabytes * 2**20 // 4], tf.float32)
  # The scalar is an argument, not a constant, and each call runs one op:
  # nothing for grappler to fold.
  add = tf.function(lambda x, s: x + s)
  add(x, tf.constant(1.0))  # Traces; the result's buffer is reused after.
  best = float('inf')
  for repeat in range(repeats):
    start = time.perf_counter()
    for call in range(calls):
      result = add(x, tf.constant(float(repeat * calls + call)))
    del result
    best = min(best, time.perf_counter() - start)
  return 2 * x.shape[0] * 4 * calls / best / 1e9
