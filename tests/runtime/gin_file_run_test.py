"""gin_file_run: the logging a run sets, and gives back; the run itself is tests/commands/plan_test.py's."""

from absl import logging
import tensorflow as tf

from official_seg.runtime import gin_file_run


class ProgressLoggedTest(tf.test.TestCase):

  def test_info_on_tensorflow_s_own_handler_inside_and_as_before_after(self):
    before = (logging.get_verbosity(), tf.get_logger().propagate)
    logging.set_verbosity(logging.WARNING)
    tf.get_logger().propagate = True
    try:
      with gin_file_run.progress_logged():
        self.assertEqual(logging.get_verbosity(), logging.INFO)
        self.assertFalse(tf.get_logger().propagate)
      self.assertEqual(logging.get_verbosity(), logging.WARNING)
      self.assertTrue(tf.get_logger().propagate)
    finally:
      logging.set_verbosity(before[0])
      tf.get_logger().propagate = before[1]

  def test_given_back_when_the_run_raises(self):
    propagate = tf.get_logger().propagate
    with self.assertRaisesRegex(RuntimeError, 'the run stopped'):
      with gin_file_run.progress_logged():
        raise RuntimeError('the run stopped')
    self.assertEqual(tf.get_logger().propagate, propagate)


if __name__ == '__main__':
  tf.test.main()
