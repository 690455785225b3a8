"""Tests of the semi-supervised warnings: the share distance and when they fire."""

import glob
import os
import tempfile

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg.training import semi_warnings
from tests import testing_utils

_IGNORE = 255


def _numpy_distance(pseudo, kept, labels, num_classes):
  """Total variation of the two class histograms, written out in NumPy."""
  pseudo_counts = np.array([kept[pseudo == c].sum()
                            for c in range(num_classes)])
  label_counts = np.array([(labels == c).sum() for c in range(num_classes)])
  if not pseudo_counts.sum() or not label_counts.sum():
    return 0.0
  return 0.5 * np.abs(pseudo_counts / pseudo_counts.sum() -
                      label_counts / label_counts.sum()).sum()


def _numpy_warnings(losses, distances, weights, options):
  """Steps of each kind of warning, by the rule of the class docstring."""
  loss_average = distance_average = None
  lowest = np.inf
  fired = {'loss': [], 'share': [], 'averages': {}}
  for step, (loss, distance, weight) in enumerate(
      zip(losses, distances, weights)):
    d = options.decay
    loss_average = loss if loss_average is None else (
        d * loss_average + (1 - d) * loss)
    distance_average = distance if distance_average is None else (
        d * distance_average + (1 - d) * distance)
    if step >= options.warmup_steps:
      lowest = min(lowest, loss_average)
    if step % 10 == 0:
      fired['averages'][step] = (
          loss_average / lowest - 1 if step >= options.warmup_steps else 0.0,
          distance_average)
    if step < options.warmup_steps:
      continue
    if step % options.every_n_steps:
      continue
    if loss_average / lowest - 1 > options.max_loss_rise and weight > 0:
      fired['loss'].append(step)
    if distance_average > options.max_share_distance:
      fired['share'].append(step)
  return fired


class ShareDistanceTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(0, 1, 2)
  def test_against_numpy(self, seed):
    rng = np.random.default_rng(seed)
    pseudo = rng.integers(0, 4, (2, 6, 5))
    kept = (rng.random((2, 6, 5)) < 0.6).astype(np.float32)
    labels = rng.choice([0, 0, 0, 1, 3, _IGNORE], (3, 7, 4, 1))
    got = semi_warnings.share_distance(
        tf.constant(pseudo, tf.int32), tf.constant(kept), tf.constant(labels),
        4, _IGNORE)
    expected = _numpy_distance(pseudo, kept, labels[..., 0], 4)
    self.assertGreater(expected, 0.05)
    self.assertAllClose(got, expected, atol=1e-6)

  def test_same_shares_are_zero_apart_and_no_kept_pixel_is_zero(self):
    labels = np.array([0, 0, 1, 2, _IGNORE]).reshape(1, 1, 5, 1)
    pseudo = np.array([[[2, 0, 1, 0, 0, 0]]])
    kept = np.array([[[1, 1, 1, 1, 0, 0]]], np.float32)
    self.assertAllClose(semi_warnings.share_distance(
        pseudo, tf.constant(kept), labels, 3, _IGNORE), 0.0)
    self.assertAllClose(semi_warnings.share_distance(
        pseudo, tf.zeros_like(kept), labels, 3, _IGNORE), 0.0)
    # Nothing but class 2, against a quarter of class 2: 3/4 apart.
    self.assertAllClose(semi_warnings.share_distance(
        np.full((1, 1, 6), 2), tf.constant(kept), labels, 3, _IGNORE), 0.75)


class WarningsTest(tf.test.TestCase, parameterized.TestCase):

  def _run(self, options, losses, distances, weights):
    """Runs the host ops a step at a time; (stderr text, warnings by step)."""
    logdir = tempfile.mkdtemp(dir=self.get_temp_dir())
    with tf.Graph().as_default():
      step = tf.compat.v1.placeholder(tf.int64, [])
      fed = {name: tf.compat.v1.placeholder(tf.float32, [])
             for name in (semi_warnings.LABELED_LOSS,
                          semi_warnings.SHARE_DISTANCE,
                          semi_warnings.UNLABELED_WEIGHT)}
      writer = tf.summary.create_file_writer(logdir)
      with writer.as_default():
        op = options(fed, step, tf.equal(step % 10, 0))
        summaries = tf.compat.v1.summary.all_v2_summary_ops()
      with tf.compat.v1.Session() as session, \
          testing_utils.captured_stderr_fd() as captured:
        session.run([tf.compat.v1.local_variables_initializer(),
                     writer.init()])
        for i, values in enumerate(zip(losses, distances, weights)):
          session.run([op, summaries], {step: i, **dict(zip(fed.values(),
                                                           values))})
        session.run(writer.flush())
    texts, averages = {}, {}
    for path in glob.glob(os.path.join(logdir, 'events.out.tfevents.*')):
      for event in tf.compat.v1.train.summary_iterator(path):
        for value in event.summary.value:
          if value.tag == semi_warnings.WARNINGS_TAG:
            text = tf.make_ndarray(value.tensor).item().decode()
            texts.setdefault(event.step, []).append(text)
          elif value.tag in (semi_warnings.LOSS_RISE,
                             semi_warnings.SHARE_DISTANCE_AVERAGE):
            averages.setdefault(event.step, {})[value.tag] = float(
                tf.make_ndarray(value.tensor))
    averages = {step: (found[semi_warnings.LOSS_RISE],
                       found[semi_warnings.SHARE_DISTANCE_AVERAGE])
                for step, found in averages.items()}
    return captured.text, texts, averages

  def _fired(self, texts):
    return {kind: sorted(s for s, found in texts.items()
                         if any(phrase in t for t in found))
            for kind, phrase in (('loss', 'pulling it up'),
                                 ('share', 'disagree with the labeled'))}

  @parameterized.named_parameters(
      ('healthy', 'falls', 0.1, 1.0),
      ('loss_rises', 'rises', 0.1, 1.0),
      ('rises_without_unlabeled_weight', 'rises', 0.1, 0.0),
      ('pseudo_labels_apart', 'falls', 0.6, 1.0))
  def test_fires_where_numpy_says(self, loss_shape, distance, weight):
    options = semi_warnings.SemiSupervisedWarnings(
        decay=0.9, warmup_steps=20, max_loss_rise=0.5,
        max_share_distance=0.3, every_n_steps=10)
    steps = np.arange(120)
    losses = 2.0 * np.exp(-steps / 15.0) + 0.2
    if loss_shape == 'rises':
      losses += np.where(steps > 50, (steps - 50) * 0.02, 0.0)
    rng = np.random.default_rng(0)
    distances = np.clip(distance + rng.normal(0, 0.05, steps.size), 0, 1)
    weights = np.full(steps.size, weight)
    stderr, texts, averages = self._run(options, losses, distances, weights)
    expected = _numpy_warnings(losses, distances, weights, options)
    # The scalars written on recording steps, the first step's included.
    self.assertEqual(sorted(averages), sorted(expected.pop('averages')))
    for step, values in _numpy_warnings(losses, distances, weights,
                                        options)['averages'].items():
      self.assertAllClose(averages[step], values, rtol=1e-5, atol=1e-6)
    self.assertEqual(self._fired(texts), expected)
    fires = bool(expected['loss'] or expected['share'])
    self.assertEqual(fires, loss_shape == 'rises' and weight > 0 or
                     distance > 0.3)
    for kind, phrase in (('loss', 'pulling it up'),
                         ('share', 'disagree with the labeled')):
      self.assertEqual(stderr.count(phrase), len(expected[kind]))


if __name__ == '__main__':
  tf.test.main()
