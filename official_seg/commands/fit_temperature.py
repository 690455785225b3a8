"""Fits the temperature that calibrates an exported model's confidence, on the eval split.

  fit_temperature --model_dir=runs/quickstart \
    --gin_file=gin/experiments/quickstart.gin
  fit_temperature --saved_model=runs/quickstart/export/best/1712345678 \
    --gin_file=gin/experiments/quickstart.gin --split=val --max_images=200

Runs the export of the model dir's checkpoint (its newest SavedModel, or
--saved_model) on the labelled split, finds the one temperature T whose
softmax(logits / T) has the least negative log-likelihood over the labelled
pixels (labels and argmax unchanged), prints it with the NLL and the
expected calibration error (15 confidence bins) before and after, and
writes them to the export's assets.extra/temperature.json, where
predict_images and `Predictor` apply T to the confidence and entropy maps.
The split's labelled pixels are held in memory (C floats each): bound them
with --max_images.
"""

import json
import sys

from absl import flags

from official_seg import command_line
from official_seg import flags as seg_flags
from official_seg import validation
from official_seg.data import dataset_info
from official_seg.data import storage
from official_seg.export import predictor
from official_seg.export import temperature
from official_seg.runtime import estimator

FLAGS = flags.FlagValues()
# --gin_file (the run's: they name the dataset and its eval split),
# --gin_param and --data_dir.
seg_flags.define_gin_flags(FLAGS)
flags.DEFINE_string('model_dir', None, 'A training model dir: its newest '
                    'export under <model_dir>/export/ is fitted.',
                    flag_values=FLAGS)
flags.DEFINE_string('saved_model', None, 'A SavedModel directory from '
                    'train_and_eval (export/<timestamp>/).', flag_values=FLAGS)
flags.DEFINE_string('split', None, 'The labelled split to fit on; default '
                    'the dataset\'s eval split (EVAL_SPLIT).',
                    flag_values=FLAGS)
flags.DEFINE_integer('max_images', None, 'Use at most this many images.',
                     lower_bound=1, flag_values=FLAGS)
flags.DEFINE_string('output', None, 'A JSON file to also write the record '
                    'to.', flag_values=FLAGS)
flags.mark_flags_as_mutual_exclusive(['saved_model', 'model_dir'],
                                     required=True, flag_values=FLAGS)


def _export_dir():
  """--saved_model, checked, or the newest export of --model_dir."""
  if FLAGS.model_dir:
    storage.check_input('--model_dir', FLAGS.model_dir, folder=True)
    return predictor.find_saved_model(FLAGS.model_dir)
  predictor.check_saved_model('--saved_model', FLAGS.saved_model)
  return FLAGS.saved_model


def _print(record):
  print(f'{record["num_pixels"]} labelled pixels of '
        f'{record["num_images"]} images')
  print(f'temperature {record["temperature"]:.4f}')
  for name, key in (('NLL', 'nll'),
                    ('expected calibration error',
                     'expected_calibration_error')):
    print(f'{name:<27} before {record[key + "_before"]:.4f}  after '
          f'{record[key + "_after"]:.4f}')


def _main(argv):
  """Fits and records T; a path or setting it cannot use is a
  ConfigurationError."""
  seg_flags.check_run_tool_args(argv, FLAGS)
  export_dir = _export_dir()
  if FLAGS.output:
    storage.check_output('--output', FLAGS.output, folder=False)
  seg_flags.parse_gin(finalize=False, flag_values=FLAGS)
  dataset = dataset_info.DatasetInfo()
  split = FLAGS.split or dataset.eval_split
  model = predictor.Predictor(export_dir)
  resize_range = estimator.serving_resize_range(model, dataset)
  print(f'Fitting the temperature of {export_dir} (step {model.global_step}) '
        f'on {dataset.data_dir} split {split!r}')
  logits, labels, images = temperature.labelled_logits(
      model, predictor.split_examples(dataset.data_dir, split,
                                      FLAGS.max_images),
      resize_range, dataset.ignore_label)
  if not len(labels):
    raise validation.ConfigurationError(
        f'Split {split!r} of {dataset.data_dir} has no labelled pixel to fit '
        'a temperature on; give a labelled split with --split.')
  record = dict(temperature.fit(logits, labels), num_images=images,
                split=split, saved_model=export_dir,
                global_step=model.global_step)
  _print(record)
  print(f'Wrote {temperature.write(export_dir, record)}')
  if FLAGS.output:
    storage.write_whole(FLAGS.output, json.dumps(record, indent=2))


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
