"""Optimizers bound in gin, and the training step that applies them."""

import gin
import gin.tf.external_configurables  # pylint: disable=unused-import
import tensorflow as tf

# gin files name the tf.compat.v1 optimizers that gin.tf registers, e.g.
# @tf.train.MomentumOptimizer: TPUEstimator's CrossShardOptimizer wraps only
# tf.compat.v1 optimizers.


@gin.configurable(denylist=['learning_rate', 'use_tpu'])
def make_optimizer(learning_rate, use_tpu=False, optimizer=gin.REQUIRED):
  """Builds the optimizer.

  Args:
    learning_rate: scalar float tensor.
    use_tpu: bool; on a real TPU the optimizer sums gradients across shards.
    optimizer: a tf.compat.v1 optimizer constructor taking `learning_rate`,
      e.g. `@tf.train.MomentumOptimizer` with its `momentum` bound in gin.

  Returns:
    A `tf.compat.v1.train.Optimizer`.
  """
  opt = optimizer(learning_rate=learning_rate)
  if use_tpu:
    opt = tf.compat.v1.tpu.CrossShardOptimizer(opt)
  return opt


def train_op(optimizer, loss, variables, update_ops):
  """One training step: gradients, batch-norm updates, global step.

  Args:
    optimizer: a `tf.compat.v1.train.Optimizer`.
    loss: scalar float tensor.
    variables: list of trainable variables.
    update_ops: list of ops (batch-norm moving averages) to run each step.

  Returns:
    The train op; it fails with InvalidArgumentError naming the step when the
    loss is NaN or Inf, before any variable is changed.
  """
  global_step = tf.compat.v1.train.get_or_create_global_step()
  finite = tf.debugging.Assert(
      tf.math.is_finite(loss),
      ['Loss is NaN or Inf at global step', global_step, 'loss', loss])
  with tf.control_dependencies([finite]):
    grads_and_vars = optimizer.compute_gradients(loss, var_list=variables)
  with tf.control_dependencies(update_ops):
    return optimizer.apply_gradients(grads_and_vars, global_step=global_step)
