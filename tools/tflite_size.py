"""Breaks .tflite files down by what their bytes hold, side by side.

  python tools/tflite_size.py \
    --model=runs/quickstart/export/tflite/model_float32.tflite \
    --model=runs/quickstart/export/tflite/model_int8.tflite

Prints, per model, the bytes of its constant buffers by tensor dtype, the
int32 biases, the quantization parameters (float32 scales and int64 zero
points, as the TFLite schema stores them), the tensor names, the metadata
and the rest of the graph, with each total as a share of the first model's;
then each model's convolutions: layers, output channels and fan-in (kernel
values per output channel) by op and window
(`official_seg/export/tflite_size.py`; docs/deployment.md).
"""

import os

from absl import app
from absl import flags

from official_seg.export import tflite_size

flags.DEFINE_multi_string('model', None, 'A .tflite file; repeat the flag '
                          'to compare, the first being the reference.')
flags.mark_flag_as_required('model')
FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  named, kernels = [], []
  for path in FLAGS.model:
    if not os.path.isfile(path):
      raise app.UsageError(f'--model={path}: no such file.')
    with open(path, 'rb') as f:
      content = f.read()
    named.append((os.path.basename(path), tflite_size.breakdown(content)))
    kernels.append(tflite_size.format_convolutions(
        tflite_size.convolutions(content)))
  print(tflite_size.format_table(named))
  for (name, _), lines in zip(named, kernels):
    print(f'\n{name}:\n{lines}')


if __name__ == '__main__':
  app.run(main)
