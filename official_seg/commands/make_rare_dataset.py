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
from official_seg.data import split_metadata
from official_seg.datasets import rare

FLAGS = flags.FlagValues()
flags.DEFINE_string('output_dir', 'data/rare', 'Where to write shards.',
                    flag_values=FLAGS)
flags.DEFINE_integer('num_train', 400, 'Training images.', lower_bound=1,
                     flag_values=FLAGS)
flags.DEFINE_integer('num_val', 100, 'Validation images.', lower_bound=1,
                     flag_values=FLAGS)
flags.DEFINE_integer('num_shards', 4, 'Shards per split.', lower_bound=1,
                     flag_values=FLAGS)
# A crack runs at least a quarter of the shorter side: below 16 pixels it
# is a few pixels long.
flags.DEFINE_integer('min_size', 96, 'Smallest image side, in pixels.',
                     lower_bound=16, flag_values=FLAGS)
flags.DEFINE_integer('max_size', 144, 'Largest image side, in pixels.',
                     lower_bound=16, flag_values=FLAGS)
flags.register_multi_flags_validator(
    ['min_size', 'max_size'],
    lambda sizes: sizes['min_size'] <= sizes['max_size'],
    '--min_size must not exceed --max_size.', flag_values=FLAGS)


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
      FLAGS.output_dir, {'train': FLAGS.num_train, 'val': FLAGS.num_val},
      num_shards=FLAGS.num_shards, min_size=FLAGS.min_size,
      max_size=FLAGS.max_size)
  for split, count in sorted(written.items()):
    metadata = split_metadata.read(FLAGS.output_dir, split)
    print(f'{split}: {count} images in {FLAGS.num_shards} shards; '
          f'{class_shares(metadata["label_histogram"])} of the labelled '
          'pixels')
  print(f'Wrote {FLAGS.output_dir} in {time.time() - start:.1f}s')


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
