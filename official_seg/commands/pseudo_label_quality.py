"""Per class, how right a SavedModel's thresholded pseudo labels are on a split.

  pseudo_label_quality \
    --saved_model=runs/quickstart/export/latest/1712345678 \
    --gin_file=gin/experiments/quickstart.gin --split=val \
    --thresholds=0.7,0.95

FixMatch-style pseudo labels (the argmax of the softmax, kept where its
probability reaches a threshold) of the split's labelled images, at each
image's decoded size; per threshold, a table of each class's labelled
share, kept share, accuracy of its kept pixels, share of all kept pixels
and precision, then the overall kept share and the kept pixels' pixel and
class-balanced accuracy. --output also saves the figures.
"""

import json
import sys

from absl import flags
import tensorflow as tf

from official_seg import command_line
from official_seg import flags as seg_flags
from official_seg import validation
from official_seg.data import dataset_info
from official_seg.data import storage
from official_seg.export import predictor
from official_seg.runtime import estimator
from official_seg.semi_supervised import pseudo_label_quality as quality

FLAGS = flags.FlagValues()
# --gin_file (the run's: they name the dataset, and the eval preprocessing
# of exports that do not record it), --gin_param and --data_dir.
seg_flags.define_gin_flags(FLAGS)
flags.DEFINE_string('saved_model', None, 'A SavedModel of train_and_eval '
                    '(<model_dir>/export/latest/<timestamp>/), or a model '
                    'dir: its newest export.', flag_values=FLAGS)
flags.DEFINE_string('split', None, 'The labelled split to pseudo-label; '
                    'default the dataset\'s train split (TRAIN_SPLIT).',
                    flag_values=FLAGS)
flags.DEFINE_list('thresholds', ['0.95'], 'Confidence thresholds, a comma '
                  'list in [0, 1).', flag_values=FLAGS)
flags.DEFINE_integer('max_images', None, 'Use at most this many images.',
                     flag_values=FLAGS)
flags.DEFINE_string('output', None, 'A JSON file to also write the figures to.',
                    flag_values=FLAGS)
flags.mark_flag_as_required('saved_model', flag_values=FLAGS)


def _thresholds(values):
  """--thresholds as floats; one that is not a number is a mistake."""
  try:
    thresholds = [float(value) for value in values]
  except ValueError:
    raise validation.ConfigurationError(
        f'--thresholds={",".join(values)}: give numbers in [0, 1), e.g. '
        '0.7,0.95.') from None
  quality.check_thresholds(thresholds)
  return thresholds


def _saved_model_dir(path):
  """--saved_model itself, or the newest export of a model dir."""
  storage.check_input('--saved_model', path, folder=True)
  if tf.saved_model.contains_saved_model(path):
    return path
  return predictor.find_saved_model(path)


def _main(argv):
  """Measures the pseudo labels; a path or setting it cannot use is a
  ConfigurationError."""
  seg_flags.check_run_tool_args(argv, FLAGS)
  thresholds = _thresholds(FLAGS.thresholds)
  export_dir = _saved_model_dir(FLAGS.saved_model)
  if FLAGS.output:
    storage.check_output('--output', FLAGS.output, folder=False)
  seg_flags.parse_gin(finalize=False, flag_values=FLAGS)
  dataset = dataset_info.DatasetInfo()
  split = FLAGS.split or dataset.train_split
  model = predictor.Predictor(export_dir)
  resize_range = estimator.serving_resize_range(model, dataset)
  counts = quality.PseudoLabelCounts(thresholds, dataset.num_classes,
                                     dataset.ignore_label)
  print(f'Pseudo labels of {export_dir} (step {model.global_step}) on '
        f'{dataset.data_dir} split {split!r}')
  for encoded, label in predictor.split_examples(dataset.data_dir, split,
                                                FLAGS.max_images):
    counts.add(predictor.probabilities_at_decoded_size(
        model.probabilities(encoded), label.shape, resize_range), label)
  found = quality.record(counts, dataset.class_names)
  found.update(saved_model=export_dir, global_step=model.global_step)
  print(f'{counts.num_images} images')
  for figures in found['thresholds']:
    print(quality.format_table(figures, dataset.class_names))
  if FLAGS.output:
    storage.write_whole(FLAGS.output, json.dumps(found, indent=2))


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
