"""Class-balanced image sampling by repeat factors (LVIS, Gupta et al. 2019)."""

import collections

import numpy as np
import tensorflow as tf

from official_seg.data import image_classes

# The record filenames of a split (sorted) and each one's repeat factor.
SplitFactors = collections.namedtuple('SplitFactors', ['names', 'factors'])
# Fingerprints of filenames are taken modulo this (`to_hash_bucket_fast`).
_HASH_BUCKETS = 2**62
# A stream folded into the element seed, apart from the parser's draws.
_ROUNDING = 5


def repeat_factors(presence, threshold):
  """LVIS's repeat factor of each image.

  f(c) is the fraction of images that hold class c; r(c) = max(1,
  sqrt(threshold / f(c))); an image's factor is the largest r(c) of its
  classes, 1 for an image of no class.

  Args:
    presence: bool [n, C], which classes each image holds.
    threshold: float t >= 0; classes in fewer than a share t of the images
      get a factor above 1.

  Returns:
    float64 [n].
  """
  presence = np.asarray(presence, bool)
  fraction = presence.mean(axis=0) if len(presence) else np.ones(
      presence.shape[1])
  per_class = np.maximum(1.0, np.sqrt(threshold / np.maximum(fraction,
                                                             1e-300)))
  return np.where(presence, per_class, 1.0).max(axis=1, initial=1.0)


def split_factors(data_dir, split, threshold, ignore_label):
  """The repeat factors of a split's images, from its `image_classes` file.

  Args:
    data_dir: str, the folder of the shards.
    split: str, the split name.
    threshold: float, `build_dataset.repeat_factor_threshold`.
    ignore_label: int; its pixels are no class.

  Returns:
    `SplitFactors`.

  Raises:
    validation.ConfigurationError: the file is missing or malformed.
  """
  image_labels = image_classes.read(
      data_dir, split,
      f'build_dataset.repeat_factor_threshold = {threshold!r}')
  names, presence = image_classes.presence(image_labels, ignore_label)
  return SplitFactors(names, repeat_factors(presence, threshold))


def _factor_lookup(factors):
  """key (scalar tf.string) -> its float32 factor, 1 for an unknown key.

  A sorted array of filename fingerprints searched per element: constants
  only, so the dataset holds no lookup table that an iterator would have to
  initialize (a one-shot iterator cannot).
  """
  fingerprints = tf.strings.to_hash_bucket_fast(
      tf.constant(factors.names, tf.string), _HASH_BUCKETS)
  order = tf.argsort(fingerprints)
  fingerprints = tf.gather(fingerprints, order)
  values = tf.gather(tf.constant(factors.factors, tf.float32), order)
  last = len(factors.names) - 1

  def lookup(key):
    fingerprint = tf.strings.to_hash_bucket_fast(key, _HASH_BUCKETS)
    index = tf.minimum(tf.searchsorted(fingerprints, fingerprint[None])[0],
                       last)
    return tf.where(tf.equal(fingerprints[index], fingerprint),
                    values[index], 1.0)

  return lookup


def repeated(dataset, key_fn, factors, seed=None, skip_errors=False):
  """Each element `floor(r)` or `floor(r) + 1` times, by its factor r.

  Stochastic rounding as detectron2's RepeatFactorTrainingSampler: one more
  copy with probability r - floor(r), drawn afresh each time the element
  comes (each epoch of a repeating stream). The copies follow each other,
  so a shuffle must come after; they stay within its buffer's reach of one
  another. Why a stream and not a list of indices: TFRecord shards have no
  random access, and the elements are read once per epoch as before.

  Args:
    dataset: a dataset of elements, e.g. serialized records.
    key_fn: element -> scalar tf.string, its record filename.
    factors: `SplitFactors`; a filename it lacks repeats once.
    seed: optional int; with it, the rounding of the element at position i
      of this stream is stateless from (seed, i).
    skip_errors: bool; drop an element whose key fails (a record that is no
      Example, with `build_dataset.skip_corrupt`), logged by tf.data, instead
      of stopping.

  Returns:
    The dataset of repeated elements.
  """
  if not factors.names:
    return dataset
  lookup = _factor_lookup(factors)

  def count(index, element):
    factor = lookup(key_fn(element))
    if seed is None:
      draw = tf.random.uniform([])
    else:
      draw = tf.random.stateless_uniform(
          [], tf.random.experimental.stateless_fold_in(
              tf.stack([tf.constant(seed, tf.int64), index]), _ROUNDING))
    whole = tf.floor(factor)
    copies = tf.cast(whole, tf.int64) + tf.cast(draw < factor - whole,
                                                tf.int64)
    return element, copies

  counted = dataset.enumerate().map(count, num_parallel_calls=tf.data.AUTOTUNE)
  if skip_errors:
    counted = counted.ignore_errors(log_warning=True)
  return counted.flat_map(
      lambda element, copies: tf.data.Dataset.from_tensors(element).repeat(
          copies))


def shuffled(dataset, key_fn, factors, buffer_size, seed=None,
             skip_errors=False):
  """The training stream shuffled, each element first `repeated` when
  `factors` is given (None: shuffled only); arguments as `repeated`'s."""
  if factors:
    dataset = repeated(dataset, key_fn, factors, seed, skip_errors)
  return dataset.shuffle(buffer_size, seed=seed)
