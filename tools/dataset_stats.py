"""Prints class frequencies, image sizes and suggested class weights of a split.

  python tools/dataset_stats.py --gin_file=gin/datasets/pascal_voc.gin
  python tools/dataset_stats.py --data_dir=data/mine --split=train \
    --num_classes=5 --chart=/tmp/mine.png
"""


from absl import app
from absl import flags

from official_seg import flags as seg_flags
from official_seg.data import storage
from official_seg.datasets import stats
from official_seg.evaluation import visualize

# --gin_file (files that set the dataset macros: NUM_CLASSES, DATA_DIR, ...),
# --gin_param and --data_dir.
flags.adopt_module_key_flags(seg_flags)
flags.DEFINE_string('split', None, 'Split; default TRAIN_SPLIT.')
flags.DEFINE_integer('num_classes', None, 'Classes; default NUM_CLASSES.')
flags.DEFINE_integer('ignore_label', None, 'Ignore label; default '
                     'IGNORE_LABEL, else 255.')
flags.DEFINE_string('chart', 'class_frequencies.png',
                    'Where to save the bar chart (PNG).')
FLAGS = flags.FLAGS


def dataset():
  """The `DatasetInfo` of the gin files, flags taking precedence.

  Its `train_split` is the split to read.

  Raises:
    app.UsageError: neither gin files nor --data_dir, --split and
      --num_classes say which shards to read.
  """
  info = seg_flags.dataset_with(num_classes=FLAGS.num_classes,
                                split=FLAGS.split,
                                ignore_label=FLAGS.ignore_label)
  if not (info and info.data_dir and info.train_split):
    raise app.UsageError('Give --gin_file, or --data_dir, --split and '
                         '--num_classes.')
  return info


def main(argv):
  del argv  # Unused.
  with seg_flags.mistakes_exit_2('dataset_stats'):
    _report()


def _report():
  """main's work; a path or setting it cannot use is a ConfigurationError."""
  storage.check_output('--chart', FLAGS.chart, folder=False)
  info = dataset()
  result = stats.compute_stats(info.data_dir, info.train_split,
                               info.num_classes, info.ignore_label)
  title = f'Split {info.train_split!r} of {info.data_dir}'
  weights = stats.median_frequency_weights(result)
  print(stats.format_report(result, info.class_names, weights, title))
  visualize.save_class_share_chart(stats.class_shares(result),
                                   info.class_names, FLAGS.chart, title)
  print(f'Chart: {FLAGS.chart}')


if __name__ == '__main__':
  app.run(main)
