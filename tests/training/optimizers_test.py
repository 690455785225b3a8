"""Tests for the optimizer, the fine-tuning controls and the training step."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg.training import optimizers


def _step(optimizer, loss, variables, update_ops, scalars=None,
          last_layers=()):
  """A training step composed as the model_fn composes it, from gin."""
  variables = optimizers.trainable_variables(variables)
  multipliers = optimizers.gradient_multipliers(variables,
                                                last_layers=last_layers)
  op, applied = optimizers.train_op(optimizer, loss, variables, update_ops,
                                    multipliers, optimizers.clip_gradients,
                                    scalars)
  assert applied is None  # Every run of a float32 step applies.
  return op


def _graph_step(loss_value):
  """A one-variable training step whose loss is `loss_value` * w."""
  weight = tf.compat.v1.get_variable('w', initializer=2.0)
  counter = tf.compat.v1.get_variable('updates', initializer=0.0)
  loss = loss_value * weight
  update = tf.compat.v1.assign_add(counter, 1.0)
  op = _step(tf.compat.v1.train.GradientDescentOptimizer(0.5), loss, [weight],
             [update])
  return op, weight, counter


# A stand-in for a backbone conv and the logits layer, named as Keras names
# them, with the constant gradient d(loss)/dv = _SLOPES[name].
_SLOPES = {'conv/kernel': 1.0, 'conv/bias': 2.0,
           'head/segmentation_output/kernel': 3.0,
           'head/segmentation_output/bias': 4.0}


def _two_layer_step(last_layers=()):
  """A gradient-descent step (rate 0.5) over the `_SLOPES` variables."""
  variables = {}
  for name in _SLOPES:
    scope, var_name = name.rsplit('/', 1)
    with tf.compat.v1.variable_scope(scope):
      variables[name] = tf.compat.v1.get_variable(var_name, initializer=1.0)
  loss = tf.add_n([_SLOPES[n] * v for n, v in variables.items()])
  op = _step(tf.compat.v1.train.GradientDescentOptimizer(0.5), loss,
             list(variables.values()), [], last_layers=last_layers)
  return op, variables


def _run_steps(op, variables, steps):
  with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for _ in range(steps):
      sess.run(op)
    return sess.run(variables)


class OptimizersTest(tf.test.TestCase, parameterized.TestCase):

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
      op, weight, counter = _graph_step(np.nan)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    '(?s)NaN or Inf at global step.*0'):
          sess.run(op)
        self.assertEqual(sess.run(weight), 2.0)
        self.assertEqual(sess.run(counter), 0.0)
        self.assertEqual(sess.run(tf.compat.v1.train.get_global_step()), 0)

  def test_non_finite_step_leaves_batch_norm_statistics_unchanged(self):
    with tf.Graph().as_default():
      images = tf.constant([[[[1.0], [np.nan]], [[3.0], [4.0]]]])
      layer = tf.keras.layers.BatchNormalization()
      outputs = layer(images, training=True)
      update_ops = layer.get_updates_for(images) + layer.get_updates_for(None)
      self.assertLen(update_ops, 2)  # moving mean and moving variance
      loss = tf.reduce_sum(outputs)
      op = _step(tf.compat.v1.train.GradientDescentOptimizer(0.5), loss,
                 layer.trainable_variables, update_ops)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    'Loss is NaN or Inf at global step'):
          sess.run(op)
        self.assertAllEqual(sess.run(
            [layer.moving_mean, layer.moving_variance, layer.gamma,
             layer.beta, tf.compat.v1.train.get_global_step()]),
                            [[0.0], [1.0], [1.0], [0.0], 0])

  def test_optimizer_from_gin(self):
    gin.parse_config(['make_optimizer.optimizer = @tf.train.MomentumOptimizer',
                      'tf.train.MomentumOptimizer.momentum = 0.8'])
    with tf.Graph().as_default():
      opt = optimizers.make_optimizer(tf.constant(0.1))
      self.assertIsInstance(opt, tf.compat.v1.train.MomentumOptimizer)
      self.assertEqual(opt._momentum, 0.8)  # pylint: disable=protected-access
      tpu_opt = optimizers.make_optimizer(tf.constant(0.1), use_tpu=True)
      self.assertIsInstance(tpu_opt, tf.compat.v1.tpu.CrossShardOptimizer)

  @parameterized.named_parameters(
      ('none', [], {}),
      ('last_layer',
       ['gradient_multipliers.last_layer_gradient_multiplier = 10.0'],
       {'head/segmentation_output/kernel': 10.0,
        'head/segmentation_output/bias': 10.0}),
      ('deeplab', ['gradient_multipliers.last_layer_gradient_multiplier = 10.0',
                   'gradient_multipliers.bias_multiplier = 2.0'],
       {'conv/bias': 2.0, 'head/segmentation_output/kernel': 10.0,
        'head/segmentation_output/bias': 20.0}))
  def test_gradient_multipliers_scale_the_update(self, bindings, factors):
    gin.parse_config(bindings)
    with tf.Graph().as_default():
      op, variables = _two_layer_step(last_layers=['segmentation_output/'])
      values = _run_steps(op, variables, 1)
    # One gradient-descent step from 1.0: 1 - 0.5 * slope * factor.
    expected = {name: 1.0 - 0.5 * slope * factors.get(name, 1.0)
                for name, slope in _SLOPES.items()}
    self.assertAllClose(values, expected, rtol=0, atol=1e-6)

  def test_frozen_variables_do_not_change(self):
    gin.parse_config(["trainable_variables.freeze = ['^conv/']"])
    with tf.Graph().as_default():
      op, variables = _two_layer_step()
      values = _run_steps(op, variables, 2)
    self.assertAllClose(values, {
        'conv/kernel': 1.0, 'conv/bias': 1.0,
        'head/segmentation_output/kernel': 1.0 - 2 * 0.5 * 3.0,
        'head/segmentation_output/bias': 1.0 - 2 * 0.5 * 4.0})

  @parameterized.named_parameters(
      ('no_match', "['^backbone/']",
       r"trainable_variables.freeze: '\^backbone/' matches no trainable"),
      ('bad_regex', "['conv/(']",
       r"trainable_variables.freeze: 'conv/\(' is not a valid"),
      ('string', "'conv/'",
       r"trainable_variables.freeze must be a list .* write \['conv/'\]"))
  def test_bad_freeze_pattern_names_the_binding(self, value, message):
    gin.parse_config([f'trainable_variables.freeze = {value}'])
    with tf.Graph().as_default():
      with self.assertRaisesRegex(ValueError, message):
        _two_layer_step()


  @parameterized.parameters((0.0, 1.0), (2.5, 0.5), (10.0, 1.0))
  def test_gradient_clipping_by_norm_scales_to_the_global_norm(
      self, clip_norm, expected_scale):
    # Gradients (3, 4) and (0,): global norm 5.
    gin.parse_config([f'clip_gradients.gradient_clipping_by_norm = {clip_norm}'])
    with tf.Graph().as_default():
      first = tf.compat.v1.get_variable('a', initializer=[1.0, 1.0])
      second = tf.compat.v1.get_variable('b', initializer=[1.0])
      grads_and_vars = [(tf.constant([3.0, 4.0]), first),
                        (None, second), (tf.constant([0.0]), second)]
      clipped, norm = optimizers.clip_gradients(grads_and_vars)
      self.assertIs(clipped[0][1], first)
      self.assertIsNone(clipped[1][0])
      with tf.compat.v1.Session() as sess:
        grads, norm = sess.run(([clipped[0][0], clipped[2][0]], norm))
    self.assertAllClose(norm, 5.0)
    self.assertAllClose(grads[0], np.array([3.0, 4.0]) * expected_scale)
    self.assertAllClose(grads[1], [0.0])

  def test_train_op_reports_the_gradient_norm_and_applies_clipped_steps(self):
    gin.parse_config(['clip_gradients.gradient_clipping_by_norm = 1.0'])
    with tf.Graph().as_default():
      weight = tf.compat.v1.get_variable('w', initializer=[1.0, 1.0])
      scalars = {}
      # d(loss)/dw = (6, 8): norm 10, clipped to (0.6, 0.8).
      op = _step(tf.compat.v1.train.GradientDescentOptimizer(0.5),
                 tf.reduce_sum(tf.constant([6.0, 8.0]) * weight), [weight], [],
                 scalars)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        norm, _ = sess.run((scalars['gradient_norm'], op))
        self.assertAllClose(norm, 10.0)
        self.assertAllClose(sess.run(weight), [1.0 - 0.3, 1.0 - 0.4])


if __name__ == '__main__':
  tf.test.main()
