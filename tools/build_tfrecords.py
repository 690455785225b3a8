"""Converts VOC, Cityscapes, ADE20K or folders of images and labels to shards.

  python tools/build_tfrecords.py --layout=voc \
    --input_dir=/data/VOCdevkit/VOC2012 --output_dir=data/pascal_voc
  python tools/build_tfrecords.py --layout=folders --image_dir=imgs \
    --label_dir=masks --dataset_gin=my_dataset.gin --output_dir=data/mine
"""

import os
import sys
import time

from absl import app
from absl import flags

# Only TensorFlow-free modules at the top: encoding workers re-import this
# file as their main module, and importing TensorFlow there would cost each
# of them seconds. main() imports the rest.
from official_seg.data import layouts

flags.DEFINE_enum('layout', None, layouts.LAYOUTS, 'How the dataset is laid out.')
flags.DEFINE_string('input_dir', None, 'Dataset root (voc, cityscapes, ade20k).')
flags.DEFINE_string('output_dir', None, 'Where to write the shards.')
flags.DEFINE_list('splits', None, 'Splits to write; default train,val.')
flags.DEFINE_integer('num_shards', 0, 'Shards per split; 0 picks shards of '
                     'about 100 MB, at least 4.')
flags.DEFINE_integer('num_workers', os.cpu_count(), 'Encoding processes.')
flags.DEFINE_bool('overwrite', False, 'Replace existing shards of a split.')
flags.DEFINE_string('image_dir', None, 'folders: the images.')
flags.DEFINE_string('label_dir', None, 'folders: PNG labels, same stems.')
flags.DEFINE_string('split_list_dir', None,
                    'folders: optional <split>.txt lists of stems.')
flags.DEFINE_string('label_subdir', None,
                    'voc: label folder, e.g. SegmentationClassAug for '
                    'train_aug; default SegmentationClassRaw or '
                    'SegmentationClass.')
flags.DEFINE_string('dataset_gin', None,
                    'Gin file setting the dataset macros (NUM_CLASSES, '
                    'CLASS_NAMES, IGNORE_LABEL, DATA_DIR, TRAIN_SPLIT, '
                    'EVAL_SPLIT) as gin/datasets/*.gin do; default the '
                    'shipped file of the layout.')
flags.DEFINE_integer('num_classes', None,
                     'folders without --dataset_gin: number of classes.')
flags.DEFINE_integer('ignore_label', 255,
                     'folders without --dataset_gin: the ignore label.')
flags.mark_flags_as_required(['layout', 'output_dir'])
FLAGS = flags.FLAGS


def dataset():
  """The `DatasetInfo` of --dataset_gin, the layout's file, or the flags.

  Raises:
    app.UsageError: the folders layout without --dataset_gin or
      --num_classes.
  """
  # pylint: disable=g-import-not-at-top
  from official_seg.data import dataset_info
  from official_seg.runtime import gin_config
  # pylint: enable=g-import-not-at-top
  gin_file = FLAGS.dataset_gin or layouts.LAYOUT_GIN_FILES.get(FLAGS.layout)
  if gin_file:
    return gin_config.read_dataset([gin_file])
  if FLAGS.num_classes is None:
    raise app.UsageError('--layout=folders needs --dataset_gin or '
                         '--num_classes (and --ignore_label).')
  return dataset_info.DatasetInfo(num_classes=FLAGS.num_classes,
                                  ignore_label=FLAGS.ignore_label)


def main(argv):
  del argv  # Unused.
  from official_seg.data import convert  # pylint: disable=g-import-not-at-top
  info = dataset()
  lookup = layouts.layout_lookup(FLAGS.layout, info.num_classes,
                                 info.ignore_label)
  valid_text = convert.valid_label_text(FLAGS.layout, info)
  try:
    for split in FLAGS.splits or ['train', 'val']:
      start = time.time()
      pairs = layouts.find_pairs(
          FLAGS.layout, split, FLAGS.input_dir, FLAGS.image_dir,
          FLAGS.label_dir, FLAGS.split_list_dir, FLAGS.label_subdir)
      summary = convert.convert_split(
          pairs, FLAGS.output_dir, split, lookup, valid_text, FLAGS.num_shards,
          FLAGS.num_workers, FLAGS.overwrite)
      elapsed = time.time() - start
      print(convert.format_summary(summary, info))
      print(f'  {elapsed:.1f}s, {summary.num_images / elapsed:.1f} images/s '
            f'with {FLAGS.num_workers} workers')
  except layouts.DatasetError as e:
    print(f'build_tfrecords: {e}', file=sys.stderr)
    return 1
  return 0


if __name__ == '__main__':
  app.run(main)
