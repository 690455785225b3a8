"""Tests for the profiling and startup-delay hooks."""

import glob
import os
import threading
import time

import gin
import tensorflow as tf

from official_seg.training import hooks


def _counting_graph():
  """A global step and a train op that increments it."""
  global_step = tf.compat.v1.train.get_or_create_global_step()
  return global_step, tf.compat.v1.assign_add(global_step, 1)


class HooksTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_profile_steps_write_a_trace_for_the_profile_plugin(self):
    logdir = self.create_tempdir().full_path
    gin.parse_config('profile_hooks.profile_steps = [1, 3]')
    with tf.Graph().as_default():
      _, step = _counting_graph()
      with tf.compat.v1.train.MonitoredSession(
          hooks=hooks.profile_hooks(logdir)) as session:
        for _ in range(5):
          session.run(step)
    traces = glob.glob(os.path.join(logdir, 'plugins', 'profile', '*',
                                    '*.xplane.pb'))
    self.assertLen(traces, 1)
    self.assertGreater(os.path.getsize(traces[0]), 0)

  def test_no_profile_steps_profile_nothing(self):
    self.assertEqual(hooks.profile_hooks('/unused'), [])

  def test_bad_profile_steps_name_the_binding(self):
    for steps in ([3], [5, 2], 'a-b'):
      with self.assertRaisesRegex(ValueError, 'profile_hooks.profile_steps'):
        hooks.profile_hooks('/unused', profile_steps=steps)

  def test_worker_waits_for_its_share_of_startup_delay_steps(self):
    self.assertEqual(hooks.startup_delay_hooks(0, startup_delay_steps=5), [])
    self.assertEqual(hooks.startup_delay_hooks(2), [])
    with tf.Graph().as_default():
      global_step, step = _counting_graph()
      (waiter,) = hooks.startup_delay_hooks(2, startup_delay_steps=5)
      waiter.begin()
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        context = tf.estimator.SessionRunContext((), session)
        # The other trainers: nine steps, then a tenth one after a pause.
        for _ in range(9):
          session.run(step)
        released = []

        def worker():
          waiter.before_run(context)
          released.append(session.run(global_step))

        thread = threading.Thread(target=worker)
        thread.start()
        time.sleep(1.5)
        self.assertEqual(released, [])
        session.run(step)
        thread.join(timeout=10)
    self.assertEqual(released, [10])


if __name__ == '__main__':
  tf.test.main()
