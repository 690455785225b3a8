"""Tests for labeled subsets: sizes, the class-balanced draw, shards, lists."""

import fractions
import os

from absl.testing import parameterized
import gin
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.data import input_fn
from official_seg.data import image_classes
from official_seg.data import layouts
from official_seg.data import split_metadata
from official_seg.data import tfexample
from official_seg.datasets import subsets
from official_seg.datasets import synthetic
from tests import testing_utils


def _rare_classes(num_images, num_rare, num_classes):
  """Presence where class 0 is everywhere and class 1+i only in image 7*i+3."""
  presence = np.zeros((num_images, num_classes), bool)
  presence[:, 0] = True
  for i in range(num_rare):
    presence[7 * i + 3, 1 + i] = True
  return presence


def _records(data_dir, split):
  """{filename: tf.train.Example} of every record of a split."""
  out = {}
  for record in tf.data.TFRecordDataset(input_fn.list_shards(data_dir, split)):
    example = tf.train.Example.FromString(record.numpy())
    name = example.features.feature[tfexample.IMAGE_FILENAME].bytes_list
    out[name.value[0].decode()] = example
  return out


class SizeTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(('1/16', 1, 16), ('1/8', 1, 8), ('0.25', 1, 4),
                            (' 1/2 ', 1, 2), ('3/4', 3, 4), ('1', 1, 1))
  def test_parse_fraction(self, text, numerator, denominator):
    self.assertEqual(subsets.parse_fraction(text),
                     fractions.Fraction(numerator, denominator))

  @parameterized.parameters('abc', '0', '3/2', '1/0', '-1/4', '')
  def test_a_bad_fraction_names_the_flag(self, text):
    with self.assertRaisesRegex(ValueError, '--fraction'):
      subsets.parse_fraction(text)

  # The synthetic train split, VOC train (PseudoSeg's 92, 183, 366, 732) and
  # Cityscapes train (UniMatch's 372 for 1/8).
  @parameterized.parameters((400, 16, 25), (400, 8, 50), (1464, 16, 92),
                            (1464, 8, 183), (1464, 4, 366), (1464, 2, 732),
                            (2975, 8, 372))
  def test_fraction_sizes(self, num_images, denominator, expected):
    self.assertEqual(
        subsets.subset_size(num_images, fractions.Fraction(1, denominator)),
        expected)

  def test_count_and_errors(self):
    self.assertEqual(subsets.subset_size(10, count=10), 10)
    with self.assertRaisesRegex(ValueError, '--count=11 is outside 1-10'):
      subsets.subset_size(10, count=11)
    with self.assertRaisesRegex(ValueError, '--fraction=1/16 of 7 images'):
      subsets.subset_size(7, fractions.Fraction(1, 16))
    with self.assertRaisesRegex(ValueError, 'exactly one of --fraction and'):
      subsets.subset_size(10, fractions.Fraction(1, 2), 3)

  def test_default_names(self):
    self.assertEqual(subsets.default_name('train', fractions.Fraction(1, 16)),
                     'train_1_16')
    self.assertEqual(subsets.default_name('train_aug', count=92),
                     'train_aug_92')


class SelectTest(tf.test.TestCase, parameterized.TestCase):

  def test_class_presence_leaves_out_the_ignore_label(self):
    counts = np.zeros((3, 256), np.int64)
    counts[0, [0, 2, 255]] = 5
    counts[1, [1, 3]] = 1
    counts[2, 4] = 9  # Not a class of a 4-class dataset.
    np.testing.assert_array_equal(
        subsets.class_presence(counts, 4, 255),
        [[1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 0, 0]])
    # ADE20K-style: class 0 is the ignore label and counts nowhere.
    np.testing.assert_array_equal(
        subsets.class_presence(counts, 4, 0),
        [[0, 0, 1, 0], [0, 1, 0, 1], [0, 0, 0, 0]])

  def test_a_seed_gives_one_subset_and_seeds_differ(self):
    presence = np.random.default_rng(0).random((60, 5)) < 0.3
    first = subsets.select(presence, 9, seed=4)
    np.testing.assert_array_equal(first.indices,
                                  subsets.select(presence, 9, seed=4).indices)
    others = {tuple(subsets.select(presence, 9, seed=s).indices)
              for s in range(5, 10)}
    self.assertNotIn(tuple(first.indices), others)
    self.assertLen(others, 5)

  @parameterized.parameters(1, 5, 30, 60)
  def test_size_and_a_subset_of_the_split(self, size):
    presence = np.random.default_rng(1).random((60, 4)) < 0.5
    indices = subsets.select(presence, size, seed=0).indices
    self.assertLen(indices, size)
    self.assertLen(set(indices.tolist()), size)
    self.assertTrue(np.all(np.diff(indices) > 0))
    self.assertTrue(np.all((indices >= 0) & (indices < 60)))

  def test_a_random_draw_holds_every_class(self):
    presence = np.random.default_rng(2).random((200, 6)) < 0.1
    subset = subsets.select(presence, 20, seed=0)
    self.assertGreaterEqual(subset.draws, 1)
    self.assertEqual(subset.missing, [])
    np.testing.assert_array_equal(presence[subset.indices].any(axis=0),
                                  presence.any(axis=0))

  def test_the_greedy_cover_finds_classes_no_draw_finds(self):
    # 5 rare classes in 5 images of 200: a draw of 6 holds them all with
    # probability 1/C(200, 5) * C(195, 1) ~ 8e-8.
    presence = _rare_classes(200, 5, 6)
    subset = subsets.select(presence, 6, seed=0)
    self.assertEqual(subset.draws, 0)
    self.assertEqual(subset.missing, [])
    self.assertContainsSubset([3, 10, 17, 24, 31], subset.indices.tolist())
    self.assertLen(subset.indices, 6)

  def test_classes_that_do_not_fit_are_reported_missing(self):
    presence = _rare_classes(40, 5, 6)
    subset = subsets.select(presence, 3, seed=0, max_draws=10)
    self.assertLen(subset.indices, 3)
    covered = presence[subset.indices].any(axis=0)
    self.assertEqual(subset.missing, np.flatnonzero(~covered).tolist())
    self.assertLen(subset.missing, 2)

  def test_the_report_counts_images_per_class(self):
    counts = np.zeros((4, 256), np.int64)
    counts[:, 0] = 1
    counts[[1, 2], 1] = 3
    labels = subsets.SplitLabels(['a', 'b', 'c', 'd'], np.ones((4, 2)),
                                 counts, np.arange(4))
    subset = subsets.Subset(np.array([0, 2]), 1, [])
    report = subsets.format_report(labels, subset, ['bg', 'thing'], 255)
    self.assertRegex(report, r'0 bg\s+2\s+100.0%\s+4\s+100.0%')
    self.assertRegex(report, r'1 thing\s+1\s+50.0%\s+2\s+50.0%')
    self.assertIn('accepted at draw 1', report)


class ShardsTest(testing_utils.TinyDataTestCase):

  num_train = 12

  def test_the_subset_reads_back_as_a_split_with_its_metadata(self):
    labels = subsets.read_shards(self.data_dir, 'train')
    source = _records(self.data_dir, 'train')
    self.assertEqual(labels.names, sorted(source))
    indices = np.array([1, 4, 5, 11])
    written = subsets.write_shards(self.data_dir, 'train', 'train_4', labels,
                                   indices, num_shards=3)
    self.assertEqual(written, 4)
    self.assertLen(input_fn.list_shards(self.data_dir, 'train_4'), 3)
    subset = _records(self.data_dir, 'train_4')
    self.assertEqual(sorted(subset), [labels.names[i] for i in indices])
    for name, example in subset.items():
      self.assertEqual(example, source[name])
    decoder = tfexample.Decoder()
    files = input_fn.list_shards(self.data_dir, 'train_4')
    for record in tf.data.TFRecordDataset(files):
      decoded = decoder.decode(record)
      self.assertEqual(decoded['label'].shape[:2], decoded['image'].shape[:2])
    self.assertEqual(split_metadata.read(self.data_dir, 'train_4'),
                     split_metadata.compute(self.data_dir, 'train_4'))
    self.assertEqual(image_classes.read(self.data_dir, 'train_4', 'S'),
                     testing_utils.shard_image_labels(self.data_dir,
                                                      'train_4'))

  def test_rows_follow_names_not_shards(self):
    other = self.create_tempdir().full_path
    synthetic.write_dataset(other, {'train': self.num_train, 'val': 1},
                            num_shards=5, image_format='png',
                            **testing_utils.TINY_SIZES)
    ours = subsets.read_shards(self.data_dir, 'train')
    theirs = subsets.read_shards(other, 'train')
    self.assertEqual(ours.names, theirs.names)
    np.testing.assert_array_equal(ours.label_counts, theirs.label_counts)
    self.assertNotEqual(ours.positions.tolist(), theirs.positions.tolist())

  def test_an_existing_subset_or_the_split_itself_is_refused(self):
    labels = subsets.read_shards(self.data_dir, 'train')
    subsets.write_shards(self.data_dir, 'train', 'few', labels, [0, 1], 2)
    with self.assertRaisesRegex(FileExistsError, '--overwrite.*--name'):
      subsets.check_target(self.data_dir, 'train', 'few', overwrite=False)
    subsets.check_target(self.data_dir, 'train', 'few', overwrite=True)
    with self.assertRaisesRegex(ValueError, "--name='train' is the split"):
      subsets.check_target(self.data_dir, 'train', 'train', overwrite=True)
    # A rewrite with fewer shards leaves none of the earlier ones behind.
    subsets.write_shards(self.data_dir, 'train', 'few', labels, [2], 2)
    self.assertLen(input_fn.list_shards(self.data_dir, 'few'), 1)
    self.assertLen(_records(self.data_dir, 'few'), 1)


class ListTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_labels_of_pairs_by_stem_and_the_list_reads_back(self):
    root = self.create_tempdir().full_path
    rng = np.random.default_rng(3)
    os.makedirs(os.path.join(root, 'img'))
    os.makedirs(os.path.join(root, 'mask'))
    expected = {}
    for stem in ('b', 'a', 'c'):
      label = rng.choice(np.array([0, 2, 255], np.uint8), size=(6, 5))
      expected[stem] = np.bincount(label.ravel(), minlength=256)
      Image.fromarray(label).save(os.path.join(root, 'mask', f'{stem}.png'))
      Image.fromarray(rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)).save(
          os.path.join(root, 'img', f'{stem}.png'))
    pairs = layouts.folder_pairs(f'{root}/img', f'{root}/mask', 'train')
    labels = subsets.read_pairs(pairs, layouts.label_lookup(3, 255), 'text')
    self.assertEqual(labels.names, ['a', 'b', 'c'])
    np.testing.assert_array_equal(
        labels.label_counts, [expected[s] for s in ('a', 'b', 'c')])
    subsets.write_list(f'{root}/lists/train_2.txt', ['a', 'c'])
    pairs = layouts.folder_pairs(f'{root}/img', f'{root}/mask', 'train_2',
                                 f'{root}/lists')
    self.assertEqual([p.name for p in pairs], ['a.png', 'c.png'])

  def test_a_label_value_of_no_class_names_the_file(self):
    root = self.create_tempdir().full_path
    Image.fromarray(np.full((4, 4), 7, np.uint8)).save(f'{root}/x.png')
    pair = layouts.Pair('x.png', f'{root}/x.png', f'{root}/x.png')
    with self.assertRaisesRegex(layouts.DatasetError, f'{root}/x.png'):
      subsets.read_pairs([pair], layouts.label_lookup(3, 255), 'classes 0-2')


if __name__ == '__main__':
  tf.test.main()
