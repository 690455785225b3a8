"""Optimizers, fine-tuning controls and the training step, bound in gin."""

import re

import gin
import gin.tf.external_configurables  # pylint: disable=unused-import
import tensorflow as tf

from official_seg import validation
from official_seg.training import updates

# gin files name the tf.compat.v1 optimizers that gin.tf registers, e.g.
# @tf.train.MomentumOptimizer: TPUEstimator's CrossShardOptimizer wraps only
# tf.compat.v1 optimizers.

# Keras layers name their bias 'bias'; DeepLab's slim layers 'biases'.
_BIAS = re.compile(r'(^|/)bias(es)?$')


def variable_name(variable):
  """The name checkpoints, reports and gin regexes use: no ':0' suffix."""
  return variable.name.split(':')[0]


def compile_patterns(patterns, binding):
  """Compiles the regular expressions of a gin binding.

  Args:
    patterns: list of str regular expressions.
    binding: str, the gin binding they come from, for error messages.

  Returns:
    List of compiled `re.Pattern`s.

  Raises:
    ValueError: `patterns` is a string rather than a list, or one does not
      compile; the message names `binding`.
  """
  if isinstance(patterns, str):
    raise validation.ConfigurationError(
        f'{binding} must be a list of regular expressions, not '
        f'the string {patterns!r}; write [{patterns!r}].')
  try:
    return [re.compile(pattern) for pattern in patterns]
  except re.error as error:
    raise validation.ConfigurationError(
        f'{binding}: {error.pattern!r} is not a valid regular '
        f'expression ({error}).') from error


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


@gin.configurable(denylist=['variables'])
def trainable_variables(variables, freeze=()):
  """The variables the optimizer updates: all but the frozen ones.

  Batch-norm statistics are not trainable variables: a frozen layer's
  statistics follow FINE_TUNE_BATCH_NORM.

  Args:
    variables: list of trainable `tf.Variable`s.
    freeze: list of regular expressions; a variable whose name matches one
      (`re.search`) is not updated.

  Returns:
    List of `tf.Variable`s.

  Raises:
    ValueError: a pattern matches no variable, which is most likely a typo.
  """
  patterns = compile_patterns(freeze, 'trainable_variables.freeze')
  names = [variable_name(v) for v in variables]
  for pattern in patterns:
    if not any(pattern.search(name) for name in names):
      raise validation.ConfigurationError(
          f'trainable_variables.freeze: {pattern.pattern!r} matches no '
          f'trainable variable; names look like {names[:2]} and '
          f'{names[-1:]}. Fix or remove the pattern.')
  kept = [v for v, name in zip(variables, names)
          if not any(p.search(name) for p in patterns)]
  if patterns:
    tf.compat.v1.logging.info('Freezing %d of %d trainable variables.',
                              len(variables) - len(kept), len(variables))
  return kept


@gin.configurable(denylist=['variables', 'last_layers'])
def gradient_multipliers(variables, last_layers=(),
                         last_layer_gradient_multiplier=1.0,
                         bias_multiplier=1.0):
  """DeepLab's gradient multipliers (train_utils.model_gradient_multipliers).

  Args:
    variables: list of trainable `tf.Variable`s.
    last_layers: list of regular expressions naming the last layers
      (`ModelFnOptions.last_layers`, macro LAST_LAYERS), handed in by the
      runtime, which hands the same list to the warm start.
    last_layer_gradient_multiplier: float, scales last-layer gradients.
    bias_multiplier: float, further scales every bias gradient; DeepLab uses
      2.0, so a last-layer bias gets 2 * last_layer_gradient_multiplier.

  Returns:
    Dict of variable name to factor, for the factors that are not 1.
  """
  patterns = compile_patterns(last_layers, 'LAST_LAYERS')
  factors = {}
  for name in map(variable_name, variables):
    factor = 1.0
    if any(pattern.search(name) for pattern in patterns):
      factor *= last_layer_gradient_multiplier
    if _BIAS.search(name):
      factor *= bias_multiplier
    if factor != 1.0:
      factors[name] = factor
  if factors:
    tf.compat.v1.logging.info('Gradient multipliers: %s', factors)
  return factors


def scale_gradients(grads_and_vars, multipliers):
  """Multiplies each variable's gradient by its factor.

  Written here because slim's `multiply_gradients`, which DeepLab used, is not
  part of TF 2, and Keras optimizers have no per-variable rates.

  Args:
    grads_and_vars: list of (gradient or None, variable) pairs.
    multipliers: dict of variable name to float factor; others keep 1.

  Returns:
    List of (gradient, variable) pairs.
  """
  scaled = []
  for grad, var in grads_and_vars:
    factor = multipliers.get(variable_name(var))
    if grad is not None and factor is not None:
      if isinstance(grad, tf.IndexedSlices):
        grad = tf.IndexedSlices(grad.values * factor, grad.indices,
                                grad.dense_shape)
      else:
        grad = grad * factor
    scaled.append((grad, var))
  return scaled


@gin.configurable(denylist=['grads_and_vars'])
def clip_gradients(grads_and_vars, gradient_clipping_by_norm=0.0):
  """Clips the gradients by their global norm (the seed trainers' option).

  Args:
    grads_and_vars: list of (gradient or None, variable) pairs.
    gradient_clipping_by_norm: float; gradients whose global norm exceeds it
      are scaled down to it (`tf.clip_by_global_norm`); 0 leaves them as
      they are.

  Returns:
    (list of (gradient, variable) pairs, float scalar tensor: the global norm
    before clipping).
  """
  grads = [grad for grad, _ in grads_and_vars]
  norm = tf.linalg.global_norm([g for g in grads if g is not None])
  if gradient_clipping_by_norm:
    grads, _ = tf.clip_by_global_norm(grads, gradient_clipping_by_norm,
                                      use_norm=norm)
  return list(zip(grads, [var for _, var in grads_and_vars])), norm


def _run_after(checks, update_ops):
  """Makes each update op (batch-norm moving statistics) wait for `checks`.

  The model built these ops before the loss existed, so a control-dependency
  scope around them is no longer possible; without an edge from the checks
  they would run in parallel with them and write a failing step's
  statistics. Written by hand: no public TensorFlow API adds an input to an
  existing op.
  """
  for update in update_ops:
    getattr(update, 'op', update)._add_control_inputs(checks)  # pylint: disable=protected-access


def train_op(optimizer, loss, variables, update_ops, multipliers, clip,
             scalars=None, update=None):
  """One training step: gradients, batch-norm updates, global step.

  Args:
    optimizer: a `tf.compat.v1.train.Optimizer`.
    loss: scalar float tensor.
    variables: list of the variables to train (`trainable_variables`: the
      frozen ones left out).
    update_ops: list of ops (batch-norm moving averages) to run each step.
    multipliers: dict of variable name to gradient factor
      (`gradient_multipliers`).
    clip: clip(grads_and_vars) -> (grads_and_vars, float32 global norm
      before clipping), e.g. `clip_gradients`.
    scalars: optional dict; 'gradient_norm' (before clipping) is added to
      it, for the summaries.
    update: an `updates.Update` (float16 loss scaling, gradient
      accumulation), or None: every run applies its gradients. Multipliers
      and clipping act on the update's (unscaled, mean) gradients.

  Returns:
    (train op, applied): applied is None without `update` (or with one that
    applies every run) on one device, else a bool scalar tensor, whether
    this run changed the weights and the global step. The train op fails with
    InvalidArgumentError naming the step when the loss is NaN or Inf, or,
    without a loss scale (which skips such steps), the gradients are,
    before any variable (trainable, batch-norm statistic or global step) is
    changed.
  """
  update = update or updates.Update()
  global_step = tf.compat.v1.train.get_or_create_global_step()
  finite = tf.debugging.Assert(
      tf.math.is_finite(loss),
      [validation.CHECK_MARK, 'Loss is NaN or Inf at global step', global_step,
       'loss', loss])
  with tf.control_dependencies([finite]):
    grads_and_vars = update.unscale(optimizer.compute_gradients(
        update.scale_loss(loss), var_list=variables))
  grads_and_vars, accumulation = update.accumulate(grads_and_vars)
  grads_and_vars = scale_gradients(grads_and_vars, multipliers)
  grads_and_vars, gradient_norm = clip(grads_and_vars)
  if scalars is not None:
    scalars['gradient_norm'] = gradient_norm
  checks = [finite] + ([] if update.loss_scale else [_grads_finite(
      grads_and_vars, global_step)])
  _run_after(checks, update_ops)
  with tf.control_dependencies(update_ops + checks[1:]):
    # A strategy's replicas meet in `Update.apply`, which also resolves a
    # mixed policy's per-replica variable wrappers to one variable.
    if update.conditional or tf.distribute.has_strategy():
      applied = update.apply(
          lambda pairs: optimizer.apply_gradients(pairs,
                                                  global_step=global_step),
          grads_and_vars, accumulation)
      step = applied.op
    else:
      applied = None
      step = optimizer.apply_gradients(grads_and_vars,
                                       global_step=global_step)
  # Registered so hooks find the step's ops without looking up names
  # (tools/benchmark.py counts the FLOPs of the ops it runs).
  tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.TRAIN_OP, step)
  return step, applied


def _grads_finite(grads_and_vars, global_step):
  """Fails when a gradient is NaN or Inf.

  A finite loss can still have NaN gradients (e.g. from Inf inputs): checked
  too, so no NaN reaches a variable or a checkpoint.
  """
  return tf.debugging.Assert(
      tf.math.is_finite(tf.linalg.global_norm(
          [grad for grad, _ in grads_and_vars if grad is not None])),
      [validation.CHECK_MARK, 'Gradients are NaN or Inf at global step',
       global_step])
