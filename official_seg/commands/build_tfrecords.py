"""Converts VOC, Cityscapes, ADE20K or folders of images and labels to shards.

  build_tfrecords --layout=voc \
    --input_dir=/data/VOCdevkit/VOC2012 --output_dir=data/pascal_voc
  build_tfrecords --layout=folders --image_dir=imgs \
    --label_dir=masks --dataset_gin=my_dataset.gin --output_dir=data/mine
  build_tfrecords --layout=folders --image_dir=imgs \
    --label_dir=colour_masks --palette=labelmap.txt --output_dir=data/mine
  build_tfrecords --layout=folders --image_dir=imgs \
    --label_dir=class_masks --class_masks --output_dir=data/mine

Bad data or flags print one line naming the file or flag and exit with 2.
"""

import functools
import os
import sys
import time

from absl import flags

# Only TensorFlow-free modules at the top: encoding workers re-import this
# file as their main module, and importing TensorFlow there would cost each
# of them seconds. main() imports the rest.
from official_seg import command_line
from official_seg import validation
from official_seg import layout_flags
from official_seg.data import layouts

FLAGS = flags.FlagValues()
flags.DEFINE_enum('layout', None, layouts.LAYOUTS,
                  'How the dataset is laid out.',
                  flag_values=FLAGS)
layout_flags.define_folder_flags(
    FLAGS, 'Dataset root (voc, cityscapes, ade20k).',
    'voc: label folder, e.g. SegmentationClassAug for train_aug; default '
    'SegmentationClassRaw or SegmentationClass.')
flags.DEFINE_string('output_dir', None, 'Where to write the shards.',
                    flag_values=FLAGS)
flags.DEFINE_list('splits', None, 'Splits to write; default train,val.',
                  flag_values=FLAGS)
flags.DEFINE_integer('num_shards', 0, 'Shards per split; 0 picks shards of '
                     'about 100 MB, at least 4.', flag_values=FLAGS)
flags.DEFINE_integer('num_workers', os.cpu_count(), 'Encoding processes.',
                     flag_values=FLAGS)
flags.DEFINE_bool('overwrite', False, 'Replace existing shards of a split.',
                  flag_values=FLAGS)
flags.DEFINE_string('dataset_gin', None,
                    'Gin file setting the dataset macros (NUM_CLASSES, '
                    'CLASS_NAMES, IGNORE_LABEL, DATA_DIR, TRAIN_SPLIT, '
                    'EVAL_SPLIT) as gin/datasets/*.gin do; default the '
                    'shipped file of the layout.', flag_values=FLAGS)
layout_flags.define_class_flags(FLAGS)
flags.mark_flags_as_required(['layout', 'output_dir'], flag_values=FLAGS)


def _palette_colours():
  """The `colour_masks.ColourMap` of --palette: a shipped name or a file.

  Raises:
    validation.ConfigurationError: neither a shipped palette nor a file,
      or --palette together with flags it replaces.
  """
  # pylint: disable=g-import-not-at-top
  from official_seg.datasets import colour_masks
  from official_seg.data import palettes
  from official_seg.datasets import shipped_masks
  from official_seg.runtime import gin_config
  # pylint: enable=g-import-not-at-top
  if FLAGS.dataset_gin or FLAGS.layout == 'cityscapes':
    raise validation.ConfigurationError(
        '--palette gives the classes, so it takes neither --dataset_gin nor '
        '--layout=cityscapes (whose labelIds PNGs need no palette).')
  name = FLAGS.palette
  if name in palettes.PALETTE_NAMES:
    info = gin_config.read_dataset([f'datasets/{name}.gin'])
    return shipped_masks.mask_colours(name, info)
  if not os.path.isfile(name):
    raise validation.ConfigurationError(
        f'--palette={name}: neither a shipped palette '
        f'({", ".join(palettes.PALETTE_NAMES)}) nor a file (a .json of class '
        "colours, or CVAT's labelmap.txt).")
  return colour_masks.read_palette_file(name, FLAGS.ignore_label)


def _info(**facts):
  """`DatasetInfo(**facts)`; its refusal of the facts is a bad input."""
  # pylint: disable-next=g-import-not-at-top
  from official_seg.data import dataset_info
  try:
    return dataset_info.DatasetInfo(**facts)
  except ValueError as e:
    raise validation.ConfigurationError(
        f'--num_classes, --ignore_label or --palette: {e}') from None


def dataset(colours=None):
  """The `DatasetInfo` of the palette, --dataset_gin, the layout's, or flags.

  Raises:
    validation.ConfigurationError: no such --dataset_gin; the folders layout
      without --dataset_gin, --num_classes or --palette; facts DatasetInfo
      refuses.
  """
  # pylint: disable-next=g-import-not-at-top
  from official_seg.runtime import gin_config
  if colours is not None:
    return _info(num_classes=len(colours.class_names),
                 class_names=colours.class_names,
                 ignore_label=colours.ignore_label, palette=colours.palette,
                 data_dir=FLAGS.output_dir)
  gin_file = FLAGS.dataset_gin or layouts.LAYOUT_GIN_FILES.get(FLAGS.layout)
  if gin_file:
    try:
      return gin_config.read_dataset([gin_file])
    except validation.ConfigurationError as e:
      if not FLAGS.dataset_gin:
        raise  # The layout's shipped file: its message names it.
      raise validation.ConfigurationError(
          f'--dataset_gin={gin_file}: {e}') from None
  if FLAGS.num_classes is None:
    raise validation.ConfigurationError(
        '--layout=folders needs --dataset_gin, --palette or '
                    '--num_classes (and --ignore_label).')
  return _info(num_classes=FLAGS.num_classes, ignore_label=FLAGS.ignore_label)


def _class_mask_names():
  """The classes of --class_masks (its folders), or None without it.

  Raises:
    validation.ConfigurationError: with another layout, --palette or
      --dataset_gin; a --label_dir without 1 to 7 class folders.
  """
  if not FLAGS.class_masks:
    return None
  # pylint: disable-next=g-import-not-at-top
  from official_seg.datasets import class_masks
  if FLAGS.layout != 'folders' or FLAGS.palette or FLAGS.dataset_gin:
    raise validation.ConfigurationError(
        '--class_masks gives the classes (the folders of --label_dir): it '
        'needs --layout=folders and takes neither --palette nor '
        '--dataset_gin.')
  return class_masks.class_names(FLAGS.label_dir)


def _split_pairs(split, names):
  """The pairs of a split; with class masks, checked for every class."""
  if names is None:
    return layouts.find_pairs(
        FLAGS.layout, split, FLAGS.input_dir, FLAGS.image_dir,
        FLAGS.label_dir, FLAGS.split_list_dir, FLAGS.label_subdir)
  # pylint: disable-next=g-import-not-at-top
  from official_seg.datasets import class_masks
  pairs = layouts.folder_pairs(FLAGS.image_dir,
                               os.path.join(FLAGS.label_dir, names[0]), split,
                               FLAGS.split_list_dir)
  return class_masks.mask_pairs(pairs, FLAGS.label_dir, names)


def _summary_text(summary, info, names):
  """The closing report of a split: its classes' pixels."""
  # pylint: disable=g-import-not-at-top
  from official_seg.datasets import class_masks
  from official_seg.datasets import convert
  # pylint: enable=g-import-not-at-top
  if names is None:
    return convert.format_summary(summary, info)
  return (f'{summary.split}: {summary.num_images} images in '
          f'{summary.num_shards} shards ({summary.pattern})\n' +
          class_masks.format_counts(summary.class_counts, names))


def convert_all(colours, names=None):
  """Converts each split, printing its summary; the written gin file's path."""
  # pylint: disable=g-import-not-at-top
  from official_seg.datasets import class_masks
  from official_seg.datasets import convert
  # pylint: enable=g-import-not-at-top
  info = dataset(colours)
  lookup = layouts.layout_lookup(FLAGS.layout, info.num_classes,
                                 info.ignore_label)
  valid_text = convert.valid_label_text(FLAGS.layout, info)
  encode_fn = names and functools.partial(
      class_masks.encode_pair, mask_dir=FLAGS.label_dir, names=names)
  for split in FLAGS.splits or ['train', 'val']:
    start = time.time()
    summary = convert.convert_split(
        _split_pairs(split, names), FLAGS.output_dir, split, lookup,
        valid_text, FLAGS.num_shards, FLAGS.num_workers, FLAGS.overwrite,
        colours=colours, unknown_to_ignore=FLAGS.unknown_colours_to_ignore,
        encode_fn=encode_fn)
    elapsed = time.time() - start
    print(_summary_text(summary, info, names))
    print(f'  {elapsed:.1f}s, {summary.num_images / elapsed:.1f} images/s '
          f'with {FLAGS.num_workers} workers')
  if colours is None and FLAGS.layout == 'folders' and not FLAGS.dataset_gin:
    colours = convert.classes_of(info, FLAGS.label_dir)
  return colours and convert.write_dataset_gin(
      colours, FLAGS.output_dir, class_masks.GIN_LINES if names else ())


def convert_dataset():
  """Converts the dataset of the parsed flags, printing each split's
  summary; the dataset gin file written, or None (a --dataset_gin or a
  shipped layout's file describes the shards).

  Raises:
    validation.ConfigurationError: a flag, file or input it cannot use
      (`layouts.DatasetError` for the data, naming the file).
  """
  # pylint: disable-next=g-import-not-at-top
  from official_seg.data import storage
  storage.check_output('--output_dir', FLAGS.output_dir, folder=True)
  colours = _palette_colours() if FLAGS.palette else None
  names = _class_mask_names()
  if names:
    # pylint: disable-next=g-import-not-at-top
    from official_seg.datasets import class_masks
    colours = class_masks.colour_map(FLAGS.label_dir, names)
  return convert_all(colours, names)


def _main(argv):
  """Converts the splits (`convert_dataset`)."""
  del argv  # The program alone (command_line.run).
  gin_path = convert_dataset()
  if gin_path:
    print(f'Wrote {gin_path}; train with\n  train_and_eval '
          f'--gin_file=gin/experiments/quickstart.gin --gin_file={gin_path} '
          '--model_dir=/tmp/mine')


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
