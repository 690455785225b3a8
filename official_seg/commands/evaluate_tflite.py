"""Scores a .tflite of --mode=export_tflite on the eval split with the TFLite interpreter.

  evaluate_tflite \
    --tflite=runs/quickstart/export/tflite/model_int8.tflite \
    --gin_file=gin/experiments/quickstart.gin

Prints the evaluator's table (per-class IoU, Dice/F1, precision, recall and
Boundary IoU at the run's ModelFnOptions.boundary_tolerance, their means,
pixel accuracy) at each image's decoded size, the median interpreter latency
per image and the model's size; --output also saves them.
"""

import json
import os
import sys

from absl import flags

from official_seg import command_line
from official_seg import flags as seg_flags
from official_seg.data import storage
from official_seg.evaluation import results
from official_seg.export import tflite_runner
from official_seg.export import tflite_scoring
from official_seg.runtime import gin_config
from official_seg.runtime import model_fn

FLAGS = flags.FlagValues()
# --gin_file (the run's: they name the dataset and its eval split),
# --gin_param and --data_dir.
seg_flags.define_gin_flags(FLAGS)
flags.DEFINE_string('tflite', None, 'A .tflite of train_and_eval '
                    '--mode=export_tflite.', flag_values=FLAGS)
flags.DEFINE_integer('num_threads', None, 'Interpreter threads; default the '
                     'CPU cores.', flag_values=FLAGS)
flags.DEFINE_integer('max_images', None, 'Score at most this many images.',
                     flag_values=FLAGS)
flags.DEFINE_string('output', None, 'A JSON file to also write the record to.',
                    flag_values=FLAGS)
flags.mark_flag_as_required('tflite', flag_values=FLAGS)


def _main(argv):
  """Scores the model; a path or setting it cannot use is a
  ConfigurationError."""
  seg_flags.check_run_tool_args(argv, FLAGS)
  storage.check_input('--tflite', FLAGS.tflite, folder=False)
  if FLAGS.output:
    storage.check_output('--output', FLAGS.output, folder=False)
  # A dataset file alone (build_tfrecords' dataset.gin) reads as the
  # experiment that includes it does.
  storage.set_gcs_plugin_defaults()
  dataset = gin_config.read_dataset(list(FLAGS.gin_file or []),
                                    seg_flags.gin_params(flag_values=FLAGS))
  model = tflite_runner.TfliteModel(FLAGS.tflite, FLAGS.num_threads)
  print(f'Scoring {FLAGS.tflite} on {dataset.data_dir} '
        f'split {dataset.eval_split!r}')
  # The contour bands of the run's evaluator.
  tolerance = model_fn.ModelFnOptions().boundary_tolerance
  record, _ = tflite_scoring.evaluate(model, dataset, FLAGS.max_images,
                                     tolerance)
  print(results.format_table(record))
  results.warn_never_predicted(record)
  print(f'model size: {record["model_bytes"]} bytes; latency: '
        f'{record["latency_ms"]:.2f} ms per image (median)')
  if FLAGS.output:
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)),
                exist_ok=True)
    with open(FLAGS.output, 'w') as f:
      json.dump(record, f, indent=2)


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
