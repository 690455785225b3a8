"""Writes the built-in synthetic segmentation dataset as DeepLab TFRecord shards."""

import sys
import time

from absl import flags

from official_seg import command_line
from official_seg.datasets import synthetic

FLAGS = flags.FlagValues()
flags.DEFINE_string('output_dir', 'data/synthetic', 'Where to write shards.',
                    flag_values=FLAGS)
flags.DEFINE_integer('num_train', 400, 'Training images.', flag_values=FLAGS)
flags.DEFINE_integer('num_val', 61, 'Validation images.', flag_values=FLAGS)
flags.DEFINE_integer('num_shards', 4, 'Shards per split.', flag_values=FLAGS)
flags.DEFINE_integer('min_size', 72, 'Smallest image side, in pixels.',
                     flag_values=FLAGS)
flags.DEFINE_integer('max_size', 144, 'Largest image side, in pixels.',
                     flag_values=FLAGS)
flags.DEFINE_enum('image_format', 'jpeg', ['jpeg', 'png'], 'Image encoding.',
                  flag_values=FLAGS)


def _main(argv):
  del argv  # Unused.
  start = time.time()
  written = synthetic.write_dataset(
      FLAGS.output_dir, {'train': FLAGS.num_train, 'val': FLAGS.num_val},
      num_shards=FLAGS.num_shards, image_format=FLAGS.image_format,
      min_size=FLAGS.min_size, max_size=FLAGS.max_size)
  for split, count in sorted(written.items()):
    print(f'{split}: {count} images in {FLAGS.num_shards} shards')
  print(f'Wrote {FLAGS.output_dir} in {time.time() - start:.1f}s')


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
