"""float16 loss scaling and gradient accumulation in the train op, against NumPy and float32."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.training import averaging
from official_seg.training import optimizers
from official_seg.training import updates


def _no_clip(grads_and_vars):
  return optimizers.clip_gradients(grads_and_vars, 0.0)


def _dense_pair(policy, weights):
  """Two Dense layers in `policy`, initialised to `weights`."""
  constant = tf.keras.initializers.Constant
  return tf.keras.Sequential([
      tf.keras.layers.Dense(6, activation='tanh', dtype=policy,
                            kernel_initializer=constant(weights[0]),
                            bias_initializer=constant(weights[1])),
      tf.keras.layers.Dense(3, dtype=policy,
                            kernel_initializer=constant(weights[2]),
                            bias_initializer=constant(weights[3]))])


def _overflow_graph(decay=None, accumulation_steps=1):
  """Gradient descent (rate 0.5) on sum(w * x), float16's loss scale 8."""
  weight = tf.compat.v1.get_variable('w', initializer=[1.0, 2.0])
  inputs = tf.compat.v1.placeholder(tf.float32, [2])
  options = updates.UpdateOptions(initial_loss_scale=8.0,
                                  loss_scale_growth_steps=2)
  scale = updates.dynamic_loss_scale(options)
  op, applied = optimizers.train_op(
      tf.compat.v1.train.GradientDescentOptimizer(0.5),
      tf.reduce_sum(weight * inputs), [weight], [], {}, _no_clip,
      update=updates.Update(loss_scale=scale,
                            accumulation_steps=accumulation_steps))
  op = averaging.apply_after(op, [weight], decay, applied)
  return weight, inputs, scale, op, applied


class LossScaleTest(tf.test.TestCase, parameterized.TestCase):
  """float16's dynamic loss scale, one update per run."""

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def _gradients(self, policy, loss_scale, weights, inputs):
    """The gradients of a small loss (1e-6 of a mean square) in `policy`."""
    model = _dense_pair(policy, weights)
    outputs = tf.cast(model(tf.constant(inputs)), tf.float32)
    loss = 1e-6 * tf.reduce_mean(tf.square(outputs))
    update = updates.Update(loss_scale=loss_scale)
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    pairs = update.unscale(optimizer.compute_gradients(
        update.scale_loss(loss), var_list=model.trainable_variables))
    return loss, [g for g, _ in pairs]

  def test_float16_matches_float32_with_the_scale_and_underflows_without(self):
    random = np.random.RandomState(0)
    inputs = random.uniform(-1, 1, [8, 4]).astype(np.float32)
    weights = [random.uniform(-1, 1, shape).astype(np.float32)
               for shape in ([4, 6], [6], [6, 3], [3])]
    with tf.Graph().as_default():
      loss32, grads32 = self._gradients('float32', None, weights, inputs)
      scale = updates.dynamic_loss_scale(updates.UpdateOptions())
      loss16, grads16 = self._gradients('mixed_float16', scale, weights,
                                        inputs)
      _, unscaled16 = self._gradients('mixed_float16', None, weights, inputs)
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        (loss32, grads32, loss16, grads16, unscaled16) = session.run(
            (loss32, grads32, loss16, grads16, unscaled16))
    self.assertEqual([g.dtype for g in grads16], [np.float32] * 4)
    # float16 keeps 11 significant bits: each rounding is within 2**-11
    # relative; a handful of them in a row stay within 1%.
    self.assertAllClose(loss16, loss32, rtol=1e-2)
    for got, want in zip(grads16, grads32):
      self.assertAllClose(got, want, rtol=1e-2, atol=1e-3 * np.abs(want).max())
    # Without the scale, float16's backward pass rounds the same gradients
    # (about 1e-7 at the output, float16's subnormal range) to a few
    # significant bits or to zero: every one is off by more than 10%.
    for got, want in zip(unscaled16, grads32):
      self.assertGreater(np.abs(got - want).max(), 0.1 * np.abs(want).max())

  def test_an_overflow_skips_the_step_lowers_the_scale_then_it_grows(self):
    with tf.Graph().as_default():
      weight, inputs, scale, op, applied = _overflow_graph()
      global_step = tf.compat.v1.train.get_global_step()
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        # The loss 1e38 is finite; its gradient times the scale is not.
        _, was_applied = session.run((op, applied), {inputs: [1e38, 0.0]})
        self.assertFalse(was_applied)
        self.assertAllEqual(session.run(weight), [1.0, 2.0])
        self.assertEqual(session.run((scale(), global_step)), (4.0, 0))
        session.run(op, {inputs: [1.0, 3.0]})
        self.assertAllEqual(session.run(weight), [0.5, 0.5])
        self.assertEqual(session.run((scale(), global_step)), (4.0, 1))
        session.run(op, {inputs: [1.0, 3.0]})  # The second good step.
        self.assertAllEqual(session.run(weight), [0.0, -1.0])
        self.assertEqual(session.run((scale(), global_step)), (8.0, 2))

  def test_one_overflowing_micro_batch_skips_its_whole_update(self):
    with tf.Graph().as_default():
      weight, inputs, scale, op, applied = _overflow_graph(
          accumulation_steps=2)
      global_step = tf.compat.v1.train.get_global_step()
      with tf.compat.v1.Session() as session:
        session.run([tf.compat.v1.global_variables_initializer(),
                     tf.compat.v1.local_variables_initializer()])
        flags = [session.run((op, applied), {inputs: x})[1]
                 for x in ([1e38, 0.0], [1.0, 3.0])]
        self.assertEqual(flags, [False, False])
        self.assertAllEqual(session.run(weight), [1.0, 2.0])
        self.assertEqual(session.run((scale(), global_step)), (4.0, 0))
        # The sums start afresh: the next update is of its own two batches.
        for x in ([1.0, 3.0], [3.0, 1.0]):
          session.run(op, {inputs: x})
        self.assertAllEqual(session.run(weight), [0.0, 1.0])
        self.assertEqual(session.run(global_step), 1)

  def test_the_scale_survives_a_checkpoint(self):
    path = self.create_tempdir().full_path + '/model.ckpt'
    with tf.Graph().as_default():
      _, inputs, scale, op, _ = _overflow_graph()
      variables = [v for v in tf.compat.v1.global_variables()
                   if v.name.startswith(updates.LOSS_SCALE_SCOPE + '/')]
      self.assertLen(variables, 2)  # The scale and its count of good steps.
      self.assertEmpty(set(variables) & set(tf.compat.v1.trainable_variables()))
      saver = tf.compat.v1.train.Saver()
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(op, {inputs: [1e38, 0.0]})
        session.run(op, {inputs: [1.0, 1.0]})
        saver.save(session, path)
      updates.check_checkpoint(path.rsplit('/', 1)[0], scale)  # Resumable.
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        self.assertEqual(session.run(scale()), 8.0)
        saver.restore(session, path)
        self.assertEqual(session.run(scale()), 4.0)
        self.assertEqual(session.run(variables[1]), 1)

  def test_resuming_a_checkpoint_without_a_scale_names_the_binding(self):
    model_dir = self.create_tempdir().full_path
    with tf.Graph().as_default():
      tf.compat.v1.get_variable('w', initializer=1.0)
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        tf.compat.v1.train.Saver().save(session, model_dir + '/model.ckpt')
    with tf.Graph().as_default():
      scale = updates.dynamic_loss_scale(updates.UpdateOptions())
      updates.check_checkpoint(self.create_tempdir().full_path, scale)
      updates.check_checkpoint(model_dir, None)
      with self.assertRaisesRegex(
          validation.ConfigurationError,
          r"precision='mixed_float16' but the checkpoint .*model.ckpt has no "
          r'loss scale \(loss_scale/current_loss_scale\)'):
        updates.check_checkpoint(model_dir, scale)

  def test_averages_do_not_move_on_a_skipped_step(self):
    decay = 0.5
    with tf.Graph().as_default():
      weight, inputs, _, op, _ = _overflow_graph(decay)
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        shadow, = [v for v in tf.compat.v1.global_variables()
                   if v.name.startswith(averaging.average_name(weight))]
        session.run(op, {inputs: [1e38, 0.0]})
        self.assertAllEqual(session.run(shadow), [1.0, 2.0])
        session.run(op, {inputs: [1.0, 3.0]})  # Weights -> [0.5, 0.5].
        rate = min(decay, 2.0 / 11.0)  # Global step 1 after the update.
        self.assertAllClose(session.run(shadow),
                            rate * np.array([1.0, 2.0]) + (1 - rate) * 0.5)

  def test_options_refuse_bad_values_naming_the_binding(self):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'UpdateOptions.accumulation_steps'):
      updates.UpdateOptions(accumulation_steps=0)
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'UpdateOptions.initial_loss_scale'):
      updates.UpdateOptions(initial_loss_scale=0.5)

  @parameterized.parameters(
      ('mixed_float16', 1, False, "use 'mixed_bfloat16'"),
      ('mixed_float16', 1, True, "use 'mixed_bfloat16'"),
      ('float32', 2, True, 'accumulation_steps=2 is not supported on a TPU'))
  def test_a_tpu_refuses_float16_and_accumulation(self, precision, steps,
                                                  on_tpu, message):
    options = updates.UpdateOptions(accumulation_steps=steps)
    updates.check_platform(options, precision, tpu=False, on_tpu=False)
    with self.assertRaisesRegex(validation.ConfigurationError, message):
      updates.check_platform(options, precision, tpu=True, on_tpu=on_tpu)

  def test_the_tpu_estimators_cpu_stand_in_accumulates(self):
    updates.check_platform(updates.UpdateOptions(accumulation_steps=2),
                           'mixed_bfloat16', tpu=True, on_tpu=False)


def _regression_step(batch, steps, decay, clip_norm=0.05):
  """Momentum on a float64 tanh regression; rate 0.1 / (1 + global step).

  Gradient multipliers (2 on the bias) and clipping by a norm the gradients
  exceed (0.05; 0 clips nothing) both act on the update's gradient.
  """
  inputs = tf.compat.v1.placeholder(tf.float64, [batch, 3])
  targets = tf.compat.v1.placeholder(tf.float64, [batch, 2])
  kernel = tf.compat.v1.get_variable(
      'dense/kernel', dtype=tf.float64,
      initializer=np.arange(6.0).reshape(3, 2) / 10.0)
  bias = tf.compat.v1.get_variable('dense/bias', dtype=tf.float64,
                                   initializer=np.array([0.1, -0.2]))
  loss = tf.reduce_mean(tf.square(tf.tanh(inputs @ kernel + bias) - targets))
  global_step = tf.compat.v1.train.get_or_create_global_step()
  rate = 0.1 / (1.0 + tf.cast(global_step, tf.float64))
  op, applied = optimizers.train_op(
      tf.compat.v1.train.MomentumOptimizer(rate, 0.9), loss, [kernel, bias],
      [], {'dense/bias': 2.0},
      lambda pairs: optimizers.clip_gradients(pairs, clip_norm),
      update=updates.Update(accumulation_steps=steps))
  op = averaging.apply_after(op, [kernel, bias], decay, applied)
  return inputs, targets, op, applied, [kernel, bias]


def _train(data, batch, steps, clip_norm=0.05):
  """Trains on `data` in runs of `batch` examples; the weights, averages,
  global step and each run's `applied`."""
  images, labels = data
  with tf.Graph().as_default():
    inputs, targets, op, applied, variables = _regression_step(
        batch, steps, decay=0.9, clip_norm=clip_norm)
    shadows = [v for v in tf.compat.v1.global_variables()
               if v.name.endswith(averaging.AVERAGE_NAME + ':0')]
    with tf.compat.v1.Session() as session:
      session.run([tf.compat.v1.global_variables_initializer(),
                   tf.compat.v1.local_variables_initializer()])
      flags = []
      for start in range(0, len(images), batch):
        feed = {inputs: images[start:start + batch],
                targets: labels[start:start + batch]}
        flags.append(session.run((op, applied), feed)[1]
                     if applied is not None else session.run(op, feed))
      return (session.run(variables + shadows +
                          [tf.compat.v1.train.get_global_step()]), flags)


class AccumulationTest(tf.test.TestCase):
  """k micro-batches against one batch k times as large, in float64."""

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_three_micro_batches_equal_one_batch_three_times_as_large(self):
    random = np.random.RandomState(1)
    data = (random.normal(size=[18, 3]), random.uniform(-1, 1, [18, 2]))
    accumulated, flags = _train(data, batch=3, steps=3)
    whole, whole_flags = _train(data, batch=9, steps=1)
    self.assertEqual(flags, [False, False, True] * 2)
    self.assertEqual(whole_flags, [None, None])
    self.assertEqual(accumulated[-1], 2)  # The global step counts updates.
    self.assertEqual(whole[-1], 2)
    self.assertLen(accumulated, 5)  # Kernel, bias, their averages, step.
    for got, want in zip(accumulated[:-1], whole[:-1]):
      self.assertAllClose(got, want, rtol=0, atol=1e-12)
    # The weights moved: the comparison is not of initial values.
    self.assertGreater(np.abs(whole[0] - np.arange(6.0).reshape(3, 2) / 10.0
                              ).max(), 1e-3)

  def test_sums_are_local_and_untrainable(self):
    with tf.Graph().as_default():
      _regression_step(3, 3, decay=None)
      local = [v.name for v in tf.compat.v1.local_variables()]
      self.assertCountEqual(local, [
          updates.ACCUMULATION_SCOPE + '/micro_step:0',
          updates.ACCUMULATION_SCOPE + '/sum_0:0',
          updates.ACCUMULATION_SCOPE + '/sum_1:0'])
      names = [v.name for v in tf.compat.v1.global_variables() +
               tf.compat.v1.trainable_variables()]
      self.assertFalse([n for n in names if updates.ACCUMULATION_SCOPE in n])



def _per_replica(step_fn):
  """Builds `step_fn` on two replicas as Estimator's MirroredStrategy does.

  Returns:
    (the strategy, the step's train op grouped over replicas, step_fn's
    per-replica results).
  """
  strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
  # Estimator's own context: the v1 optimizer takes each replica's loss
  # over the number of replicas, so the all-reduced sum is their mean.
  with strategy.scope(), strategy._scale_loss_for_estimator_enabled():  # pylint: disable=protected-access
    tf.compat.v1.train.get_or_create_global_step()
    results = strategy.extended.call_for_each_replica(
        tf.autograph.experimental.do_not_convert(step_fn))
    return strategy, strategy.group(results[0]), results


class MirroredUpdateTest(tf.test.TestCase, parameterized.TestCase):
  """float16 and accumulation under MirroredStrategy on two CPU devices."""

  def setUp(self):
    super().setUp()
    gin.clear_config()

  @parameterized.parameters(1, 2)
  def test_an_overflow_on_one_replica_skips_the_step_on_both(self, steps):
    def step_fn():
      weight, inputs, scale, op, applied = _overflow_graph(0.5, steps)
      return op, inputs, weight, scale(), applied

    with tf.Graph().as_default():
      strategy, train, (_, inputs, weight, scale, applied) = _per_replica(
          step_fn)
      local = strategy.experimental_local_results
      shadow, = [v for v in tf.compat.v1.global_variables()
                 if v.name.startswith(averaging.average_name(weight))]
      with tf.compat.v1.Session() as session:
        session.run([tf.compat.v1.global_variables_initializer(),
                     tf.compat.v1.local_variables_initializer()])

        def update(*feeds):
          """`steps` runs on the same micro-batches: the last one's flags."""
          flags = [set(session.run((train, local(applied)),
                                   dict(zip(local(inputs), feeds)))[1])
                   for _ in range(steps)]
          self.assertEqual(flags[:-1], [{False}] * (steps - 1))
          return flags[-1]

        self.assertEqual(update([1e38, 0.0], [1.0, 3.0]), {False})
        state = (local(weight), local(scale), local(shadow),
                 tf.compat.v1.train.get_global_step())
        weights, scales, shadows, step = session.run(state)
        self.assertAllEqual(weights, [[1.0, 2.0]] * 2)
        self.assertAllEqual(shadows, [[1.0, 2.0]] * 2)
        self.assertEqual((scales, step), ((4.0, 4.0), 0))  # Halved once.
        # The mean of the replicas' gradients, [2, 2], at rate 0.5.
        self.assertEqual(update([1.0, 3.0], [3.0, 1.0]), {True})
        weights, scales, shadows, step = session.run(state)
        self.assertAllEqual(weights, [[0.0, 1.0]] * 2)
        self.assertEqual((scales, step), ((4.0, 4.0), 1))
        rate = min(0.5, 2.0 / 11.0)  # The decay at global step 1.
        self.assertAllClose(shadows, [rate * np.array([1.0, 2.0]) +
                                      (1 - rate) * np.array([0.0, 1.0])] * 2)

  @parameterized.parameters(('mixed_bfloat16', 1), ('mixed_float16', 1),
                            ('mixed_bfloat16', 2))
  def test_a_mixed_policys_layer_trains_on_both_replicas(self, policy, steps):
    def step_fn():
      # Each replica's layer wraps the mirrored variables in a cast.
      layer = tf.keras.layers.Dense(2, dtype=policy,
                                    kernel_initializer='ones')
      inputs = tf.compat.v1.placeholder(tf.float32, [2, 3])
      loss = tf.reduce_mean(tf.cast(layer(inputs), tf.float32))
      scale = (updates.dynamic_loss_scale(updates.UpdateOptions())
               if policy == 'mixed_float16' else None)
      op, _ = optimizers.train_op(
          tf.compat.v1.train.GradientDescentOptimizer(0.5), loss,
          layer.trainable_variables, [], {}, _no_clip,
          update=updates.Update(loss_scale=scale, accumulation_steps=steps))
      return op, inputs, layer.kernel, layer.bias, layer.compute_dtype

    inputs = np.array([[[1, 2, 3], [3, 2, 1]], [[4, 4, 4], [0, 0, 8]]],
                      np.float32)  # Per replica; exact in bfloat16.
    with tf.Graph().as_default():
      strategy, train, (_, feeds, kernel, bias, dtype) = _per_replica(
          step_fn)
      local = strategy.experimental_local_results
      with tf.compat.v1.Session() as session:
        session.run([tf.compat.v1.global_variables_initializer(),
                     tf.compat.v1.local_variables_initializer()])
        for _ in range(steps):
          session.run(train, dict(zip(local(feeds), inputs)))
        kernels, biases = session.run((local(kernel), local(bias)))
    self.assertEqual(set(local(dtype)), {policy.split('_')[1]})
    # The mean of the 2 outputs of 4 examples: d/dkernel is each input
    # feature's mean over the examples, over 2; d/dbias is 1/2.
    feature_means = inputs.reshape(4, 3).mean(axis=0)
    for value in kernels:
      self.assertAllEqual(value, np.ones([3, 2]) - 0.5 * np.stack(
          [feature_means / 2] * 2, axis=1))
    self.assertAllEqual(biases, [[-0.25, -0.25]] * 2)

  def test_every_replica_finds_the_scale_in_a_checkpoint(self):
    model_dir = self.create_tempdir().full_path
    with tf.Graph().as_default():
      updates.dynamic_loss_scale(updates.UpdateOptions())
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        tf.compat.v1.train.Saver().save(session, model_dir + '/model.ckpt')
    with tf.Graph().as_default():
      # The second replica reads its own copy, 'loss_scale/.../replica_1'.
      _per_replica(lambda: (tf.no_op(), updates.check_checkpoint(
          model_dir, updates.dynamic_loss_scale(updates.UpdateOptions()))))

  def test_two_replicas_of_micro_batches_equal_one_batch_of_all(self):
    random = np.random.RandomState(2)
    images, labels = random.normal(size=[36, 3]), random.uniform(-1, 1,
                                                                 [36, 2])
    with tf.Graph().as_default():
      def step_fn():
        # Without averages: float64 slots cannot be shared by replicas.
        inputs, targets, op, applied, variables = _regression_step(
            3, 3, None, clip_norm=0.0)
        return op, inputs, targets, applied, variables

      strategy, train, (_, inputs, targets, applied, variables) = (
          _per_replica(step_fn))
      local = strategy.experimental_local_results
      with tf.compat.v1.Session() as session:
        session.run([tf.compat.v1.global_variables_initializer(),
                     tf.compat.v1.local_variables_initializer()])
        flags = []
        for start in range(0, 36, 6):  # 3 examples to each replica.
          feed = {}
          for replica in range(2):
            chunk = slice(start + 3 * replica, start + 3 * replica + 3)
            feed[local(inputs)[replica]] = images[chunk]
            feed[local(targets)[replica]] = labels[chunk]
          flags.append(session.run((train, local(applied)), feed)[1])
        got = session.run([local(v) for v in variables] +
                          [tf.compat.v1.train.get_global_step()])
    self.assertEqual(flags, [(False, False), (False, False), (True, True)] * 2)
    # One device, batches of all 18 examples of the 3 runs of 2 replicas.
    want, _ = _train((images, labels), 18, 1, clip_norm=0.0)
    self.assertEqual(got[-1], want[-1])
    self.assertEqual(want[-1], 2)
    for replicas, value in zip(got[:-1], want[:2]):  # Kernel, bias.
      for copy in replicas:
        self.assertAllClose(copy, value, rtol=0, atol=1e-12)


if __name__ == '__main__':
  tf.test.main()
