"""How a training step updates the weights: float16 loss scaling and gradient accumulation."""

import dataclasses
import functools
import re
from typing import Any, Optional

import gin
import tensorflow as tf

from official_seg import validation

# Why tf.compat.v1.mixed_precision.DynamicLossScale and not Keras's
# LossScaleOptimizer: the train op runs a tf.compat.v1 optimizer in an
# Estimator graph, and Keras's wraps only Keras optimizers. Why not
# MixedPrecisionLossScaleOptimizer, which wraps this same loss scale: it
# keeps whether a step was applied to itself, and weight averaging,
# summaries and accumulation need it.
LOSS_SCALE_SCOPE = 'loss_scale'
ACCUMULATION_SCOPE = 'gradient_accumulation'


@gin.configurable
@validation.checked(accumulation_steps=validation.POSITIVE_WHOLE,
                    loss_scale_growth_steps=validation.POSITIVE_WHOLE)
@dataclasses.dataclass(frozen=True)
class UpdateOptions:
  """How gradients become an update of the weights.

  Attributes:
    accumulation_steps: int >= 1. The mean gradient of this many
      micro-batches (each TRAIN_BATCH_SIZE) is applied once; the global
      step, learning-rate schedule, weight averages, summaries and
      checkpoints count updates. 1 applies every batch (no accumulators).
    initial_loss_scale: float >= 1, float16's first loss scale (with
      `ModelFnOptions.precision = 'mixed_float16'` only).
    loss_scale_growth_steps: int >= 1; the loss scale doubles after this
      many updates in a row with finite gradients, and halves (not below 1)
      at a step with any non-finite gradient, which is skipped.
  """

  accumulation_steps: int = 1
  initial_loss_scale: float = 2.0**15
  loss_scale_growth_steps: int = 2000

  def __post_init__(self):
    validation.check(
        UpdateOptions, accumulation_steps=self.accumulation_steps,
        loss_scale_growth_steps=self.loss_scale_growth_steps)
    scale = self.initial_loss_scale
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not (
        scale >= 1):
      raise validation.ConfigurationError(
          f'UpdateOptions.initial_loss_scale={scale!r}: use a number >= 1, '
          'e.g. 32768.0 (2**15).')


def dynamic_loss_scale(options):
  """float16's dynamic loss scale; its two variables are saved in checkpoints.

  Args:
    options: an `UpdateOptions`.

  Returns:
    A `tf.compat.v1.mixed_precision.DynamicLossScale`: called, the current
    scale (float32 scalar); its `update(grads)` lowers or grows it.
  """
  with tf.compat.v1.name_scope(LOSS_SCALE_SCOPE):
    return tf.compat.v1.mixed_precision.DynamicLossScale(
        initial_loss_scale=options.initial_loss_scale,
        increment_period=options.loss_scale_growth_steps, multiplier=2.0)


def build_update(options, precision, use_tpu):
  """The training step's `Update`: float16's loss scale, accumulation.

  Args:
    options: an `UpdateOptions`.
    precision: str, `ModelFnOptions.precision`.
    use_tpu: bool, the step runs on a TPU.

  Returns:
    An `Update`, with a new `dynamic_loss_scale` for 'mixed_float16'.

  Raises:
    validation.ConfigurationError: see `check_platform`.
  """
  check_platform(options, precision, use_tpu, use_tpu)
  loss_scale = (dynamic_loss_scale(options)
                if precision == 'mixed_float16' else None)
  return Update(loss_scale=loss_scale,
                accumulation_steps=options.accumulation_steps)


def check_checkpoint(model_dir, loss_scale):
  """Fails clearly when float16 would resume a run trained without it.

  Args:
    model_dir: str; its latest checkpoint, if any, is checked.
    loss_scale: the run's `dynamic_loss_scale`, or None (nothing checked).

  Raises:
    validation.ConfigurationError: the checkpoint has no loss scale.
  """
  latest = loss_scale and tf.train.latest_checkpoint(model_dir)
  if not latest:
    return
  # The scale's read op takes the variable's handle, named as its key; a
  # strategy's other replicas read copies named '<key>/replica_<i>'.
  name = re.sub(r'/replica_\d+$', '', loss_scale().op.inputs[0].op.name)
  keys = tf.train.load_checkpoint(latest).get_variable_to_shape_map()
  if name not in keys:
    raise validation.ConfigurationError(
        "ModelFnOptions.precision='mixed_float16' but the checkpoint "
        f'{latest} has no loss scale ({name}): it was trained in another '
        'precision. Train into a new --model_dir (with INIT_CHECKPOINT set '
        'to it to start from its weights), or keep its precision.')


@dataclasses.dataclass
class Update:
  """The update of one training step, handed to `optimizers.train_op`.

  Attributes:
    loss_scale: a `DynamicLossScale` (from `dynamic_loss_scale`), or None:
      float16 training multiplies the loss by it before the gradients,
      divides the gradients by it, and skips a step with a non-finite
      gradient.
    accumulation_steps: int, micro-batches per update (`UpdateOptions`).
  """

  loss_scale: Optional[Any] = None
  accumulation_steps: int = 1

  @property
  def conditional(self):
    """Whether some runs of the train op leave the weights as they are."""
    return self.loss_scale is not None or self.accumulation_steps > 1

  def scale_loss(self, loss):
    """The loss the gradients are taken of."""
    if self.loss_scale is None:
      return loss
    return loss * tf.cast(self.loss_scale(), loss.dtype)

  def unscale(self, grads_and_vars):
    """Divides the gradients of the scaled loss by the scale."""
    if self.loss_scale is None:
      return grads_and_vars
    reciprocal = 1.0 / self.loss_scale()
    return [(_times(g, reciprocal), v) for g, v in grads_and_vars]

  def accumulate(self, grads_and_vars):
    """The gradients to apply and when; see `accumulated_mean`."""
    if self.accumulation_steps == 1:
      return grads_and_vars, None
    return accumulated_mean(grads_and_vars, self.accumulation_steps)

  def apply(self, apply_fn, grads_and_vars, accumulation):
    """Applies the gradients when the step is due and finite.

    Under a strategy (in its replica context) the decision is taken once, in
    cross-replica context, so every replica skips or applies alike: a
    conditional all-reduce built in replica context would need each
    replica's branch to join it, which a graph's `tf.cond` cannot hold.

    Args:
      apply_fn: apply_fn(grads_and_vars) -> the op that applies them and
        increments the global step; called in replica context.
      grads_and_vars: the gradients `accumulate` returned, after
        multipliers and clipping.
      accumulation: what `accumulate` returned second.

    Returns:
      bool scalar tensor: whether this run changed the weights (and the
      global step); running it runs the whole update.
    """
    due = None if accumulation is None else accumulation.is_update
    if tf.distribute.has_strategy() and not (
        tf.distribute.in_cross_replica_context()):
      # The first replica's merge function runs, with its `apply_fn`.
      applied = tf.distribute.get_replica_context().merge_call(
          functools.partial(self._apply_across, apply_fn),
          args=(grads_and_vars, due))
    else:
      applied = self._apply_when_due(apply_fn, grads_and_vars, due)
    if accumulation is None:
      return applied
    return _after([accumulation.advance()], applied)

  def _apply_across(self, apply_fn, strategy, grads_and_vars, due):
    """`apply` in a strategy's cross-replica context; values per replica."""
    def apply_all(pairs):
      return strategy.group(strategy.extended.call_for_each_replica(
          apply_fn, args=([(g, _one(strategy, v)) for g, v in pairs],)))

    if due is not None:  # Every replica counts the same micro-batches.
      due = strategy.experimental_local_results(due)[0]
    return self._apply_when_due(apply_all, grads_and_vars, due)

  def _apply_when_due(self, apply_fn, grads_and_vars, due):
    """Applies if `due` (None: always) and the gradients are finite."""
    if due is None:
      return self._apply_if_finite(apply_fn, grads_and_vars)
    return tf.cond(due,
                   lambda: self._apply_if_finite(apply_fn, grads_and_vars),
                   lambda: tf.constant(False))

  def _apply_if_finite(self, apply_fn, grads_and_vars):
    """With a loss scale, skips non-finite gradients and updates the scale.

    In cross-replica context the scale's update all-reduces whether every
    replica's gradients are finite.
    """
    if self.loss_scale is None:
      return _after([apply_fn(grads_and_vars)], tf.constant(True))
    scale_update, finite = self.loss_scale.update(
        [g for g, _ in grads_and_vars])
    applied = tf.cond(finite, lambda: apply_fn(grads_and_vars), tf.no_op)
    return _after([applied, scale_update], finite)


def _one(strategy, variable):
  """The variable itself, not each replica's wrapper of it.

  A mixed policy's layers wrap their variables in a cast per replica; these
  come to cross-replica context grouped per replica, and any one of them
  updates the same mirrored variable.
  """
  if isinstance(variable, tf.Variable):
    return variable
  return strategy.experimental_local_results(variable)[0]


def _after(ops, value):
  """`value`, read once `ops` have run."""
  with tf.control_dependencies(ops):
    return tf.identity(value)


def _times(grad, factor):
  """A dense or sparse gradient (or None) times a scalar."""
  if grad is None:
    return None
  factor = tf.cast(factor, grad.dtype)
  if isinstance(grad, tf.IndexedSlices):
    return tf.IndexedSlices(grad.values * factor, grad.indices,
                            grad.dense_shape)
  return grad * factor


@dataclasses.dataclass
class Accumulation:
  """One micro-batch's part of gradient accumulation (`accumulated_mean`).

  Attributes:
    is_update: bool scalar tensor, whether this micro-batch completes an
      update.
    advance: advance() -> op: stores the sums with this micro-batch's
      gradients and counts it, or, when `is_update`, sets them to zero.
  """

  is_update: tf.Tensor
  advance: Any


def _local(name, initial_value):
  """A non-trainable local variable: not in checkpoints, zero each session.

  Under a strategy each replica keeps its own copy (its own gradients'
  sums), read and written in its replica context.
  """
  return tf.compat.v1.Variable(
      initial_value, trainable=False, name=name,
      collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES],
      synchronization=tf.VariableSynchronization.ON_READ,
      aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


def accumulated_mean(grads_and_vars, steps):
  """The mean gradient of `steps` micro-batches, from local sums.

  The sums are local variables: checkpoints never hold them, and a new
  session (a resumed or restarted run) starts an update afresh, which
  loses at most `steps` - 1 micro-batches. Checkpoints saved by the
  global step fall after an update, when the sums are zero. Under a
  strategy the sums are each replica's own; the optimizer all-reduces
  their means once, at the update.

  Args:
    grads_and_vars: this micro-batch's (gradient or None, variable) pairs,
      of its mean loss.
    steps: int > 1.

  Returns:
    (list of (mean gradient or None, variable): the mean over the micro-
    batches so far including this one, divided by `steps`, which is the
    update's gradient when `is_update`; an `Accumulation`).
  """
  with tf.compat.v1.variable_scope(ACCUMULATION_SCOPE):
    count = _local('micro_step', tf.constant(0, tf.int64))
    sums = [None if g is None else _local(
        f'sum_{i}', tf.zeros(v.shape, g.dtype))
            for i, (g, v) in enumerate(grads_and_vars)]
  totals = [None if g is None else s + tf.convert_to_tensor(g)
            for s, (g, _) in zip(sums, grads_and_vars)]
  means = [(None if t is None else t / steps, v)
           for t, (_, v) in zip(totals, grads_and_vars)]
  is_update = tf.equal(count + 1, steps)

  def advance():
    # The sums are read into `totals` before these writes (data edges).
    return tf.group(
        [s.assign(tf.where(is_update, tf.zeros_like(t), t))
         for s, t in zip(sums, totals) if s is not None] +
        [count.assign(tf.where(is_update, tf.constant(0, tf.int64),
                               count + 1))])

  return means, Accumulation(is_update=is_update, advance=advance)


def check_platform(options, precision, tpu, on_tpu):
  """Refuses what float16 and accumulation do not run under.

  Accumulation keeps each replica's sums in local variables; TPUEstimator
  has no per-shard variables, so on a TPU the shards would write their own
  sums into the same ones. Its CPU stand-in builds the one-device step.

  Args:
    options: an `UpdateOptions`.
    precision: str, `ModelFnOptions.precision`.
    tpu: bool, a TPUEstimator (on a TPU or its CPU stand-in).
    on_tpu: bool, on a TPU.

  Raises:
    validation.ConfigurationError: float16 with a TPUEstimator, or
      accumulation on a TPU.
  """
  if (tpu or on_tpu) and precision == 'mixed_float16':
    raise validation.ConfigurationError(
        "ModelFnOptions.precision='mixed_float16' is for GPUs; on a TPU use "
        "'mixed_bfloat16' (gin/platforms/tpu.gin).")
  if on_tpu and options.accumulation_steps > 1:
    raise validation.ConfigurationError(
        f'UpdateOptions.accumulation_steps={options.accumulation_steps} is '
        'not supported on a TPU (it runs on the CPU without --tpu); use 1 '
        'there.')
