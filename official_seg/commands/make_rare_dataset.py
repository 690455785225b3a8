"""Writes the rare-class synthetic set (official_seg/datasets/rare.py) as DeepLab TFRecord shards.

  make_rare_dataset --output_dir=data/rare
  train_and_eval --gin_file=gin/experiments/quickstart.gin \
    --gin_file=gin/datasets/rare.gin --model_dir=runs/rare

Prints each split's images and the share of its labelled pixels each class
covers; writes `<split>-metadata.json` and `<split>-image-classes.json`
beside the shards, as the other dataset writers do.
"""

import sys
import time

from absl import flags

from official_seg import command_line
from official_seg import generator_flags
from official_seg.data import split_metadata
from official_seg.datasets import rare

FLAGS = flags.FlagValues()
# A crack runs at least a quarter of the shorter side: below 16 pixels it
# is a few pixels long.
generator_flags.define_generator_flags(FLAGS, 'data/rare', num_train=400,
                                       num_val=100, num_shards=4, min_size=96,
                                       max_size=144, smallest_side=16)


def class_shares(histogram):
  """'name share%' of each class, of a `split_metadata` label histogram."""
  counts = [histogram.get(str(c), 0) for c in range(len(rare.CLASS_NAMES))]
  total = max(sum(counts), 1)
  return ', '.join(f'{name} {100 * count / total:.2f}%'
                   for name, count in zip(rare.CLASS_NAMES, counts))


def _main(argv):
  del argv  # Unused.
  start = time.time()
  written = rare.write_dataset(
      FLAGS.output_dir, generator_flags.splits(FLAGS),
      num_shards=FLAGS.num_shards, min_size=FLAGS.min_size,
      max_size=FLAGS.max_size)
  generator_flags.print_written(
      written, FLAGS, start, lambda split: (
          '; ' + class_shares(split_metadata.read(
              FLAGS.output_dir, split)['label_histogram']) +
          ' of the labelled pixels'))


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
