"""Prints class frequencies, image sizes, class weights and sampling settings of a split.

  dataset_stats --gin_file=gin/datasets/pascal_voc.gin
  dataset_stats --gin_file=data/mine/dataset.gin \
    --normalization_gin=data/mine/normalization.gin
  dataset_stats --data_dir=data/mine --split=train \
    --num_classes=5 --chart=/tmp/mine.png
  dataset_stats --gin_file=data/mine/dataset.gin \
    --sampling_gin=data/mine/sampling.gin --write_image_classes
"""


import sys

from absl import app
from absl import flags

from official_seg import command_line
from official_seg import flags as seg_flags
from official_seg.data import image_classes
from official_seg.data import storage
from official_seg.datasets import sampling_advice
from official_seg.datasets import stats
from official_seg.evaluation import visualize

FLAGS = flags.FlagValues()
# --gin_file (files that set the dataset macros: NUM_CLASSES, DATA_DIR, ...),
# --gin_param and --data_dir.
seg_flags.define_gin_flags(FLAGS)
flags.DEFINE_string('split', None, 'Split; default TRAIN_SPLIT.',
                    flag_values=FLAGS)
flags.DEFINE_integer('num_classes', None, 'Classes; default NUM_CLASSES.',
                     flag_values=FLAGS)
flags.DEFINE_integer('ignore_label', None, 'Ignore label; default '
                     'IGNORE_LABEL, else 255.', flag_values=FLAGS)
flags.DEFINE_string('chart', 'class_frequencies.png',
                    'Where to save the bar chart (PNG).', flag_values=FLAGS)
flags.DEFINE_string('sampling_gin', None,
                    'Also write the suggested sampling settings as this gin '
                    'file.', flag_values=FLAGS)
flags.DEFINE_boolean('write_image_classes', False,
                     'Also write <split>-image-classes.json (the label values '
                     'of each image) beside the shards, which repeat factors '
                     'read.', flag_values=FLAGS)


flags.DEFINE_string(
    'normalization_gin', None,
    'Also compute the mean and standard deviation of each image channel '
    '(decoding every image) and write them as Parser.mean_rgb and '
    'Parser.stddev_rgb in this gin file, to load after the backbone\'s.',
    flag_values=FLAGS)


def dataset():
  """The `DatasetInfo` of the gin files, flags taking precedence.

  Its `train_split` is the split to read.

  Raises:
    app.UsageError: neither gin files nor --data_dir, --split and
      --num_classes say which shards to read.
  """
  info = seg_flags.dataset_with(num_classes=FLAGS.num_classes,
                                split=FLAGS.split,
                                ignore_label=FLAGS.ignore_label,
                                            flag_values=FLAGS)
  if not (info and info.data_dir and info.train_split):
    raise app.UsageError('Give --gin_file, or --data_dir, --split and '
                         '--num_classes.')
  return info


def _main(argv):
  """Prints the report and saves the chart; a path or setting it cannot use
  is a ConfigurationError."""
  del argv  # The program alone (command_line.run).
  storage.check_output('--chart', FLAGS.chart, folder=False)
  for name in ('sampling_gin', 'normalization_gin'):
    if FLAGS[name].value:
      storage.check_output(f'--{name}', FLAGS[name].value, folder=False)
  info = dataset()
  result = stats.compute_stats(info.data_dir, info.train_split,
                               info.num_classes, info.ignore_label)
  title = f'Split {info.train_split!r} of {info.data_dir}'
  weights = stats.median_frequency_weights(result)
  print(stats.format_report(result, info.class_names, weights, title))
  visualize.save_class_share_chart(stats.class_shares(result),
                                   info.class_names, FLAGS.chart, title)
  print(f'Chart: {FLAGS.chart}')
  _sampling(result, info, title)
  if FLAGS.normalization_gin:
    _normalization(info, title)


def _normalization(info, title):
  """Prints each channel's mean and deviation and writes them as gin."""
  mean, std = stats.channel_statistics(info.data_dir, info.train_split,
                                       info.image_channels,
                                       info.image_bit_depth)
  text = stats.normalization_gin(mean, std, title)
  print(text, end='')
  storage.write_whole(FLAGS.normalization_gin, text)
  print(f'Normalization settings: {FLAGS.normalization_gin}')


def _sampling(result, info, title):
  """Prints the suggested sampling settings; writes them, and the label
  values of each image, when the flags ask."""
  suggestions = sampling_advice.suggest(result, info.class_names,
                                        info.ignore_label)
  print(sampling_advice.format_suggestions(suggestions))
  if FLAGS.sampling_gin:
    storage.write_whole(FLAGS.sampling_gin,
                        sampling_advice.gin_snippet(suggestions, title))
    print(f'Sampling settings: {FLAGS.sampling_gin}')
  if FLAGS.write_image_classes:
    print('Classes of each image: ' + image_classes.write(
        info.data_dir, info.train_split, result.image_labels))


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
