"""Writes the scarce-label synthetic set (official_seg/datasets/scarce.py) as DeepLab TFRecord shards."""

import sys
import time

from absl import flags

from official_seg import command_line
from official_seg import generator_flags
from official_seg.datasets import scarce

FLAGS = flags.FlagValues()
generator_flags.define_generator_flags(FLAGS, 'data/scarce', num_train=1500,
                                       num_val=300, num_shards=8,
                                       min_size=180, max_size=220)


def _main(argv):
  del argv  # Unused.
  start = time.time()
  written = scarce.write_dataset(
      FLAGS.output_dir, generator_flags.splits(FLAGS),
      num_shards=FLAGS.num_shards, min_size=FLAGS.min_size,
      max_size=FLAGS.max_size)
  generator_flags.print_written(written, FLAGS, start)


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
