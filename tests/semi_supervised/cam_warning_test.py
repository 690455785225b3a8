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


def _numpy_no_class(picked, window, min_share):
  """The step the no-class warning fires at (or None), by its docstring's
  rule: the end of the first window whose steps with nothing picked are at
  least `min_share` of it."""
  for end in range(window - 1, len(picked), window):
    if np.mean(np.asarray(picked[end - window + 1:end + 1]) == 0) >= min_share:
      return end
  return None


class NoClassWarningTest(tf.test.TestCase, parameterized.TestCase):

  def _run(self, warning, picked):
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
        for i, value in enumerate(picked):
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
      ('fires_once', (0, 7, 9, 10), 29),
      ('never_enough', (0, 7, 7, 5), None))
  def test_fires_where_numpy_says(self, empty_counts, expected_step):
    rng = np.random.default_rng(0)
    picked = []
    for empty in empty_counts:
      window = np.concatenate([np.zeros(empty), rng.uniform(0.1, 2, 10 - empty)])
      picked.extend(rng.permutation(window))
    warning = cam_warning.NoClassWarning(window_steps=10, min_share=0.8)
    stderr, texts = self._run(warning, picked)
    self.assertEqual(_numpy_no_class(picked, 10, 0.8), expected_step)
    self.assertEqual(sorted(texts), [] if expected_step is None
                     else [expected_step])
    logged = re.findall(r'Step (\d+): [^\n]*named no class', stderr)
    self.assertEqual(logged, [] if expected_step is None
                     else [str(expected_step)])
    if expected_step is not None:
      (text,) = texts[expected_step]
      self.assertIn('at 90% of steps 20-29', text)
      self.assertIn('CamFusion.decoder_where_no_class = True', text)



if __name__ == '__main__':
  tf.test.main()
