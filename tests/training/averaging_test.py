"""Moving averages of the weights: the update, the restore Saver and the checks."""

import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg.training import averaging


def _reference_averages(values, decay):
  """The average after each step, as tf's docs define it, in NumPy."""
  average = values[0]  # The shadow starts at the variable's initial value.
  out = []
  for step, value in enumerate(values[1:], start=1):
    rate = min(decay, (1.0 + step) / (10.0 + step))
    average = rate * average + (1.0 - rate) * value
    out.append(average)
  return out


class AveragingTest(tf.test.TestCase, parameterized.TestCase):

  def _train_graph(self, decay):
    """A variable that a train op moves by 1.5 per step, averaged."""
    weight = tf.compat.v1.get_variable('dense/kernel', initializer=[2.0, -1.0])
    global_step = tf.compat.v1.train.get_or_create_global_step()
    step = tf.group(weight.assign_add([1.5, 1.5]),
                    global_step.assign_add(1))
    return weight, averaging.apply_after(step, [weight], decay)

  def test_averages_follow_the_decay_schedule(self):
    decay = 0.6
    with tf.Graph().as_default():
      weight, train_op = self._train_graph(decay)
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        shadow, = [v for v in tf.compat.v1.global_variables()
                   if v.name.startswith(averaging.average_name(weight))]
        values, averages = [session.run(weight)], []
        for _ in range(6):
          session.run(train_op)
          values.append(session.run(weight))
          averages.append(session.run(shadow))
    expected = _reference_averages(np.array(values), decay)
    self.assertAllClose(averages, expected, rtol=1e-6)
    self.assertNotAllClose(averages[-1], values[-1])

  def test_off_keeps_the_train_op(self):
    with tf.Graph().as_default():
      weight = tf.compat.v1.get_variable('w', initializer=1.0)
      op = weight.assign_add(1.0).op
      self.assertIs(averaging.apply_after(op, [weight], None), op)
      self.assertIsNone(averaging.restore_scaffold_fn([weight], None))

  def test_restore_saver_loads_the_average_into_the_variable(self):
    prefix = os.path.join(self.create_tempdir().full_path, 'model.ckpt')
    with tf.Graph().as_default():
      weight, train_op = self._train_graph(0.5)
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        for _ in range(3):
          session.run(train_op)
        tf.compat.v1.train.Saver().save(session, prefix)
    reader = tf.train.load_checkpoint(prefix)
    average = reader.get_tensor('dense/kernel/ExponentialMovingAverage')
    self.assertNotAllClose(average, reader.get_tensor('dense/kernel'))
    with tf.Graph().as_default():
      weight = tf.compat.v1.get_variable('dense/kernel', shape=[2])
      tf.compat.v1.train.get_or_create_global_step()
      scaffold = averaging.restore_scaffold_fn([weight], 0.5)()
      scaffold.finalize()
      with tf.compat.v1.Session() as session:
        scaffold.saver.restore(session, prefix)
        self.assertAllEqual(session.run(weight), average)
        self.assertEqual(
            session.run(tf.compat.v1.train.get_global_step()), 3)

  @parameterized.parameters(0.0, 1.0, 1, -0.5, '0.99', True)
  def test_bad_decay_names_the_binding(self, decay):
    with self.assertRaisesRegex(
        ValueError, r'ModelFnOptions.moving_average_decay=.*\(0, 1\)'):
      averaging.check_decay(decay)

  def test_scored_weights(self):
    self.assertEqual(averaging.scored_weights(None), 'raw')
    self.assertEqual(averaging.scored_weights(0.999), 'moving_average')

  def test_resuming_a_checkpoint_without_averages_names_the_binding(self):
    model_dir = self.create_tempdir().full_path
    with tf.Graph().as_default():
      weight = tf.compat.v1.get_variable('w', initializer=1.0)
      with tf.compat.v1.Session() as session:
        session.run(weight.initializer)
        tf.compat.v1.train.Saver().save(
            session, os.path.join(model_dir, 'model.ckpt'), global_step=5)
      averaging.check_checkpoint(model_dir, [weight], None)
      with self.assertRaisesRegex(
          ValueError, r'moving_average_decay=0.9.*model.ckpt-5.*'
          r'w/ExponentialMovingAverage.*new --model_dir'):
        averaging.check_checkpoint(model_dir, [weight], 0.9)


if __name__ == '__main__':
  tf.test.main()
