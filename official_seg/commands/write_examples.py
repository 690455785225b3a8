"""Writes the first examples of DeepLab shards as image and label files.

  write_examples --input='data/synthetic/val-*' \
    --output_dir=/tmp/examples --count=4

Writes images/<stem>.jpg or .png (the stored bytes, unchanged) and
labels/<stem>.png, <stem> being the example's filename without its folder and
extension: the layout predict_images reads with --input and --label_dir.
"""

import os
import sys

from absl import flags
import tensorflow as tf

from official_seg import command_line
from official_seg import validation
from official_seg.data import storage
from official_seg.data import tfexample

FLAGS = flags.FlagValues()
flags.DEFINE_string('input', None, 'A glob of TFRecord shards.',
                    flag_values=FLAGS)
flags.DEFINE_string('output_dir', None, 'Where images/ and labels/ go.',
                    flag_values=FLAGS)
flags.DEFINE_integer('count', 4, 'How many examples, from the first shard on.',
                     flag_values=FLAGS)
flags.mark_flags_as_required(['input', 'output_dir'], flag_values=FLAGS)


def _stem(filename, index, taken):
  """The output name of an example: its filename's stem, made unique."""
  stem = os.path.splitext(os.path.basename(filename.decode('utf-8')))[0]
  if not stem or stem in taken:
    stem = f'{stem or "example"}_{index:04d}'
  taken.add(stem)
  return stem


def write_examples(pattern, output_dir, count):
  """Writes the first `count` examples of the shards matching `pattern`.

  Args:
    pattern: str, a glob of DeepLab-format shards.
    output_dir: str; images go to `images/`, labels to `labels/<stem>.png`.
    count: int, how many examples.

  Returns:
    list of the stems written, in the order of the shards.

  Raises:
    validation.MissingFileError: no shard matches `pattern` (--input).
    validation.ConfigurationError: `output_dir` (--output_dir) is a file,
      or lies under one.
    tf.errors.InvalidArgumentError: an example's image is not a JPEG or PNG,
      or its label not a PNG; names the example.
  """
  files = sorted(tf.io.gfile.glob(pattern))
  if not files:
    raise validation.MissingFileError(
        f'--input={pattern}: no TFRecord shards match it.')
  storage.check_output('--output_dir', output_dir, folder=True)
  for kind in ('images', 'labels'):
    tf.io.gfile.makedirs(os.path.join(output_dir, kind))
  examples = tf.data.TFRecordDataset(files).take(count).map(
      tfexample.Decoder().encoded)
  stems = []
  for index, (image, label, filename) in enumerate(examples):
    stems.append(_stem(filename.numpy(), index, set(stems)))
    extension = '.png' if tfexample.is_png(image) else '.jpg'
    for kind, data, suffix in (('images', image, extension),
                               ('labels', label, '.png')):
      path = os.path.join(output_dir, kind, stems[-1] + suffix)
      with tf.io.gfile.GFile(path, 'wb') as f:
        f.write(data.numpy())
  return stems


def _main(argv):
  del argv  # The program alone (command_line.run).
  stems = write_examples(FLAGS.input, FLAGS.output_dir, FLAGS.count)
  print(f'Wrote {len(stems)} images and labels to {FLAGS.output_dir}')


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
