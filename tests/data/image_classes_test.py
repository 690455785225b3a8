"""Tests for the label values of each image kept beside a split's shards."""

import json
import os

import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import image_classes
from official_seg.data import split_metadata

IGNORE = 255


class ImageClassesTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.data_dir = self.create_tempdir().full_path
    rng = np.random.default_rng(0)
    self.labels = {'b.png': rng.choice([0, 2, IGNORE], (5, 6)),
                   'a.png': rng.choice([0, 1], (4, 4)),
                   'c.png': np.full((3, 3), 7)}

  def _tally(self, labels, filenames=True):
    tally = split_metadata.Tally()
    for name, label in labels:
      tally.add(*label.shape, np.bincount(label.ravel(), minlength=256),
                name if filenames else None)
    return tally

  def test_the_tally_writes_each_images_values_beside_the_metadata(self):
    split_metadata.write_tally(self.data_dir, 'train',
                               self._tally(self.labels.items()))
    expected = {name: sorted(np.unique(label).tolist())
                for name, label in self.labels.items()}
    self.assertEqual(image_classes.read(self.data_dir, 'train', 'S'),
                     expected)
    with open(image_classes.path(self.data_dir, 'train')) as f:
      self.assertEqual(list(json.load(f)['image_labels']),
                       ['a.png', 'b.png', 'c.png'])
    self.assertEqual(split_metadata.read(self.data_dir, 'train')['num_images'],
                     3)

  def test_records_of_one_name_share_the_union_of_their_values(self):
    tally = self._tally([('x.png', np.array([[0, 3]])),
                         ('x.png', np.array([[5, 3]]))])
    self.assertEqual(tally.image_labels, {'x.png': [0, 3, 5]})

  def test_a_tally_without_filenames_writes_no_file(self):
    split_metadata.write_tally(self.data_dir, 'train',
                               self._tally(self.labels.items(), False))
    self.assertTrue(os.path.exists(split_metadata.path(self.data_dir,
                                                       'train')))
    self.assertFalse(os.path.exists(image_classes.path(self.data_dir,
                                                       'train')))

  def test_a_missing_file_names_itself_the_setting_and_the_command(self):
    with self.assertRaises(validation.MissingFileError) as raised:
      image_classes.read(self.data_dir, 'train', 'the setting')
    message = str(raised.exception)
    self.assertNotIn('\n', message)
    self.assertStartsWith(
        message, f'the setting needs {self.data_dir}/train-image-classes.json')
    self.assertIn(image_classes.WRITE_COMMAND, message)

  def test_a_malformed_file_is_named(self):
    with open(image_classes.path(self.data_dir, 'train'), 'w') as f:
      f.write('{"image_labels": {"a.png": ["x"]}}')
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'train-image-classes.json does not map'):
      image_classes.read(self.data_dir, 'train', 'S')

  def test_presence_leaves_out_the_ignore_label_and_values_past_the_classes(
      self):
    image_labels = {'b': [0, 2, IGNORE], 'a': [1], 'c': [7]}
    names, presence = image_classes.presence(image_labels, IGNORE, 3)
    self.assertEqual(names, ['a', 'b', 'c'])
    self.assertAllEqual(presence, [[0, 1, 0], [1, 0, 1], [0, 0, 0]])
    _, seen = image_classes.presence(image_labels, IGNORE)
    self.assertEqual(seen.shape, (3, 8))
    self.assertTrue(seen[2, 7])
    # ADE20K's ignore label 0 is no class either.
    _, ade = image_classes.presence(image_labels, 0, 3)
    self.assertFalse(ade[:, 0].any())


if __name__ == '__main__':
  tf.test.main()
