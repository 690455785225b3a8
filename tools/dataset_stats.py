"""Prints class frequencies, image sizes and suggested class weights of a split.

  python tools/dataset_stats.py --gin_file=gin/datasets/pascal_voc.gin
  python tools/dataset_stats.py --data_dir=data/mine --split=train \
    --num_classes=5 --chart=/tmp/mine.png
"""

import dataclasses

from absl import app
from absl import flags

from official_seg.data import dataset_info
from official_seg.data import stats
from official_seg.evaluation import visualize
from official_seg.runtime import gin_config

flags.DEFINE_multi_string('gin_file', [], 'Gin files that set the dataset '
                          'macros (NUM_CLASSES, DATA_DIR, ...).')
flags.DEFINE_multi_string('gin_param', [], 'Gin bindings after the files.')
flags.DEFINE_string('data_dir', None, 'Shard folder; default DATA_DIR.')
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
  info = (gin_config.read_dataset(FLAGS.gin_file, FLAGS.gin_param)
          if FLAGS.gin_file else None)
  num_classes = FLAGS.num_classes or (info and info.num_classes)
  data_dir = FLAGS.data_dir or (info and info.data_dir)
  split = FLAGS.split or (info and info.train_split)
  if not (num_classes and data_dir and split):
    raise app.UsageError('Give --gin_file, or --data_dir, --split and '
                         '--num_classes.')
  ignore = FLAGS.ignore_label
  if ignore is None:
    ignore = info.ignore_label if info else 255
  # Class names of the gin files fit only their own number of classes.
  names = (info.class_names if info and info.num_classes == num_classes
           else None)
  fields = dict(num_classes=num_classes, class_names=names,
                ignore_label=ignore, data_dir=data_dir, train_split=split)
  return (dataclasses.replace(info, **fields) if info
          else dataset_info.DatasetInfo(**fields))


def main(argv):
  del argv  # Unused.
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
