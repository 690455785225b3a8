"""Tests of the no-class warning: the step it fires at, once, and its line."""

import glob
import os
import re
import tempfile

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg.semi_supervised import cam_warning
from official_seg.semi_supervised import host_checks
from tests import testing_utils


def _numpy_no_class(picked, first_step, window, min_share):
  """The step the no-class warning fires at (or None), by its docstring's
  rule: the end of the first window, seen for half of it at least, whose
  steps with nothing picked are at least `min_share` of those seen."""
  steps = np.arange(first_step, first_step + len(picked))
  empty = np.asarray(picked) == 0
  for end in steps[steps % window == window - 1]:
    seen = (steps // window == end // window)
    if 2 * seen.sum() >= window and empty[seen].mean() >= min_share:
      return end
  return None


class NoClassWarningTest(tf.test.TestCase, parameterized.TestCase):

  def _run(self, warning, picked, first_step):
    """Runs the host op a step at a time; (stderr, {step: texts})."""
    logdir = tempfile.mkdtemp(dir=self.get_temp_dir())
    with tf.Graph().as_default():
      step = tf.compat.v1.placeholder(tf.int64, [])
      fed = tf.compat.v1.placeholder(tf.float32, [])
      writer = tf.summary.create_file_writer(logdir)
      with writer.as_default():
        op = warning({cam_warning.CLASSES_PICKED: fed}, step,
                     tf.constant(True))
        summaries = tf.compat.v1.summary.all_v2_summary_ops()
      with tf.compat.v1.Session() as session, \
          testing_utils.captured_stderr_fd() as captured:
        session.run([tf.compat.v1.local_variables_initializer(),
                     writer.init()])
        for i, value in enumerate(picked, first_step):
          session.run([op, summaries], {step: i, fed: value})
        session.run(writer.flush())
    texts = {}
    for path in glob.glob(os.path.join(logdir, 'events.out.tfevents.*')):
      for event in tf.compat.v1.train.summary_iterator(path):
        for value in event.summary.value:
          if value.tag == host_checks.WARNINGS_TAG:
            texts.setdefault(event.step, []).append(
                tf.make_ndarray(value.tensor).item().decode())
    return captured.text, texts

  @parameterized.named_parameters(
      # Windows of 10 steps with 0, 7, 9 and 10 empty steps: the third is the
      # first at 0.8 or more; the fourth does not warn again.
      ('fires_once', 0, (0, 7, 9, 10), 29, 'at 90% of steps 20-29'),
      ('never_enough', 0, (0, 7, 7, 5), None, None),
      # Resumed at step 26: steps 26-29 are too few to judge, 30-39 fire.
      ('resumed', 26, (4, 10), 39, 'at 100% of steps 30-39'))
  def test_fires_where_numpy_says(self, first_step, empty_counts,
                                  expected_step, phrase):
    rng = np.random.default_rng(0)
    picked = []
    for empty in empty_counts:
      count = 4 if first_step and not picked else 10
      window = np.concatenate([np.zeros(empty),
                               rng.uniform(0.1, 2, count - empty)])
      picked.extend(rng.permutation(window))
    warning = cam_warning.NoClassWarning(window_steps=10, min_share=0.8)
    stderr, texts = self._run(warning, picked, first_step)
    self.assertEqual(_numpy_no_class(picked, first_step, 10, 0.8),
                     expected_step)
    self.assertEqual(sorted(texts), [] if expected_step is None
                     else [expected_step])
    logged = re.findall(r'Step (\d+): [^\n]*named no class', stderr)
    self.assertEqual(logged, [] if expected_step is None
                     else [str(expected_step)])
    if expected_step is not None:
      (text,) = texts[expected_step]
      self.assertIn(phrase, text)
      self.assertIn('CamFusion.decoder_where_no_class = True', text)

if __name__ == '__main__':
  tf.test.main()
