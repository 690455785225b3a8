"""Tests for LVIS repeat factors and the stream that repeats images by them."""

import collections
import itertools
import math

import gin
import numpy as np
import tensorflow as tf

from official_seg.data import image_classes
from official_seg.data import repeat_factors

IGNORE = 255


def _lvis(presence, threshold):
  """LVIS's r(image), written out from the paper's definition."""
  count = len(presence)
  factors = []
  for row in presence:
    factor = 1.0
    for cls in np.flatnonzero(row):
      fraction = presence[:, cls].sum() / count
      factor = max(factor, max(1.0, math.sqrt(threshold / fraction)))
    factors.append(factor)
  return factors


def _stream(names, factors, epochs, seed):
  """The names the repeated stream of `epochs` passes over `names` gives."""
  dataset = tf.data.Dataset.from_tensor_slices(names).repeat(epochs)
  split = repeat_factors.SplitFactors(sorted(factors), [
      factors[name] for name in sorted(factors)])
  repeated = repeat_factors.repeated(dataset, lambda name: name, split, seed)
  return [name.decode() for name in repeated.as_numpy_iterator()]


class RepeatFactorsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_factors_are_lvis_formula(self):
    rng = np.random.default_rng(0)
    # Columns from common to rare: each class in a share of 40 images.
    presence = rng.random((40, 5)) < [0.9, 0.5, 0.2, 0.05, 0.0]
    presence[7] = False  # An image of no class repeats once.
    for threshold in (0.0, 0.01, 0.1, 0.5, 1.0):
      self.assertAllClose(repeat_factors.repeat_factors(presence, threshold),
                          _lvis(presence, threshold), rtol=1e-12)

  def test_a_class_in_one_of_four_images_repeats_them_twice_at_threshold_one(
      self):
    presence = [[True, True], [True, False], [True, False], [True, False]]
    self.assertAllEqual(repeat_factors.repeat_factors(presence, 1.0),
                        [2.0, 1.0, 1.0, 1.0])

  def test_whole_factors_repeat_each_element_exactly(self):
    got = _stream(['a', 'b', 'c', 'unknown'], {'a': 1.0, 'b': 2.0, 'c': 3.0},
                  epochs=2, seed=0)
    self.assertEqual(got, ['a', 'b', 'b', 'c', 'c', 'c', 'unknown'] * 2)

  def test_fractions_round_up_with_their_probability(self):
    epochs = 400
    factors = {'a': 1.25, 'b': 2.5}
    got = _stream(['a', 'b'], factors, epochs, seed=3)
    # Each pass gives floor(r) or floor(r) + 1 copies in a row.
    runs = [(name, len(list(group))) for name, group in
            itertools.groupby(got)]
    self.assertLen(runs, 2 * epochs)
    self.assertEqual({(n, c) for n, c in runs},
                     {('a', 1), ('a', 2), ('b', 2), ('b', 3)})
    counts = collections.Counter(got)
    for name, factor in factors.items():
      # Extra copies: Binomial(epochs, r - floor(r)); 4 standard deviations.
      p = factor - math.floor(factor)
      self.assertLess(abs(counts[name] - epochs * factor),
                      4 * math.sqrt(epochs * p * (1 - p)))

  def test_a_seed_fixes_the_rounding(self):
    factors = {'a': 1.5, 'b': 1.5}
    first = _stream(['a', 'b'], factors, 40, seed=1)
    self.assertEqual(first, _stream(['a', 'b'], factors, 40, seed=1))
    self.assertNotEqual(first, _stream(['a', 'b'], factors, 40, seed=2))
    self.assertBetween(len(_stream(['a', 'b'], factors, 40, None)), 80, 160)

  def test_split_factors_read_the_image_classes_file(self):
    data_dir = self.create_tempdir().full_path
    image_labels = {'c.png': [0, 1], 'a.png': [0, 2, IGNORE],
                    'b.png': [0, 1], 'd.png': [0, 1, IGNORE]}
    image_classes.write(data_dir, 'train', image_labels)
    split = repeat_factors.split_factors(data_dir, 'train', 0.5, IGNORE)
    self.assertEqual(split.names, ['a.png', 'b.png', 'c.png', 'd.png'])
    # Class 2 is in 1 of 4 images: sqrt(0.5 / 0.25); class 1 in 3 of 4.
    self.assertAllClose(split.factors, [math.sqrt(2.0), 1.0, 1.0, 1.0])


if __name__ == '__main__':
  tf.test.main()
