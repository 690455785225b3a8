"""The flags of the commands that generate a dataset, and the lines they print when done."""

import time

from absl import flags


def define_generator_flags(flag_values, output_dir, num_train, num_val,
                           num_shards, min_size, max_size, smallest_side=1):
  """Defines --output_dir, --num_train, --num_val, --num_shards, --min_size, --max_size.

  Args:
    flag_values: the command's `flags.FlagValues`.
    output_dir: str or None (then required), the default folder.
    num_train: int, default training images.
    num_val: int, default validation images.
    num_shards: int, default shards a split.
    min_size: int, default smallest image side, in pixels.
    max_size: int, default largest image side, in pixels.
    smallest_side: int, the least side the generator draws its objects in.
  """
  flags.DEFINE_string('output_dir', output_dir, 'Where to write shards.',
                      flag_values=flag_values)
  for name, default, text in (('num_train', num_train, 'Training images.'),
                              ('num_val', num_val, 'Validation images.'),
                              ('num_shards', num_shards, 'Shards per split.')):
    flags.DEFINE_integer(name, default, text, lower_bound=1,
                         flag_values=flag_values)
  flags.DEFINE_integer('min_size', min_size, 'Smallest image side, in '
                       'pixels.', lower_bound=smallest_side,
                       flag_values=flag_values)
  flags.DEFINE_integer('max_size', max_size, 'Largest image side, in pixels.',
                       lower_bound=smallest_side, flag_values=flag_values)
  if output_dir is None:
    flags.mark_flag_as_required('output_dir', flag_values=flag_values)
  flags.register_multi_flags_validator(
      ['min_size', 'max_size'],
      lambda sizes: sizes['min_size'] <= sizes['max_size'],
      '--min_size must not exceed --max_size.', flag_values=flag_values)


def splits(flag_values):
  """{'train': --num_train, 'val': --num_val}."""
  return {'train': flag_values.num_train, 'val': flag_values.num_val}


def print_written(written, flag_values, start, describe=lambda split: ''):
  """Prints each split's images and shards, then the folder and the time.

  Args:
    written: dict of split to the images written.
    flag_values: the command's parsed `flags.FlagValues`.
    start: float, `time.time()` when writing began.
    describe: function of a split to more of its line ('' for nothing).
  """
  for split, count in sorted(written.items()):
    print(f'{split}: {count} images in {flag_values.num_shards} shards'
          f'{describe(split)}')
  print(f'Wrote {flag_values.output_dir} in {time.time() - start:.1f}s')
