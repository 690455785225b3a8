"""Exponential moving averages of the weights: kept by training, restored for evaluation and export."""

import tensorflow as tf

from official_seg import validation

# The `weights` field of metrics.jsonl records: which weights were scored.
RAW = 'raw'
MOVING_AVERAGE = 'moving_average'
# tf.compat.v1.train.ExponentialMovingAverage's default name: the checkpoint
# key of a variable's average is '<variable name>/ExponentialMovingAverage'.
AVERAGE_NAME = 'ExponentialMovingAverage'
_BINDING = 'ModelFnOptions.moving_average_decay'

# Why tf.compat.v1.train.ExponentialMovingAverage and not Model Garden's
# ExponentialMovingAverage optimizer: that one wraps Keras legacy optimizers
# and swaps weights through a strategy, while our train op runs a
# tf.compat.v1 optimizer (TPUEstimator's CrossShardOptimizer wraps only
# those) in an Estimator graph. The slim, object detection and TPU
# EfficientNet trainers average the same way: the train op updates shadow
# variables, a Saver restores them in place of the weights.


def check_decay(decay):
  """Raises ValueError unless `decay` is None (off) or a float in (0, 1)."""
  if decay is None:
    return
  if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not (
      0.0 < decay < 1.0):
    raise validation.ConfigurationError(
        f'{_BINDING}={decay!r}: use a float in (0, 1) such as '
        '0.9999 (DeepLab), or None to keep no averages.')


def scored_weights(decay):
  """`MOVING_AVERAGE` when averages are kept and restored, else `RAW`."""
  return MOVING_AVERAGE if decay else RAW


def average_name(variable):
  """The checkpoint key of `variable`'s average."""
  return f'{variable.name.split(":")[0]}/{AVERAGE_NAME}'


def apply_after(train_op, variables, decay, applied=None):
  """Updates the averages of `variables` after each step of `train_op`.

  The decay is min(decay, (1 + step) / (10 + step)), so the averages
  forget the variables' initial values (random, before a warm start
  replaces them) within the first steps.

  Args:
    train_op: the op of one training step; it increments the global step.
    variables: list of the trainable `tf.Variable`s to average; batch-norm
      moving statistics are left out and restored as they are.
    decay: float in (0, 1), or None to return `train_op` unchanged.
    applied: None (every run of `train_op` is an update), or a bool scalar
      tensor: whether this run updated the weights (`optimizers.train_op`'s
      second result). A run that did not (a float16 step skipped, a
      micro-batch of an accumulation) leaves the averages exactly as they
      are: its decay is 1.

  Returns:
    An op that runs `train_op`, then updates the averages.
  """
  if not decay:
    return train_op
  global_step = tf.compat.v1.train.get_or_create_global_step()
  if applied is None:
    average = tf.compat.v1.train.ExponentialMovingAverage(
        decay, num_updates=global_step, name=AVERAGE_NAME)
    with tf.control_dependencies([train_op]):
      return average.apply(variables)
  with tf.control_dependencies([train_op]):
    step = tf.cast(global_step, tf.float32)
    warm = tf.minimum(tf.constant(decay, tf.float32), (1.0 + step) /
                      (10.0 + step))
    average = tf.compat.v1.train.ExponentialMovingAverage(
        tf.where(applied, warm, 1.0), name=AVERAGE_NAME)
    return average.apply(variables)


def restore_scaffold_fn(variables, decay):
  """A TPUEstimatorSpec `scaffold_fn` that restores the averages.

  Its Saver loads each variable's average into the variable and every other
  variable (batch-norm statistics, the global step) as it is. Estimator
  restores EVAL and PREDICT graphs with it, and `export_saved_model` saves
  the SavedModel with it, so evaluation, prediction and exports all run the
  averaged weights.

  Args:
    variables: the same list `apply_after` averaged in training.
    decay: the decay training used, or None.

  Returns:
    A callable returning a `tf.compat.v1.train.Scaffold`, or None when no
    averages are kept.
  """
  if not decay:
    return None

  def scaffold_fn():
    average = tf.compat.v1.train.ExponentialMovingAverage(decay,
                                                          name=AVERAGE_NAME)
    saver = tf.compat.v1.train.Saver(average.variables_to_restore(variables),
                                     sharded=True)
    return tf.compat.v1.train.Scaffold(saver=saver)

  return scaffold_fn


def check_checkpoint(model_dir, variables, decay):
  """Fails clearly when training would resume without the averages.

  Args:
    model_dir: str; its latest checkpoint, if any, is checked.
    variables: the variables `apply_after` averages.
    decay: float or None; None checks nothing.

  Raises:
    ValueError: the checkpoint has no averages (it was trained without
      them); the message names the binding and the checkpoint.
  """
  latest = decay and tf.train.latest_checkpoint(model_dir)
  if not latest:
    return
  keys = tf.train.load_checkpoint(latest).get_variable_to_shape_map()
  missing = [average_name(v) for v in variables if average_name(v) not in keys]
  if missing:
    raise validation.ConfigurationError(
        f'{_BINDING}={decay} but the checkpoint {latest} has no moving '
        f'averages ({len(missing)} missing, e.g. {missing[0]}): it was '
        'trained without them. Train into a new --model_dir (with '
        'INIT_CHECKPOINT set to it to start from its weights), or set '
        f'{_BINDING} = None.')
