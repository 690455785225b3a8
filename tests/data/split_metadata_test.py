"""Tests for split metadata: computed from shards, written, read back."""

import contextlib
import io
import json
import os
import re

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import split_metadata
from official_seg.data import tfexample

IGNORE = 255
# (height, width) of each image: the tallest and the widest differ.
_SIZES = ((20, 31), (37, 18), (25, 25), (9, 40))
_VALUES = (0, 2, 10, IGNORE)


def _encode(image, image_format):
  encode = tf.io.encode_jpeg if image_format == 'jpeg' else tf.io.encode_png
  return encode(image).numpy()


def _write_split(data_dir, split, formats, rng):
  """Writes one example per size; returns the label maps, uint8 [H, W] each."""
  labels, examples = [], []
  for index, (height, width) in enumerate(_SIZES):
    image_format = formats[index % len(formats)]
    image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    label = rng.choice(np.array(_VALUES, np.uint8), size=(height, width))
    labels.append(label)
    examples.append(tfexample.make_example(
        _encode(image, image_format), _encode(label[..., None], 'png'),
        f'{index}.{image_format}', image_format, height, width))
  tfexample.write_shards(examples, data_dir, split, 2)
  return labels


def _expected(split, labels):
  """The metadata of `labels`, from NumPy alone."""
  counts = np.bincount(np.concatenate([l.ravel() for l in labels]))
  return {
      'split': split,
      'num_images': len(labels),
      'max_height': max(l.shape[0] for l in labels),
      'max_width': max(l.shape[1] for l in labels),
      'label_histogram': {str(v): int(counts[v])
                          for v in np.flatnonzero(counts)},
  }


class SplitMetadataTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.data_dir = self.create_tempdir().full_path
    rng = np.random.default_rng(0)
    self.labels = {
        split: _write_split(self.data_dir, split, formats, rng)
        for split, formats in (('jpeg', ['jpeg']), ('png', ['png']),
                               ('mixed', ['png', 'jpeg']))}

  @parameterized.parameters('jpeg', 'png', 'mixed')
  def test_compute_matches_numpy(self, split):
    metadata = split_metadata.compute(self.data_dir, split)
    self.assertEqual(metadata, _expected(split, self.labels[split]))
    self.assertEqual((metadata['max_height'], metadata['max_width']),
                     (37, 40))

  def test_write_then_read_round_trips(self):
    metadata = split_metadata.compute(self.data_dir, 'mixed')
    written = split_metadata.write(self.data_dir, 'mixed', metadata)
    self.assertEqual(written,
                     os.path.join(self.data_dir, 'mixed-metadata.json'))
    self.assertEqual(split_metadata.path(self.data_dir, 'mixed'), written)
    self.assertEqual(split_metadata.read(self.data_dir, 'mixed'), metadata)
    self.assertEqual(os.listdir(self.data_dir).count('mixed-metadata.json'), 1)
    self.assertEmpty([n for n in os.listdir(self.data_dir)
                      if n.endswith('.tmp')])

  def test_file_is_the_line_with_label_values_in_numeric_order(self):
    metadata = split_metadata.compute(self.data_dir, 'png')
    text = split_metadata.line(metadata)
    self.assertNotIn('\n', text)
    self.assertEqual(json.loads(text), metadata)
    self.assertEqual(list(json.loads(text)), sorted(metadata))
    self.assertEqual(list(json.loads(text)['label_histogram']),
                     ['0', '2', '10', '255'])
    split_metadata.write(self.data_dir, 'png', metadata)
    with open(split_metadata.path(self.data_dir, 'png')) as f:
      self.assertEqual(f.read(), text + '\n')

  def test_a_saved_line_reads_back(self):
    metadata = split_metadata.compute(self.data_dir, 'jpeg')
    with open(split_metadata.path(self.data_dir, 'jpeg'), 'w') as f:
      f.write(split_metadata.line(metadata))
    self.assertEqual(split_metadata.read(self.data_dir, 'jpeg'), metadata)

  def test_channels_and_depth_of_a_tally_read_back(self):
    tally = split_metadata.Tally()
    tally.kind = (5, 16)
    tally.add(4, 6, np.bincount([0, 1, 1], minlength=256))
    split_metadata.write_tally(self.data_dir, 'tiff', tally)
    metadata = split_metadata.read(self.data_dir, 'tiff')
    self.assertEqual((metadata['channels'], metadata['bit_depth']), (5, 16))
    self.assertEqual(metadata, tally.metadata('tiff'))

  @parameterized.parameters(
      ((3, 8), (1, 8), (3, 8)), ((1, 8), (3, 8), (3, 8)),
      ((1, 8), (4, 8), None), ((3, 16), (3, 8), None), ((5, 16), (5, 16),
                                                         (5, 16)),
      (None, (1, 16), (1, 16)))
  def test_merged_kind(self, kind, other, expected):
    self.assertEqual(split_metadata.merged_kind(kind, other), expected)

  def test_read_of_a_missing_file_is_none(self):
    self.assertIsNone(split_metadata.read(self.data_dir, 'jpeg'))

  @parameterized.named_parameters(
      ('not_json', '{"split": "jpeg", '),
      ('binary', b'\xff\xfe\x00garbage'),
      ('not_an_object', '[1, 2]'),
      ('missing_key', '{"split": "jpeg", "num_images": 4, "max_height": 37, '
                      '"label_histogram": {}}'),
      ('wrong_type', '{"split": "jpeg", "num_images": 4, "max_height": "37", '
                     '"max_width": 40, "label_histogram": {}}'),
      ('bool_pixels', '{"split": "jpeg", "num_images": 4, "max_height": 37,'
                      ' "max_width": 40, "label_histogram": {"1": true}}'),
      ('bad_histogram', '{"split": "jpeg", "num_images": 4, "max_height": 37,'
                        ' "max_width": 40, "label_histogram": {"a": 1}}'),
      ('text_channels', '{"split": "jpeg", "num_images": 4, "max_height": 37,'
                        ' "max_width": 40, "label_histogram": {}, '
                        '"channels": "3", "bit_depth": 8}'))
  def test_a_corrupt_file_raises_naming_it(self, content):
    name = split_metadata.path(self.data_dir, 'jpeg')
    with open(name, 'wb' if isinstance(content, bytes) else 'w') as f:
      f.write(content)
    with self.assertRaisesRegex(validation.ConfigurationError,
                                re.escape(name)):
      split_metadata.read(self.data_dir, 'jpeg')

  def test_compute_of_a_missing_split_names_the_pattern(self):
    pattern = tfexample.shard_pattern(self.data_dir, 'test')
    with self.assertRaisesRegex(validation.MissingFileError,
                                re.escape(pattern)):
      split_metadata.compute(self.data_dir, 'test')

  def test_compute_names_an_example_whose_label_size_differs(self):
    image = _encode(np.zeros((8, 6, 3), np.uint8), 'png')
    label = _encode(np.zeros((8, 5, 1), np.uint8), 'png')
    tfexample.write_shards(
        [tfexample.make_example(image, label, 'odd.png', 'png', 8, 6)],
        self.data_dir, 'odd', 1)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, 'odd.png'):
      split_metadata.compute(self.data_dir, 'odd')

  def test_progress_counts_records_on_stderr(self):
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
      split_metadata.compute(self.data_dir, 'png', progress=True)
    self.assertIn(f'png: {len(_SIZES)}img', stderr.getvalue())
    quiet = io.StringIO()
    with contextlib.redirect_stderr(quiet):
      split_metadata.compute(self.data_dir, 'png')
    self.assertEmpty(quiet.getvalue())

  @parameterized.parameters((IGNORE, 11), (10, 256), (0, 256))
  def test_num_classes_seen(self, ignore_label, expected):
    metadata = split_metadata.compute(self.data_dir, 'mixed')
    self.assertEqual(
        split_metadata.num_classes_seen(metadata, ignore_label), expected)

  def test_num_classes_seen_without_classes_is_zero(self):
    only_ignore = {'label_histogram': {str(IGNORE): 5, '3': 0}}
    self.assertEqual(split_metadata.num_classes_seen(only_ignore, IGNORE), 0)


if __name__ == '__main__':
  tf.test.main()
