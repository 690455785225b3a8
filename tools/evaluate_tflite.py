"""Scores a .tflite of --mode=export_tflite on the eval split with the TFLite interpreter.

  python tools/evaluate_tflite.py \
    --model=runs/quickstart/export/tflite/model_int8.tflite \
    --gin_file=gin/experiments/quickstart.gin

Prints mean IoU, per-class IoU and pixel accuracy at each image's decoded
size (as the evaluator computes them), the median interpreter latency per
image and the model's size; --output_json also saves them.
"""

import json
import os

from absl import app
from absl import flags

from official_seg import flags as seg_flags
from official_seg.data import dataset_info
from official_seg.data import storage
from official_seg.evaluation import results
from official_seg.export import tflite_runner

# --gin_file (the run's: they name the dataset and its eval split),
# --gin_param and --data_dir.
flags.adopt_module_key_flags(seg_flags)
flags.DEFINE_string('model', None, 'A .tflite of train_and_eval '
                    '--mode=export_tflite.')
flags.DEFINE_integer('num_threads', None, 'Interpreter threads; default the '
                     'CPU cores.')
flags.DEFINE_integer('max_images', None, 'Score at most this many images.')
flags.DEFINE_string('output_json', None, 'Also write the record here.')
flags.mark_flag_as_required('model')
FLAGS = flags.FLAGS


def main(argv):
  seg_flags.check_run_tool_args(argv)
  with seg_flags.mistakes_exit_2('evaluate_tflite'):
    _evaluate()


def _evaluate():
  """main's work; a path or setting it cannot use is a ConfigurationError."""
  storage.check_input('--model', FLAGS.model, folder=False)
  if FLAGS.output_json:
    storage.check_output('--output_json', FLAGS.output_json, folder=False)
  seg_flags.parse_gin(finalize=False)
  dataset = dataset_info.DatasetInfo()
  model = tflite_runner.TfliteModel(FLAGS.model, FLAGS.num_threads)
  print(f'Scoring {FLAGS.model} on {dataset.data_dir} '
        f'split {dataset.eval_split!r}')
  record, _ = tflite_runner.evaluate(model, dataset, FLAGS.max_images)
  print(results.format_table(record))
  print(f'model size: {record["model_bytes"]} bytes; latency: '
        f'{record["latency_ms"]:.2f} ms per image (median)')
  if FLAGS.output_json:
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output_json)),
                exist_ok=True)
    with open(FLAGS.output_json, 'w') as f:
      json.dump(record, f, indent=2)


if __name__ == '__main__':
  app.run(main)
