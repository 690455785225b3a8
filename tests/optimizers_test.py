"""Tests for the optimizer builder and the training step."""

import gin
import numpy as np
import tensorflow as tf

from official_seg.training import optimizers


def _graph_step(loss_value):
  """A one-variable training step whose loss is `loss_value` * w."""
  weight = tf.compat.v1.get_variable('w', initializer=2.0)
  counter = tf.compat.v1.get_variable('updates', initializer=0.0)
  loss = loss_value * weight
  update = tf.compat.v1.assign_add(counter, 1.0)
  op = optimizers.train_op(
      tf.compat.v1.train.GradientDescentOptimizer(0.5), loss, [weight], [update])
  return op, weight, counter


class OptimizersTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_step_applies_gradients_updates_and_global_step(self):
    with tf.Graph().as_default():
      op, weight, counter = _graph_step(3.0)
      step = tf.compat.v1.train.get_global_step()
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(op)
        self.assertAllClose(sess.run([weight, counter, step]), [0.5, 1.0, 1])

  def test_non_finite_loss_fails_naming_the_step_and_changes_nothing(self):
    with tf.Graph().as_default():
      op, weight, _ = _graph_step(np.nan)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    '(?s)NaN or Inf at global step.*0'):
          sess.run(op)
        self.assertEqual(sess.run(weight), 2.0)
        self.assertEqual(sess.run(tf.compat.v1.train.get_global_step()), 0)

  def test_optimizer_from_gin(self):
    gin.parse_config(['make_optimizer.optimizer = @tf.train.MomentumOptimizer',
                      'tf.train.MomentumOptimizer.momentum = 0.8'])
    with tf.Graph().as_default():
      opt = optimizers.make_optimizer(tf.constant(0.1))
      self.assertIsInstance(opt, tf.compat.v1.train.MomentumOptimizer)
      self.assertEqual(opt._momentum, 0.8)  # pylint: disable=protected-access
      tpu_opt = optimizers.make_optimizer(tf.constant(0.1), use_tpu=True)
      self.assertIsInstance(tpu_opt, tf.compat.v1.tpu.CrossShardOptimizer)


if __name__ == '__main__':
  tf.test.main()
