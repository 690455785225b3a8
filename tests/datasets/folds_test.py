"""Folds stratified by class presence, written as splits, and their record."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.datasets import folds
from official_seg.datasets import subsets
from tests import testing_utils


def _single_label(counts):
  """bool [n, C]: counts[c] images holding class c alone."""
  classes = np.repeat(np.arange(len(counts)), counts)
  return np.eye(len(counts), dtype=bool)[classes]


class StratifiedFoldsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((3, [7, 5, 2, 9]), (5, [11, 3, 6]), (2, [1, 8]))
  def test_one_class_per_image_gives_each_fold_its_share(self, k, counts):
    presence = _single_label(counts)
    fold = folds.stratified_folds(presence, k, seed=0)
    for cls, count in enumerate(counts):
      per_fold = np.bincount(fold[presence[:, cls]], minlength=k)
      self.assertContainsSubset(set(per_fold), {count // k, -(-count // k)})
    sizes = np.bincount(fold, minlength=k)
    self.assertLessEqual(sizes.max() - sizes.min(), len(counts))

  def test_a_class_of_k_images_has_one_in_each_fold(self):
    rng = np.random.default_rng(1)
    presence = rng.random((40, 5)) < 0.5
    presence[:, 4] = False
    presence[rng.choice(40, 4, replace=False), 4] = True
    fold = folds.stratified_folds(presence, 4, seed=2)
    self.assertAllEqual(np.sort(fold[presence[:, 4]]), [0, 1, 2, 3])
    # The classes come first; the sizes stay near n / K, not exactly on it.
    sizes = np.bincount(fold)
    self.assertEqual(sizes.sum(), 40)
    self.assertLessEqual(sizes.max() - sizes.min(), 2)

  def test_images_of_no_class_fill_the_smallest_folds(self):
    presence = np.zeros((6, 2), bool)
    presence[:3, 0] = True
    fold = folds.stratified_folds(presence, 3, seed=0)
    self.assertAllEqual(np.bincount(fold), [2, 2, 2])
    self.assertAllEqual(np.sort(fold[:3]), [0, 1, 2])

  def test_the_seed_fixes_the_folds(self):
    presence = np.random.default_rng(3).random((30, 4)) < 0.4
    first = folds.stratified_folds(presence, 3, seed=5)
    self.assertAllEqual(folds.stratified_folds(presence, 3, seed=5), first)
    self.assertNotAllEqual(folds.stratified_folds(presence, 3, seed=6), first)

  @parameterized.parameters(1, 5)
  def test_folds_outside_2_to_n_are_a_configuration_error(self, k):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                rf'--folds={k}: give 2 to 4 folds'):
      folds.stratified_folds(np.ones((4, 2), bool), k, seed=0)


class WriteFoldsTest(testing_utils.TinyDataTestCase):

  num_train = 9
  num_val = 1

  def test_each_image_is_evaluated_in_one_fold_and_trained_in_the_others(self):
    labels = subsets.read_shards(self.data_dir, 'train')
    fold = np.arange(9) % 3
    names = folds.write_folds(self.data_dir, 'train', labels, fold,
                              num_shards=2, overwrite=False)
    self.assertEqual(names[1], ('train_fold1of3_train', 'train_fold1of3_val'))
    for index, (train, val) in enumerate(names):
      held = [labels.names[i] for i in np.flatnonzero(fold == index)]
      rest = [labels.names[i] for i in np.flatnonzero(fold != index)]
      self.assertEqual(subsets.read_shards(self.data_dir, val).names, held)
      self.assertEqual(subsets.read_shards(self.data_dir, train).names, rest)
    with self.assertRaisesRegex(validation.OutputExistsError,
                                "split 'train_fold0of3_train'"):
      folds.write_folds(self.data_dir, 'train', labels, fold, 2, False)

  def test_the_record_of_the_folds_keeps_their_seed(self):
    folds.write_manifest(self.data_dir, 'train', ['a.png', 'b.png'],
                         np.array([1, 0]), seed=4)
    self.assertEqual(folds.read_manifest(self.data_dir, 'train', 2, 4),
                     {'a.png': 1, 'b.png': 0})
    self.assertIsNone(folds.read_manifest(self.data_dir, 'train', 3, 4))
    with self.assertRaisesRegex(validation.ConfigurationError,
                                r'train-folds2.json: .* drawn with --seed=4, '
                                'not 5'):
      folds.read_manifest(self.data_dir, 'train', 2, 5)

  def test_the_table_counts_images_per_class_in_each_fold(self):
    presence = np.array([[1, 0], [1, 1], [0, 1]], bool)
    table = folds.format_folds(presence, np.array([0, 1, 1]), ['bg', 'cat'])
    self.assertEqual(table.split('\n'), ['fold  images  bg  cat',
                                         '   0       1   1    0',
                                         '   1       2   1    2'])


if __name__ == '__main__':
  tf.test.main()
