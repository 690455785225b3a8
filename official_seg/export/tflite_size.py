"""Where a .tflite's bytes go: weights by dtype, int32 biases, quantization parameters, the graph."""

import collections
import dataclasses
import hashlib

from tensorflow.lite.python import schema_py_generated as schema

# Bytes per value as the TFLite schema stores them: QuantizationParameters'
# scale, min and max are [float], zero_point is [long].
SCALE_BYTES = 4
ZERO_POINT_BYTES = 8
MIN_MAX_BYTES = 4
# The parts of `Breakdown.parts`, in the order a report prints them.
PARTS = ('bias_int32', 'quantization_scales', 'quantization_zero_points',
         'quantization_min_max', 'tensor_names', 'metadata', 'graph')
_TYPE_NAMES = {value: name for name, value in vars(schema.TensorType).items()
               if not name.startswith('_')}
_OP_NAMES = {value: name
             for name, value in vars(schema.BuiltinOperator).items()
             if not name.startswith('_')}


@dataclasses.dataclass(frozen=True)
class Breakdown:
  """A .tflite's bytes by what they hold.

  Attributes:
    total: int, the file's size.
    parts: dict of part to bytes, summing to `total`:
      'weights_<DTYPE>' (e.g. weights_FLOAT32, weights_INT8, weights_INT32):
      constant buffers of tensors of that dtype, other than the int32
      biases; 'bias_int32': int32 constants that carry quantization scales
      (the biases of quantized convolutions); 'quantization_scales',
      'quantization_zero_points', 'quantization_min_max': the schema's
      float32 scales, int64 zero points and float32 ranges of every tensor;
      'tensor_names': the tensors' name strings; 'metadata': buffers the
      model's metadata entries point at; 'graph': the rest (operators,
      tensor tables and shapes, signatures, flatbuffer offsets and
      alignment).
    per_channel_scales: int, scales of tensors with more than one (per
      channel).
    per_tensor_scales: int, scales of tensors with exactly one.
    duplicate_buffer_bytes: int, bytes of constant buffers whose content
      equals that of an earlier buffer of the same length.
  """

  total: int
  parts: dict
  per_channel_scales: int
  per_tensor_scales: int
  duplicate_buffer_bytes: int


def _buffer_bytes(buffer):
  if buffer.data is not None:
    return len(buffer.data)
  return int(buffer.size or 0)  # Stored outside the flatbuffer (> 2 GB).


def _duplicate_bytes(buffers):
  seen = set()
  duplicates = 0
  for buffer in buffers:
    if buffer.data is None or not len(buffer.data):
      continue
    digest = hashlib.sha256(bytes(buffer.data)).digest()
    if digest in seen:
      duplicates += len(buffer.data)
    seen.add(digest)
  return duplicates


def _constants(model, parts):
  """Adds each constant buffer once, under its first tensor's part."""
  counted = {metadata.buffer for metadata in model.metadata or ()}
  for subgraph in model.subgraphs:
    for tensor in subgraph.tensors:
      size = _buffer_bytes(model.buffers[tensor.buffer])
      if not size or tensor.buffer in counted:
        continue
      counted.add(tensor.buffer)
      dtype = _TYPE_NAMES.get(tensor.type, str(tensor.type))
      quantized = (tensor.quantization is not None
                   and tensor.quantization.scale is not None
                   and len(tensor.quantization.scale))
      part = ('bias_int32' if dtype == 'INT32' and quantized
              else f'weights_{dtype}')
      parts[part] += size


def _quantization(model, parts):
  """Adds the quantization parameters; returns (per channel, per tensor)."""
  per_channel = per_tensor = 0
  for subgraph in model.subgraphs:
    for tensor in subgraph.tensors:
      params = tensor.quantization
      if params is None:
        continue
      scales = len(params.scale) if params.scale is not None else 0
      parts['quantization_scales'] += SCALE_BYTES * scales
      if params.zeroPoint is not None:
        parts['quantization_zero_points'] += (ZERO_POINT_BYTES
                                              * len(params.zeroPoint))
      for bound in (params.min, params.max):
        if bound is not None:
          parts['quantization_min_max'] += MIN_MAX_BYTES * len(bound)
      if scales > 1:
        per_channel += scales
      else:
        per_tensor += scales
  return per_channel, per_tensor


def breakdown(content):
  """Breaks a .tflite's bytes down by what they hold (see `Breakdown`).

  Args:
    content: bytes of a .tflite flatbuffer.

  Returns:
    A `Breakdown`.
  """
  model = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
  parts = collections.Counter({part: 0 for part in PARTS})
  _constants(model, parts)
  per_channel, per_tensor = _quantization(model, parts)
  parts['tensor_names'] = sum(len(tensor.name or b'')
                              for subgraph in model.subgraphs
                              for tensor in subgraph.tensors)
  parts['metadata'] = sum(_buffer_bytes(model.buffers[metadata.buffer])
                          for metadata in model.metadata or ())
  parts['graph'] = len(content) - sum(parts.values())
  return Breakdown(total=len(content), parts=dict(parts),
                   per_channel_scales=per_channel,
                   per_tensor_scales=per_tensor,
                   duplicate_buffer_bytes=_duplicate_bytes(model.buffers))


def _fan_in_and_channels(op, shape):
  """Kernel values per output channel, and output channels, of a kernel."""
  if op == 'DEPTHWISE_CONV_2D':  # [1, kh, kw, out].
    return shape[1] * shape[2], shape[3]
  if op == 'CONV_2D':  # [out, kh, kw, in].
    return shape[1] * shape[2] * shape[3], shape[0]
  return shape[1], shape[0]  # FULLY_CONNECTED: [out, in].


def convolutions(content):
  """The kernels of a .tflite's convolutions and fully connected layers.

  Each output channel of these stores its kernel and bias in float32, or,
  quantized per channel, an int8 kernel, an int32 bias and a scale and zero
  point for each of the two.

  Args:
    content: bytes of a .tflite flatbuffer.

  Returns:
    list of (op name, kernel height x width as 'HxW' or '' for fully
    connected, fan-in (kernel values per output channel), output channels),
    one per operator, in graph order.
  """
  model = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
  found = []
  for subgraph in model.subgraphs:
    for operator in subgraph.operators:
      code = model.operatorCodes[operator.opcodeIndex]
      op = _OP_NAMES.get(max(code.builtinCode, code.deprecatedBuiltinCode))
      if op not in ('CONV_2D', 'DEPTHWISE_CONV_2D', 'FULLY_CONNECTED'):
        continue
      shape = [int(v) for v in subgraph.tensors[operator.inputs[1]].shape]
      window = f'{shape[1]}x{shape[2]}' if len(shape) == 4 else ''
      found.append((op, window, *_fan_in_and_channels(op, shape)))
  return found


def format_convolutions(found):
  """Text lines: per op and window, layers, output channels, fan-in range."""
  groups = collections.defaultdict(list)
  for op, window, fan_in, channels in found:
    groups[(op, window)].append((fan_in, channels))
  return '\n'.join(
      f'{op} {window}'.rstrip() + f': {len(rows)} layers, '
      f'{sum(c for _, c in rows)} output channels, fan-in '
      f'{min(f for f, _ in rows)}-{max(f for f, _ in rows)}'
      for (op, window), rows in groups.items())


def format_table(named_breakdowns):
  """A text table of breakdowns, one column per model.

  Args:
    named_breakdowns: list of (name, `Breakdown`); the first is the
      reference whose total the others' shares are of.

  Returns:
    str: bytes per part and model, and each model's total as a share of
    the reference's.
  """
  reference = named_breakdowns[0][1].total
  weights = sorted({part for _, result in named_breakdowns
                    for part in result.parts if part.startswith('weights_')})
  rows = [['part'] + [name for name, _ in named_breakdowns]]
  for part in weights + list(PARTS):
    rows.append([part] + [str(result.parts.get(part, 0))
                          for _, result in named_breakdowns])
  for label, value in (
      ('total', lambda r: str(r.total)),
      ('share of first', lambda r: f'{100 * r.total / reference:.1f}%'),
      ('per-channel scales', lambda r: str(r.per_channel_scales)),
      ('per-tensor scales', lambda r: str(r.per_tensor_scales)),
      ('duplicate buffer bytes', lambda r: str(r.duplicate_buffer_bytes))):
    rows.append([label] + [value(result) for _, result in named_breakdowns])
  widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
  return '\n'.join(
      '  '.join(cell.ljust(width) if i == 0 else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(row, widths)))
      for row in rows)
