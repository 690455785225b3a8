"""Writes the scarce-label synthetic set (official_seg/datasets/scarce.py) as DeepLab TFRecord shards."""

import time

from absl import app
from absl import flags

from official_seg.datasets import scarce

flags.DEFINE_string('output_dir', 'data/scarce', 'Where to write shards.')
flags.DEFINE_integer('num_train', 1500, 'Training images.')
flags.DEFINE_integer('num_val', 300, 'Validation images.')
flags.DEFINE_integer('num_shards', 8, 'Shards per split.')
flags.DEFINE_integer('min_size', 180, 'Smallest image side, in pixels.')
flags.DEFINE_integer('max_size', 220, 'Largest image side, in pixels.')
FLAGS = flags.FLAGS


def main(argv):
  del argv  # Unused.
  start = time.time()
  written = scarce.write_dataset(
      FLAGS.output_dir, {'train': FLAGS.num_train, 'val': FLAGS.num_val},
      num_shards=FLAGS.num_shards, min_size=FLAGS.min_size,
      max_size=FLAGS.max_size)
  for split, count in sorted(written.items()):
    print(f'{split}: {count} images in {FLAGS.num_shards} shards')
  print(f'Wrote {FLAGS.output_dir} in {time.time() - start:.1f}s')


if __name__ == '__main__':
  app.run(main)
