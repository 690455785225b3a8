"""Tests of the semi-supervised warnings: the share distance and when they fire."""

import glob
import os
import re
import tempfile

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg.semi_supervised import host_checks
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


_PHRASES = {'pulling': 'pulling against the labels',
            'disagree': 'disagree with the labeled data',
            'starved': 'keep almost no pixel'}


def _numpy_warnings(series, options):
  """Steps of each kind of warning, and the written averages, by the rule
  of the class docstring; `series` maps each input name to its values."""
  averages = {}
  lowest = np.inf
  fired = {'pulling': [], 'disagree': [], 'starved': [], 'written': {}}
  fired['logged'] = {kind: [] for kind in _PHRASES}
  was_on = dict.fromkeys(_PHRASES, False)
  names = [n for n in host_checks.INPUTS
           if n != host_checks.UNLABELED_WEIGHT]
  for step in range(len(series[host_checks.LABELED_LOSS])):
    for name in names:
      value = series[name][step]
      averages[name] = value if name not in averages else (
          options.decay * averages[name] + (1 - options.decay) * value)
    warm = step >= options.warmup_steps
    if warm:
      lowest = min(lowest, averages[host_checks.LABELED_LOSS])
    rise = averages[host_checks.LABELED_LOSS] / lowest - 1 if warm else 0.0
    if step % 10 == 0:
      fired['written'][step] = [rise] + [
          averages[n] for n in host_checks.AVERAGE_TAGS]
    if not warm or step % options.every_n_steps:
      continue
    if series[host_checks.UNLABELED_WEIGHT][step] > 0 and (
        averages[host_checks.GRADIENT_AGREEMENT] <
        options.min_gradient_agreement or rise > options.max_loss_rise):
      fired['pulling'].append(step)
    starved = averages[host_checks.KEPT_SHARE] < options.min_kept_share
    if starved and series[host_checks.UNLABELED_WEIGHT][step] > 0:
      fired['starved'].append(step)
    if not starved and (
        averages[host_checks.SHARE_DISTANCE] > options.max_share_distance or
        averages[host_checks.LABELED_ACCURACY] <
        options.min_labeled_accuracy):
      fired['disagree'].append(step)
    for kind, logged in fired['logged'].items():
      on = bool(fired[kind]) and fired[kind][-1] == step
      if on and (not was_on[kind] or
                 step - logged[-1] >=
                 host_checks.LOG_REPEAT_CHECKS * options.every_n_steps):
        logged.append(step)
      was_on[kind] = on
  return fired


class ShareDistanceTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(0, 1, 2)
  def test_against_numpy(self, seed):
    rng = np.random.default_rng(seed)
    pseudo = rng.integers(0, 4, (2, 6, 5))
    kept = (rng.random((2, 6, 5)) < 0.6).astype(np.float32)
    labels = rng.choice([0, 0, 0, 1, 3, _IGNORE], (3, 7, 4, 1))
    got = host_checks.share_distance(
        tf.constant(pseudo, tf.int32), tf.constant(kept), tf.constant(labels),
        4, _IGNORE)
    expected = _numpy_distance(pseudo, kept, labels[..., 0], 4)
    self.assertGreater(expected, 0.05)
    self.assertAllClose(got, expected, atol=1e-6)

  def test_same_shares_are_zero_apart_and_no_kept_pixel_is_zero(self):
    labels = np.array([0, 0, 1, 2, _IGNORE]).reshape(1, 1, 5, 1)
    pseudo = np.array([[[2, 0, 1, 0, 0, 0]]])
    kept = np.array([[[1, 1, 1, 1, 0, 0]]], np.float32)
    self.assertAllClose(host_checks.share_distance(
        pseudo, tf.constant(kept), labels, 3, _IGNORE), 0.0)
    self.assertAllClose(host_checks.share_distance(
        pseudo, tf.zeros_like(kept), labels, 3, _IGNORE), 0.0)
    # Nothing but class 2, against a quarter of class 2: 3/4 apart.
    self.assertAllClose(host_checks.share_distance(
        np.full((1, 1, 6), 2), tf.constant(kept), labels, 3, _IGNORE), 0.75)


class WarningsTest(tf.test.TestCase, parameterized.TestCase):

  def _run(self, options, series):
    """Runs the host ops a step at a time; (stderr, texts, written scalars)."""
    logdir = tempfile.mkdtemp(dir=self.get_temp_dir())
    with tf.Graph().as_default():
      step = tf.compat.v1.placeholder(tf.int64, [])
      fed = {name: tf.compat.v1.placeholder(tf.float32, [])
             for name in host_checks.INPUTS}
      writer = tf.summary.create_file_writer(logdir)
      with writer.as_default():
        op = options(fed, step, tf.equal(step % 10, 0))
        summaries = tf.compat.v1.summary.all_v2_summary_ops()
      with tf.compat.v1.Session() as session, \
          testing_utils.captured_stderr_fd() as captured:
        session.run([tf.compat.v1.local_variables_initializer(),
                     writer.init()])
        for i in range(len(series[host_checks.LABELED_LOSS])):
          session.run([op, summaries], {step: i, **{
              fed[name]: series[name][i] for name in fed}})
        session.run(writer.flush())
    return (captured.text,) + self._read(logdir)

  def _read(self, logdir):
    """({step: warning texts}, {step: written rise and averages})."""
    tags = [host_checks.LOSS_RISE] + list(
        host_checks.AVERAGE_TAGS.values())
    texts, written = {}, {}
    for path in glob.glob(os.path.join(logdir, 'events.out.tfevents.*')):
      for event in tf.compat.v1.train.summary_iterator(path):
        for value in event.summary.value:
          if value.tag == host_checks.WARNINGS_TAG:
            text = tf.make_ndarray(value.tensor).item().decode()
            texts.setdefault(event.step, []).append(text)
          elif value.tag in tags:
            written.setdefault(event.step, {})[value.tag] = float(
                tf.make_ndarray(value.tensor))
    return texts, {step: [found[t] for t in tags]
                   for step, found in written.items()}

  @parameterized.named_parameters(
      ('healthy', {}, ()),
      ('loss_rises', {'rises': True}, ('pulling',)),
      ('rises_without_unlabeled_weight', {'rises': True, 'weight': 0.0}, ()),
      ('gradients_oppose', {'agreement': -0.3}, ('pulling',)),
      ('pseudo_labels_apart', {'distance': 0.6}, ('disagree',)),
      ('labeled_images_mislabeled', {'accuracy': 0.6}, ('disagree',)),
      # Nothing kept: both disagreement signals read 0, and are not judged.
      ('nothing_kept', {'kept': 0.0, 'accuracy': 0.0, 'distance': 0.0},
       ('starved',)),
      ('nothing_kept_without_unlabeled_weight',
       {'kept': 0.0, 'accuracy': 0.0, 'distance': 0.0, 'weight': 0.0}, ()),
      # Apart, then close for a few checks, then apart again: the log
      # repeats at the warning's return, not only every 10 checks.
      ('apart_then_close_then_apart', {'distance': 0.6, 'close': (22, 40)},
       ('disagree',)))
  def test_fires_where_numpy_says(self, shape, kinds):
    options = host_checks.SemiSupervisedWarnings(
        decay=0.9, warmup_steps=20, every_n_steps=4)
    steps = np.arange(120)
    rng = np.random.default_rng(0)
    noise = lambda: rng.normal(0, 0.05, steps.size)
    losses = 2.0 * np.exp(-steps / 15.0) + 0.2
    if shape.get('rises'):
      losses += np.where(steps > 50, (steps - 50) * 0.02, 0.0)
    distance = np.full(steps.size, shape.get('distance', 0.1))
    if 'close' in shape:
      distance[slice(*shape['close'])] = 0.0
    series = {
        host_checks.LABELED_LOSS: losses,
        host_checks.GRADIENT_AGREEMENT: shape.get('agreement', 0.2) + noise(),
        host_checks.SHARE_DISTANCE: np.clip(distance + noise(), 0, 1),
        host_checks.LABELED_ACCURACY: np.clip(
            shape.get('accuracy', 0.97) + noise(), 0, 1),
        # Relative noise: a share of 0 stays 0, as when nothing is kept.
        host_checks.KEPT_SHARE: np.clip(
            shape.get('kept', 0.8) * (1 + noise()), 0, 1),
        host_checks.UNLABELED_WEIGHT: np.full(steps.size,
                                                shape.get('weight', 1.0))}
    stderr, texts, written = self._run(options, series)
    expected = _numpy_warnings(series, options)
    self.assertEqual(sorted(written), sorted(expected['written']))
    for step, values in expected.pop('written').items():
      self.assertAllClose(written[step], values, rtol=1e-5, atol=1e-6)
    logged = expected.pop('logged')
    fired = {kind: sorted(s for s, found in texts.items()
                          if any(phrase in t for t in found))
             for kind, phrase in _PHRASES.items()}
    self.assertEqual(fired, expected)
    self.assertEqual(sorted(k for k in expected if expected[k]),
                     sorted(kinds))
    for kind, phrase in _PHRASES.items():
      self.assertEqual(
          [int(s) for s in re.findall(rf'Step (\d+): [^\n]*{phrase}', stderr)],
          logged[kind])
    for kind in kinds:
      # A lasting warning: every check writes it, the log repeats fewer.
      self.assertLess(len(logged[kind]), len(expected[kind]))
    if 'close' in shape:
      gaps = np.diff(logged['disagree'])
      self.assertLess(min(gaps), host_checks.LOG_REPEAT_CHECKS *
                      options.every_n_steps)


if __name__ == '__main__':
  tf.test.main()
