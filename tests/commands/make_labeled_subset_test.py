"""make_labeled_subset: shards, lists, errors; one run as a process."""

import os
from unittest import mock

import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.commands import make_labeled_subset
from official_seg.data import input_fn
from official_seg.data import layouts
from official_seg.data import split_metadata
from official_seg.data import tfexample
from official_seg.datasets import subsets
from tests import testing_utils
from tests.commands import command_testing

_CLASSES = ('background', 'disk', 'box', 'triangle')


def _names(data_dir, split):
  """The sorted record filenames of a split."""
  names = []
  for path in input_fn.list_shards(data_dir, split):
    for record in tf.compat.v1.io.tf_record_iterator(path):
      feature = tf.train.Example.FromString(record).features.feature
      names.append(feature[tfexample.IMAGE_FILENAME].bytes_list.value[0])
  return sorted(name.decode() for name in names)


class MakeLabeledSubsetTest(testing_utils.TinyDataTestCase):

  num_train = 16
  num_val = 1

  def _run(self, **flags):
    return command_testing.run(make_labeled_subset, **flags)

  def test_writes_a_split_reports_it_and_is_deterministic(self):
    flags = dict(gin_file=['gin/datasets/synthetic.gin'],
                 gin_param=[f"DATA_DIR = '{self.data_dir}'"], fraction='1/4',
                 seed=3)
    result = self._run(complement=True, **flags)
    self.assertEqual(result.status, 0, result.stderr)
    self.assertIn('Wrote split train_1_4: 4 of 16 images of train (fraction '
                  '1/4, seed 3) in 2 shards', result.stdout)
    self.assertIn('Wrote split train_1_4_rest: the other 12 images in 2 '
                  'shards', result.stdout)
    self.assertIn("TRAIN_SPLIT='train_1_4'", result.stdout)
    self.assertIn("UNLABELED_SPLIT='train_1_4_rest'", result.stdout)
    chosen = _names(self.data_dir, 'train_1_4')
    self.assertLen(chosen, 4)
    full = subsets.read_shards(self.data_dir, 'train')
    self.assertContainsSubset(chosen, full.names)
    self.assertEqual(sorted(chosen + _names(self.data_dir, 'train_1_4_rest')),
                     full.names)
    rows = [full.names.index(name) for name in chosen]
    presence = subsets.class_presence(full.label_counts, 4, 255)
    for cls, name in enumerate(_CLASSES):
      self.assertRegex(result.stdout,
                       rf'{cls} {name}\s+{presence[rows, cls].sum()}\s.*'
                       rf'\s{presence[:, cls].sum()}\s')
    self.assertEqual(
        split_metadata.read(self.data_dir, 'train_1_4')['num_images'], 4)
    # The same seed again: the same images, now in one shard.
    again = self._run(overwrite=True, num_shards=1, **flags)
    self.assertEqual(again.status, 0, again.stderr)
    self.assertEqual(_names(self.data_dir, 'train_1_4'), chosen)
    self.assertLen(input_fn.list_shards(self.data_dir, 'train_1_4'), 1)

  def test_a_missing_split_names_the_pattern_and_the_flags(self):
    # A bad --fraction stops the tool the same way, with the message of
    # subsets.parse_fraction (tests/datasets/subsets_test.py).
    result = self._run(data_dir=self.data_dir, split='trian', num_classes=4,
                       count=2)
    self.assertEqual(result.status, 2)
    self.assertIn(f'{self.data_dir}/trian-?????-of-?????.tfrecord',
                  result.stderr)
    self.assertIn('--split', result.stderr)

  def test_a_folder_dataset_gets_a_split_list(self):
    root = self.create_tempdir().full_path
    rng = np.random.default_rng(5)
    for folder in ('img', 'mask'):
      os.makedirs(os.path.join(root, folder))
    for index in range(6):
      label = np.zeros((5, 4), np.uint8)
      label[0, 0] = 1 + index % 2  # Class 2 in three images of six.
      Image.fromarray(label).save(f'{root}/mask/s{index}.png')
      Image.fromarray(rng.integers(0, 256, (5, 4, 3), dtype=np.uint8)).save(
          f'{root}/img/s{index}.png')
    result = self._run(layout='folders', image_dir=f'{root}/img',
                       label_dir=f'{root}/mask', split='all', num_classes=3,
                       count=2, output_list_dir=f'{root}/lists')
    self.assertEqual(result.status, 0, result.stderr)
    self.assertIn(f'Wrote {root}/lists/all_2.txt: 2 of 6 images of all',
                  result.stdout)
    self.assertIn(f'--splits=all_2 --split_list_dir={root}/lists',
                  result.stdout)
    pairs = layouts.folder_pairs(f'{root}/img', f'{root}/mask', 'all_2',
                                 f'{root}/lists')
    stems = sorted(pair.name[:-len('.png')] for pair in pairs)
    self.assertLen(stems, 2)
    # Both foreground classes occur: one image of odd and one of even index.
    self.assertEqual(sorted(int(s[1:]) % 2 for s in stems), [0, 1])

  def test_an_output_list_dir_that_is_a_file_is_named_before_any_work(self):
    # A process: the exit status and stderr that the user sees.
    root = self.create_tempdir().full_path
    for folder in ('img', 'mask'):
      os.makedirs(os.path.join(root, folder))
    with open(f'{root}/lists', 'w') as f:
      f.write('not a folder')
    result = command_testing.run_process(
        make_labeled_subset, layout='folders', image_dir=f'{root}/img',
        label_dir=f'{root}/mask', split='all', num_classes=3, count=2,
        output_list_dir=f'{root}/lists')
    self.assertEqual(result.returncode, 2, result.stderr)
    self.assertNotIn('Traceback', result.stderr)
    self.assertEqual(result.stderr.splitlines()[-2:], [
        'Invalid configuration:',
        f'--output_list_dir={root}/lists is a file; give a folder to write.'])

  def test_flag_mistakes_exit_2_and_a_bug_keeps_its_traceback(self):
    flags = dict(gin_file=['gin/datasets/synthetic.gin'],
                 gin_param=[f"DATA_DIR = '{self.data_dir}'"])
    for extra, line in (
        (dict(fraction='a/b'), "--fraction='a/b' is not a fraction in (0, 1]"),
        (dict(fraction='1/4', count=2), 'Give exactly one of --fraction and '
         '--count.'),
        (dict(fraction='1/4', name='train'), "--name='train' is the split "
         'read')):
      result = self._run(**flags, **extra)
      self.assertEqual(result.status, 2, result.stderr)
      self.assertEqual(result.stderr.splitlines()[0], 'Invalid configuration:')
      self.assertStartsWith(result.stderr.splitlines()[1], line)

    def broken(*args, **kwargs):
      raise ValueError('an injected bug inside library code')
    self.enter_context(mock.patch.object(subsets, 'select', broken))
    result = self._run(fraction='1/4', **flags)
    self.assertEqual(result.status, 1)
    self.assertIn('Traceback (most recent call last)', result.stderr)
    self.assertIn('ValueError: an injected bug inside library code',
                  result.stderr)
    self.assertStartsWith(result.stderr.splitlines()[-1], 'This is a bug')

  def test_a_voc_list_goes_beside_the_others_with_voc_class_names(self):
    root = self.create_tempdir().full_path
    rng = np.random.default_rng(6)
    for folder in ('JPEGImages', 'SegmentationClassRaw',
                   os.path.join('ImageSets', 'Segmentation')):
      os.makedirs(os.path.join(root, folder))
    stems = [f'2007_00000{i}' for i in range(4)]
    for index, stem in enumerate(stems):
      label = np.zeros((6, 5), np.uint8)
      label[1:3, 1:3] = 15 if index < 2 else 19  # person, train
      Image.fromarray(label).save(f'{root}/SegmentationClassRaw/{stem}.png')
      Image.fromarray(rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)).save(
          f'{root}/JPEGImages/{stem}.jpg')
    with open(f'{root}/ImageSets/Segmentation/train.txt', 'w') as f:
      f.write(''.join(f'{stem}\n' for stem in stems))
    result = self._run(layout='voc', input_dir=root, split='train',
                       fraction='1/2', seed=8888)
    self.assertEqual(result.status, 0, result.stderr)
    list_path = f'{root}/ImageSets/Segmentation/train_1_2.txt'
    self.assertIn(f'Wrote {list_path}: 2 of 4 images of train', result.stdout)
    self.assertRegex(result.stdout, r'15 person\s+1\s+50.0%\s+2\s+50.0%')
    self.assertRegex(result.stdout, r'19 train\s+1\s+50.0%\s+2\s+50.0%')
    self.assertIn('--layout=voc --splits=train_1_2', result.stdout)
    pairs = layouts.voc_pairs(root, 'train_1_2')
    self.assertLen(pairs, 2)
    self.assertContainsSubset(
        [os.path.basename(pair.label)[:-len('.png')] for pair in pairs], stems)


if __name__ == '__main__':
  tf.test.main()
