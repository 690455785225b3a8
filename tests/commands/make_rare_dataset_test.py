"""make_rare_dataset: the files it writes, the shares it prints, its exit statuses."""

import os

import numpy as np
import tensorflow as tf

from official_seg.commands import make_rare_dataset
from official_seg.data import input_fn
from official_seg.data import tfexample
from official_seg.datasets import rare
from tests import testing_utils
from tests.commands import command_testing


def _label_pixels(data_dir, split):
  """int [256], the pixels of each label value in a split's shards."""
  decoder = tfexample.Decoder()
  records = tf.data.TFRecordDataset(input_fn.list_shards(data_dir, split))
  return sum(np.bincount(decoder.decode(r)['label'].numpy().ravel(),
                         minlength=256) for r in records)


class MakeRareDatasetTest(tf.test.TestCase):

  def test_writes_both_splits_and_prints_each_class_share(self):
    output = self.create_tempdir().full_path
    result = command_testing.run(make_rare_dataset, output_dir=output,
                                 num_train=3, num_val=2, num_shards=1,
                                 min_size=40, max_size=48)
    self.assertEqual(result.status, 0, result.stderr)
    self.assertCountEqual(os.listdir(output), [
        f'{split}-{kind}' for split in ('train', 'val') for kind in
        ('00000-of-00001.tfrecord', 'metadata.json', 'image-classes.json')])
    for split, count in (('train', 3), ('val', 2)):
      labels = testing_utils.shard_image_labels(output, split)
      self.assertLen(labels, count)
      pixels = _label_pixels(output, split)[:len(rare.CLASS_NAMES)]
      shares = ', '.join(f'{name} {100 * p / pixels.sum():.2f}%'
                         for name, p in zip(rare.CLASS_NAMES, pixels))
      self.assertIn(f'{split}: {count} images in 1 shards; {shares} of the '
                    'labelled pixels', result.stdout)

  def test_sizes_it_cannot_draw_exit_2_in_one_line(self):
    for flags, message in (
        (dict(min_size=60, max_size=50),
         '--min_size must not exceed --max_size.'),
        (dict(num_train=0), 'num_train'),
        (dict(min_size=8), 'min_size')):
      output = self.create_tempdir().full_path
      result = command_testing.run(make_rare_dataset, output_dir=output,
                                   **flags)
      self.assertEqual(result.status, 2, result.stderr)
      lines = result.stderr.strip().splitlines()
      self.assertEqual(lines[0], 'Invalid configuration:')
      self.assertLen(lines, 2)
      self.assertIn(message, lines[1])
      self.assertEmpty(os.listdir(output))


if __name__ == '__main__':
  tf.test.main()
