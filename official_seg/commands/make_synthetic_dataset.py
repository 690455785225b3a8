"""Writes the built-in synthetic segmentation dataset as DeepLab TFRecord shards."""

import sys
import time

from absl import flags

from official_seg import command_line
from official_seg import generator_flags
from official_seg.datasets import synthetic

FLAGS = flags.FlagValues()
generator_flags.define_generator_flags(FLAGS, 'data/synthetic', num_train=400,
                                       num_val=61, num_shards=4, min_size=72,
                                       max_size=144)
flags.DEFINE_enum('image_format', 'jpeg', ['jpeg', 'png'], 'Image encoding.',
                  flag_values=FLAGS)


def _main(argv):
  del argv  # Unused.
  start = time.time()
  written = synthetic.write_dataset(
      FLAGS.output_dir, generator_flags.splits(FLAGS),
      num_shards=FLAGS.num_shards, image_format=FLAGS.image_format,
      min_size=FLAGS.min_size, max_size=FLAGS.max_size)
  generator_flags.print_written(written, FLAGS, start)


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
