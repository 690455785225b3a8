"""Run configs and estimators: Estimator or TPUEstimator, with batch semantics."""

import gin
import tensorflow as tf

from official_seg.data import input_fn as input_lib
from official_seg.training import model_fn as model_fn_lib

tpu = tf.compat.v1.estimator.tpu
# Strategies are named in gin platform files as @tf.distribute.<Name>().
for _strategy in (tf.distribute.MirroredStrategy,
                  tf.distribute.MultiWorkerMirroredStrategy):
  gin.external_configurable(_strategy, module='tf.distribute')


def per_replica_batch_size(global_batch_size, num_replicas, name):
  """Splits a global batch evenly over replicas.

  Args:
    global_batch_size: int, the experiment's batch size.
    num_replicas: int, replicas sharing it.
    name: str, the gin binding that set the batch size, for the message.

  Returns:
    int, the batch of one replica.

  Raises:
    ValueError: the replicas cannot split the batch evenly.
  """
  if global_batch_size % num_replicas:
    raise ValueError(
        f'{name}={global_batch_size} cannot be split evenly over '
        f'{num_replicas} replicas; use a multiple of {num_replicas}.')
  return global_batch_size // num_replicas


@gin.configurable(denylist=['model_dir'])
def build_run_config(model_dir,
                     save_checkpoints_steps=500,
                     keep_checkpoint_max=5,
                     log_step_count_steps=50,
                     tf_random_seed=None,
                     train_distribute=None,
                     iterations_per_loop=100):
  """Builds a TPU RunConfig; it is also a valid RunConfig for Estimator.

  Args:
    model_dir: str.
    save_checkpoints_steps: int, steps between checkpoints.
    keep_checkpoint_max: int, checkpoints kept.
    log_step_count_steps: int, steps between progress log lines.
    tf_random_seed: optional int, graph-level seed.
    train_distribute: optional `tf.distribute.Strategy` (Estimator only).
    iterations_per_loop: int, TPU steps per host round trip.

  Returns:
    A `tf.compat.v1.estimator.tpu.RunConfig`.
  """
  return tpu.RunConfig(
      model_dir=model_dir,
      save_checkpoints_steps=save_checkpoints_steps,
      keep_checkpoint_max=keep_checkpoint_max,
      log_step_count_steps=log_step_count_steps,
      save_summary_steps=save_checkpoints_steps,
      tf_random_seed=tf_random_seed,
      train_distribute=train_distribute,
      tpu_config=tpu.TPUConfig(iterations_per_loop=iterations_per_loop))


def _with_batch(input_fn, batch_size):
  """Adapts a TPUEstimator-contract input_fn to Estimator's fixed params."""
  def wrapped(params, input_context=None):
    return input_fn(dict(params, batch_size=batch_size), input_context)
  return wrapped


@gin.configurable(denylist=['run_config'])
def build_estimator(run_config,
                    train_batch_size=gin.REQUIRED,
                    eval_batch_size=gin.REQUIRED,
                    use_tpu_estimator=False,
                    use_tpu=False):
  """Builds the estimator and its train and eval input_fns.

  Batch sizes are global: a strategy's replicas each get an equal share, and
  the learning rate is never rescaled.

  Args:
    run_config: from `build_run_config`.
    train_batch_size: int, global training batch.
    eval_batch_size: int, global evaluation batch.
    use_tpu_estimator: bool, build a TPUEstimator instead of an Estimator.
    use_tpu: bool, whether the TPUEstimator runs on a real TPU.

  Returns:
    (estimator, train_input_fn, eval_input_fn).

  Raises:
    ValueError: a batch size that the replicas cannot split.
  """
  train_fn = input_lib.make_input_fn(is_training=True)
  eval_fn = input_lib.make_input_fn(is_training=False)
  if use_tpu_estimator:
    estimator = tpu.TPUEstimator(
        model_fn=model_fn_lib.model_fn, config=run_config, use_tpu=use_tpu,
        train_batch_size=train_batch_size, eval_batch_size=eval_batch_size,
        predict_batch_size=eval_batch_size)
    return estimator, train_fn, eval_fn
  strategy = run_config.train_distribute
  replicas = strategy.num_replicas_in_sync if strategy else 1
  train_batch = per_replica_batch_size(
      train_batch_size, replicas, 'build_estimator.train_batch_size')
  estimator = tf.estimator.Estimator(
      model_fn=model_fn_lib.estimator_model_fn, config=run_config,
      params={'use_tpu': False})
  return (estimator, _with_batch(train_fn, train_batch),
          _with_batch(eval_fn, eval_batch_size))
