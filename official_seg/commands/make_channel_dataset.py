"""Writes a synthetic set whose classes need 16 bits or a fourth channel, or its reduced arm.

  make_channel_dataset --set=faint16 --output_dir=data/faint16
  make_channel_dataset --set=faint16 --reduced --output_dir=data/faint16_8bit
  make_channel_dataset --set=fourth_channel --output_dir=data/rgbn
  make_channel_dataset --set=fourth_channel --reduced --output_dir=data/rgb

faint16: 16-bit grey images whose 'faint' objects lie 160 of 65535 above
the background, within one 8-bit step; --reduced writes the same images
scaled to 8 bits, where they vanish in most images. fourth_channel:
8-bit images of 4 channels whose 'box' and 'marked_box' differ in the
fourth channel alone; --reduced writes their RGB. Each writes shards,
`<split>-metadata.json` and `dataset.gin` (with IMAGE_CHANNELS and
IMAGE_BIT_DEPTH); train on it with `--gin_file=<output_dir>/dataset.gin`
(docs/channel_evidence.md).
"""

import sys
import time

from absl import flags

from official_seg import command_line
from official_seg import generator_flags
from official_seg.datasets import channel_evidence

FLAGS = flags.FlagValues()
flags.DEFINE_enum('set', None, list(channel_evidence.SETS), 'Which set.',
                  flag_values=FLAGS)
flags.DEFINE_bool('reduced', False, 'Write the reduced arm: faint16 '
                  'scaled to 8 bits, fourth_channel without its fourth '
                  'channel.', flag_values=FLAGS)
generator_flags.define_generator_flags(FLAGS, None, num_train=400,
                                       num_val=100, num_shards=4, min_size=72,
                                       max_size=128, smallest_side=32)
flags.mark_flag_as_required('set', flag_values=FLAGS)


def _main(argv):
  del argv  # Unused.
  start = time.time()
  written, gin_path = channel_evidence.write_dataset(
      FLAGS.output_dir, FLAGS.set, generator_flags.splits(FLAGS),
      FLAGS.reduced, FLAGS.num_shards, min_size=FLAGS.min_size,
      max_size=FLAGS.max_size)
  generator_flags.print_written(written, FLAGS, start)
  print(f'Dataset gin file: {gin_path}')


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
