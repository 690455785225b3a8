"""tools/make_labeled_subset.py, run as a process: shards, lists, errors."""

import os
import subprocess
import sys

import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.data import input_fn
from official_seg.data import layouts
from official_seg.data import split_metadata
from official_seg.data import subsets
from tests import testing_utils

_TOOL = os.path.join(testing_utils.REPO, 'tools', 'make_labeled_subset.py')
_CLASSES = ('background', 'disk', 'box', 'triangle')


def _names(data_dir, split):
  """The record filenames of a split, as `subsets.read_shards` orders them."""
  return subsets.read_shards(data_dir, split).names


class MakeLabeledSubsetTest(testing_utils.TinyDataTestCase):

  num_train = 16
  num_val = 1

  def _run(self, *args):
    return subprocess.run([sys.executable, _TOOL, *args], capture_output=True,
                          text=True, cwd=testing_utils.REPO, check=False)

  def test_writes_a_split_reports_it_and_is_deterministic(self):
    flags = ['--gin_file=gin/datasets/synthetic.gin',
             f"--gin_param=DATA_DIR = '{self.data_dir}'", '--fraction=1/4',
             '--seed=3']
    result = self._run(*flags)
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertIn('Wrote split train_1_4: 4 of 16 images of train (fraction '
                  '1/4, seed 3) in 2 shards', result.stdout)
    self.assertIn("TRAIN_SPLIT='train_1_4'", result.stdout)
    chosen = _names(self.data_dir, 'train_1_4')
    self.assertLen(chosen, 4)
    full = subsets.read_shards(self.data_dir, 'train')
    self.assertContainsSubset(chosen, full.names)
    rows = [full.names.index(name) for name in chosen]
    presence = subsets.class_presence(full.label_counts, 4, 255)
    for cls, name in enumerate(_CLASSES):
      self.assertRegex(result.stdout,
                       rf'{cls} {name}\s+{presence[rows, cls].sum()}\s.*'
                       rf'\s{presence[:, cls].sum()}\s')
    self.assertEqual(
        split_metadata.read(self.data_dir, 'train_1_4')['num_images'], 4)
    # The same seed again: the same images, now in one shard.
    again = self._run(*flags, '--overwrite', '--num_shards=1')
    self.assertEqual(again.returncode, 0, again.stderr)
    self.assertEqual(_names(self.data_dir, 'train_1_4'), chosen)
    self.assertLen(input_fn.list_shards(self.data_dir, 'train_1_4'), 1)

  def test_a_missing_split_names_the_pattern_and_the_flags(self):
    # A bad --fraction stops the tool the same way, with the message of
    # subsets.parse_fraction (tests/data/subsets_test.py).
    result = self._run(f'--data_dir={self.data_dir}', '--split=trian',
                       '--num_classes=4', '--count=2')
    self.assertEqual(result.returncode, 1)
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
    result = self._run('--layout=folders', f'--image_dir={root}/img',
                       f'--label_dir={root}/mask', '--split=all',
                       '--num_classes=3', '--count=2',
                       f'--output_list_dir={root}/lists')
    self.assertEqual(result.returncode, 0, result.stderr)
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


if __name__ == '__main__':
  tf.test.main()
