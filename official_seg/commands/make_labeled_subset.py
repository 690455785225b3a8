"""Makes a class-balanced labeled subset of a split: new shards, or a split list.

  # 1/16 of the shards of TRAIN_SPLIT, written beside them as train_1_16:
  make_labeled_subset --gin_file=gin/datasets/synthetic.gin \
    --fraction=1/16
  # 1/8 of VOC's train list, as ImageSets/Segmentation/train_1_8.txt for
  # build_tfrecords --layout=voc --splits=train_1_8:
  make_labeled_subset --layout=voc \
    --input_dir=/data/VOCdevkit/VOC2012 --split=train --fraction=1/8
"""

import os
import sys

from absl import flags
import numpy as np

from official_seg import command_line
from official_seg import flags as seg_flags
from official_seg import validation
from official_seg import layout_flags
from official_seg.data import input_fn
from official_seg.data import layouts
from official_seg.data import storage
from official_seg.data import tfexample
from official_seg.datasets import convert
from official_seg.datasets import subsets

FLAGS = flags.FlagValues()
# --gin_file (files that set the dataset macros: NUM_CLASSES, CLASS_NAMES,
# IGNORE_LABEL, DATA_DIR, TRAIN_SPLIT; with --layout=voc default
# datasets/pascal_voc.gin), --gin_param and --data_dir.
seg_flags.define_gin_flags(FLAGS)
flags.DEFINE_string('split', None, 'The split to take the subset of; default '
                    'TRAIN_SPLIT.', flag_values=FLAGS)
flags.DEFINE_integer('num_classes', None, 'Classes; default NUM_CLASSES.',
                     flag_values=FLAGS)
flags.DEFINE_integer('ignore_label', None, 'Ignore label; default '
                     'IGNORE_LABEL, else 255.', flag_values=FLAGS)
flags.DEFINE_string('fraction', None, 'Share of the split to keep: 1/2, 1/4, '
                    '1/8, 1/16 (or any fraction); keeps round(n * fraction).',
                    flag_values=FLAGS)
flags.DEFINE_integer('count', None, 'Images to keep, instead of --fraction.',
                     flag_values=FLAGS)
flags.DEFINE_integer('seed', 0, 'Seed of the random draws; the same seed and '
                     'split give the same subset.', flag_values=FLAGS)
flags.DEFINE_string('name', None, 'Name of the subset split; default '
                    '<split>_1_16 for --fraction=1/16, <split>_<count> for '
                    '--count.', flag_values=FLAGS)
flags.DEFINE_integer('num_shards', 0, 'Shards of the subset; 0 keeps the '
                     "split's number, at most one per image.",
                     flag_values=FLAGS)
flags.DEFINE_bool('overwrite', False, 'Replace the shards of an earlier '
                  'subset of the same --name.', flag_values=FLAGS)
flags.DEFINE_bool('complement', False, 'Also write the other images of the '
                  'split, as <name>_rest, for an unlabeled split that holds '
                  'none of the labeled images.', flag_values=FLAGS)
flags.DEFINE_enum('layout', None, ['voc', 'folders'], 'Read the raw dataset '
                  'in this layout and write a split list (<name>.txt) for '
                  'build_tfrecords instead of shards.', flag_values=FLAGS)
layout_flags.define_folder_flags(
    FLAGS, 'voc: VOCdevkit/VOC2012.',
    'voc: label folder, as build_tfrecords takes it.')
flags.DEFINE_string('output_list_dir', None, 'Where <name>.txt goes; default '
                    'ImageSets/Segmentation (voc) or --split_list_dir '
                    '(folders).', flag_values=FLAGS)


def dataset():
  """The `DatasetInfo` of the gin files, flags taking precedence.

  Its `train_split` is the split to read, its `data_dir` the shards' folder.

  Raises:
    validation.ConfigurationError: nothing says the number of classes or
      the split.
  """
  gin_files = FLAGS.gin_file or (
      [layouts.LAYOUT_GIN_FILES[FLAGS.layout]]
      if FLAGS.layout in layouts.LAYOUT_GIN_FILES and not FLAGS.num_classes
      else [])
  info = seg_flags.dataset_with(gin_files, num_classes=FLAGS.num_classes,
                                split=FLAGS.split,
                                ignore_label=FLAGS.ignore_label,
                                flag_values=FLAGS)
  if not (info and info.train_split):
    raise validation.ConfigurationError(
        'Give --gin_file, or --split and --num_classes.')
  return info


def _list_dir():
  """The folder of the subset's split list; raises ConfigurationError if
  unknown."""
  if FLAGS.output_list_dir:
    return FLAGS.output_list_dir
  if FLAGS.layout == 'voc' and FLAGS.input_dir:
    return os.path.join(FLAGS.input_dir, 'ImageSets', 'Segmentation')
  if FLAGS.split_list_dir:
    return FLAGS.split_list_dir
  raise validation.ConfigurationError(
      '--layout=folders without --split_list_dir needs '
      '--output_list_dir for the subset list.')


def _chosen(labels, info, fraction):
  """The `Subset` of `labels` that the flags ask for."""
  size = subsets.subset_size(len(labels.names), fraction, FLAGS.count)
  presence = subsets.class_presence(labels.label_counts, info.num_classes,
                                    info.ignore_label)
  return subsets.select(presence, size, FLAGS.seed)


def _headline(what, subset, labels, info, fraction):
  """The first line of the report: what was written, of what, how."""
  how = (f'fraction {fraction}' if fraction is not None
         else f'count {FLAGS.count}')
  return (f'{what}: {len(subset.indices)} of {len(labels.names)} images of '
          f'{info.train_split} ({how}, seed {FLAGS.seed})')


def _rest(labels, subset):
  """int64 rows of the split that the subset leaves out; raises if none."""
  rest = np.setdiff1d(np.arange(len(labels.names)), subset.indices)
  if not rest.size:
    raise validation.ConfigurationError(
        '--complement: the subset holds every image of the '
        'split, so no image is left for <name>_rest.')
  return rest


def from_shards(info, fraction, name):
  """Writes the subset of a split's shards as the split `name`."""
  if not info.data_dir:
    raise validation.ConfigurationError(
        'Give --data_dir, or a --gin_file that sets DATA_DIR.')
  names = [name] + ([f'{name}_rest'] if FLAGS.complement else [])
  for target in names:
    subsets.check_target(info.data_dir, info.train_split, target,
                         FLAGS.overwrite)
  files = input_fn.list_shards(info.data_dir, info.train_split)
  labels = subsets.read_shards(info.data_dir, info.train_split)
  subset = _chosen(labels, info, fraction)
  parts = [subset.indices] + ([_rest(labels, subset)] if FLAGS.complement
                              else [])
  shards = []
  for target, indices in zip(names, parts):
    shards.append(min(FLAGS.num_shards or len(files), len(indices)))
    subsets.write_shards(info.data_dir, info.train_split, target, labels,
                         indices, shards[-1])
  print(_headline(f'Wrote split {name}', subset, labels, info, fraction) +
        f' in {shards[0]} shards '
        f'({tfexample.shard_pattern(info.data_dir, name)})')
  print(subsets.format_report(labels, subset, info.class_names,
                              info.ignore_label))
  unlabeled = info.train_split
  if FLAGS.complement:
    unlabeled = names[1]
    print(f'Wrote split {unlabeled}: the other {len(parts[1])} images in '
          f'{shards[1]} shards '
          f'({tfexample.shard_pattern(info.data_dir, unlabeled)})')
  print(f'Train on it: --gin_param="TRAIN_SPLIT=\'{name}\'" '
        f'--gin_param="UNLABELED_SPLIT=\'{unlabeled}\'"')


def from_layout(info, fraction, name):
  """Writes the subset of a raw dataset's split as `<name>.txt`."""
  storage.check_output('--output_list_dir', _list_dir(), folder=True)
  list_path = os.path.join(_list_dir(), f'{name}.txt')
  rest_path = os.path.join(_list_dir(), f'{name}_rest.txt')
  for path in [list_path] + ([rest_path] if FLAGS.complement else []):
    if os.path.exists(path) and not FLAGS.overwrite:
      raise validation.OutputExistsError(
          f'{path} exists; pass --overwrite to replace '
          'it, or choose another --name.')
  pairs = layouts.find_pairs(
      FLAGS.layout, info.train_split, FLAGS.input_dir, FLAGS.image_dir,
      FLAGS.label_dir, FLAGS.split_list_dir, FLAGS.label_subdir)
  lookup = layouts.layout_lookup(FLAGS.layout, info.num_classes,
                                 info.ignore_label)
  labels = subsets.read_pairs(pairs, lookup,
                              convert.valid_label_text(FLAGS.layout, info))
  subset = _chosen(labels, info, fraction)
  rest = _rest(labels, subset) if FLAGS.complement else None
  subsets.write_list(list_path, [labels.names[i] for i in subset.indices])
  print(_headline(f'Wrote {list_path}', subset, labels, info, fraction))
  print(subsets.format_report(labels, subset, info.class_names,
                              info.ignore_label))
  splits = name
  if rest is not None:
    subsets.write_list(rest_path, [labels.names[i] for i in rest])
    print(f'Wrote {rest_path}: the other {len(rest)} images')
    splits += f',{name}_rest'
  print(f'Convert it: build_tfrecords --layout={FLAGS.layout} '
        f'--splits={splits}' + (f' --split_list_dir={os.path.dirname(list_path)}'
                              if FLAGS.layout == 'folders' else ''))


def _main(argv):
  """Draws and writes the subset; a flag, file or data it cannot use is a
  ConfigurationError."""
  del argv  # The program alone (command_line.run).
  fraction = (subsets.parse_fraction(FLAGS.fraction)
              if FLAGS.fraction is not None else None)
  if (fraction is None) == (FLAGS.count is None):
    raise validation.ConfigurationError(
        'Give exactly one of --fraction and --count.')
  info = dataset()
  name = FLAGS.name or subsets.default_name(info.train_split, fraction,
                                            FLAGS.count)
  try:
    if FLAGS.layout:
      from_layout(info, fraction, name)
    else:
      from_shards(info, fraction, name)
  except validation.MissingFileError as e:  # No shards of the split.
    raise validation.MissingFileError(
        f'{e} Check --data_dir and --split.') from None


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
