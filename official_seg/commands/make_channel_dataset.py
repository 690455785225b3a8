"""Writes a synthetic set whose classes need 16 bits or a fourth channel, or its reduced arm.

  make_channel_dataset --set=faint16 --output_dir=data/faint16
  make_channel_dataset --set=faint16 --reduced --output_dir=data/faint16_8bit
  make_channel_dataset --set=fourth_channel --output_dir=data/rgbn
  make_channel_dataset --set=fourth_channel --reduced --output_dir=data/rgb

faint16: 16-bit grey images whose 'faint' objects lie 100 of 65535 above
the background, within one 8-bit step; --reduced writes the same images
scaled to 8 bits, where they vanish. fourth_channel: 8-bit images of 4
channels whose 'box' and 'marked_box' differ in the fourth channel alone;
--reduced writes their RGB. Each writes shards, `<split>-metadata.json`
and `dataset.gin` (with IMAGE_CHANNELS and IMAGE_BIT_DEPTH); train on it
with `--gin_file=<output_dir>/dataset.gin` (docs/channel_evidence.md).
"""

import sys
import time

from absl import flags

from official_seg import command_line
from official_seg.datasets import channel_evidence

FLAGS = flags.FlagValues()
flags.DEFINE_enum('set', None, list(channel_evidence.SETS), 'Which set.',
                  flag_values=FLAGS)
flags.DEFINE_bool('reduced', False, 'Write the reduced arm: faint16 '
                  'scaled to 8 bits, fourth_channel without its fourth '
                  'channel.', flag_values=FLAGS)
flags.DEFINE_string('output_dir', None, 'Where to write shards.',
                    flag_values=FLAGS)
flags.DEFINE_integer('num_train', 400, 'Training images.', lower_bound=1,
                     flag_values=FLAGS)
flags.DEFINE_integer('num_val', 100, 'Validation images.', lower_bound=1,
                     flag_values=FLAGS)
flags.DEFINE_integer('num_shards', 4, 'Shards per split.', lower_bound=1,
                     flag_values=FLAGS)
flags.DEFINE_integer('min_size', 72, 'Smallest image side, in pixels.',
                     lower_bound=32, flag_values=FLAGS)
flags.DEFINE_integer('max_size', 128, 'Largest image side, in pixels.',
                     lower_bound=32, flag_values=FLAGS)
flags.mark_flags_as_required(['set', 'output_dir'], flag_values=FLAGS)
flags.register_multi_flags_validator(
    ['min_size', 'max_size'],
    lambda sizes: sizes['min_size'] <= sizes['max_size'],
    '--min_size must not exceed --max_size.', flag_values=FLAGS)


def _main(argv):
  del argv  # Unused.
  start = time.time()
  written, gin_path = channel_evidence.write_dataset(
      FLAGS.output_dir, FLAGS.set,
      {'train': FLAGS.num_train, 'val': FLAGS.num_val}, FLAGS.reduced,
      FLAGS.num_shards, min_size=FLAGS.min_size, max_size=FLAGS.max_size)
  for split, count in sorted(written.items()):
    print(f'{split}: {count} images in {FLAGS.num_shards} shards')
  print(f'Wrote {FLAGS.output_dir} and {gin_path} in '
        f'{time.time() - start:.1f}s')


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
