"""Breaks .tflite files down by what their bytes hold, side by side.

  tflite_size \
    --tflite=runs/quickstart/export/tflite/model_float32.tflite \
    --tflite=runs/quickstart/export/tflite/model_int8.tflite

Prints, per model, the bytes of its constant buffers by tensor dtype, the
int32 biases, the quantization parameters (float32 scales and int64 zero
points, as the TFLite schema stores them), the tensor names, the metadata
and the rest of the graph, with each total as a share of the first model's;
then each model's convolutions: layers, output channels and fan-in (kernel
values per output channel) by op and window
(`official_seg/export/tflite_size.py`; docs/deployment.md).
"""

import os
import sys

from absl import flags

from official_seg import command_line
from official_seg import validation
from official_seg.export import tflite_size

FLAGS = flags.FlagValues()
flags.DEFINE_multi_string('tflite', None, 'A .tflite file; repeat the flag '
                          'to compare, the first being the reference.',
                          flag_values=FLAGS)
flags.mark_flag_as_required('tflite', flag_values=FLAGS)


def _main(argv):
  del argv  # The program alone (command_line.run).
  named, kernels = [], []
  for path in FLAGS.tflite:
    if not os.path.isfile(path):
      raise validation.MissingFileError(f'--tflite={path}: no such file.')
    with open(path, 'rb') as f:
      content = f.read()
    named.append((os.path.basename(path), tflite_size.breakdown(content)))
    kernels.append(tflite_size.format_convolutions(
        tflite_size.convolutions(content)))
  print(tflite_size.format_table(named))
  for (name, _), lines in zip(named, kernels):
    print(f'\n{name}:\n{lines}')


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
