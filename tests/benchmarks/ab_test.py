"""Tests for ab: blocks of two sessions in turn, and what their graphs differ in."""

import glob
import os

import tensorflow as tf

from benchmarks import ab
from tests import testing_utils


def _counting_arm(extra_op):
  """An `ab.Arm` whose step adds 1 to a counter; `extra_op` marks its graph."""
  graph = tf.Graph()
  with graph.as_default():
    counter = tf.compat.v1.Variable(0, dtype=tf.int64, use_resource=True)
    step = counter.assign_add(1)
    if extra_op:
      tf.math.square(tf.constant(2.0))
    session = tf.compat.v1.Session(graph=graph)
    session.run(tf.compat.v1.global_variables_initializer())
  return ab.Arm(graph, session, step.op), counter


class AbTest(testing_utils.TinyDataTestCase):

  def test_compare_runs_every_block_and_names_the_changed_ops(self):
    (arm_a, counter_a), (arm_b, counter_b) = (_counting_arm(False),
                                              _counting_arm(True))
    result = ab.compare([arm_a, arm_b], blocks=4, block_steps=3,
                        warmup_blocks=1)
    # 1 warm-up and 4 timed blocks of 3 steps, each arm.
    with arm_a.graph.as_default():
      self.assertEqual(arm_a.session.run(counter_a.read_value()), 15)
    with arm_b.graph.as_default():
      self.assertEqual(arm_b.session.run(counter_b.read_value()), 15)
    ab.close([arm_a, arm_b])
    self.assertEqual(result['only_in_a'], [])
    self.assertEqual(result['only_in_b'], ['Square'])
    self.assertLen(result['paired_ratios'], 4)
    rate_a, rate_b = result['steps_per_second']
    self.assertAllClose(result['ratio'], rate_b / rate_a)
    self.assertBetween(result['median_paired_ratio'],
                       min(result['paired_ratios']),
                       max(result['paired_ratios']))

  def test_no_timed_block_is_an_error_naming_the_flags(self):
    with self.assertRaisesRegex(ValueError, '--blocks'):
      ab.compare([], blocks=0, block_steps=3)

  def test_arm_of_the_quickstart_step_trains(self):
    testing_utils.parse_tiny_quickstart(self.data_dir)
    model_dir = self.create_tempdir().full_path
    arm = ab.build_arm(2, model_dir)
    self.assertIn('ResourceApplyAdam', arm.op_types)
    with arm.graph.as_default():
      step = tf.compat.v1.train.get_global_step()
      arm.session.run(arm.train_op)
      self.assertEqual(arm.session.run(step), 1)
    ab.close([arm])
    # The host_call ran with the step, as the Estimator's hook runs it.
    written = set()
    for path in glob.glob(os.path.join(model_dir, 'events.out.tfevents*')):
      for event in tf.compat.v1.train.summary_iterator(path):
        written.update((value.tag, event.step)
                       for value in event.summary.value)
    self.assertIn(('loss/total', 0), written)


if __name__ == '__main__':
  tf.test.main()
