"""Run configs and estimators: Estimator or TPUEstimator, with batch semantics."""

import collections

import gin
import tensorflow as tf
from tensorflow_estimator.python.estimator import run_config as estimator_run_config

from official_seg.data import input_fn as input_lib
from official_seg.runtime import cluster
from official_seg.runtime import tpu_estimator
from official_seg.training import model_fn as model_fn_lib

tpu = tf.compat.v1.estimator.tpu
# Named in gin platform files as @tf.distribute.<Name>. The names are given
# explicitly: MultiWorkerMirroredStrategy's class is named
# CollectiveAllReduceStrategy.
for _name in ('MirroredStrategy', 'MultiWorkerMirroredStrategy',
              'NcclAllReduce', 'HierarchicalCopyAllReduce',
              'ReductionToOneDevice'):
  gin.external_configurable(getattr(tf.distribute, _name), name=_name,
                            module='tf.distribute')

# The TPU the binary's --tpu, --tpu_zone and --gcp_project flags name; tpu
# None or '' means no TPU.
TpuAddress = collections.namedtuple('TpuAddress', 'tpu zone project')


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


def num_replicas(run_config):
  """Replicas that share one training step's batch, or None if only a TPU knows.

  Asynchronous parameter-server workers each apply their own updates, so one
  step's batch belongs to one worker.
  """
  if run_config.cluster:
    return run_config.tpu_config.num_shards
  strategy = run_config.train_distribute
  return strategy.num_replicas_in_sync if strategy else 1


def _strategy(train_distribute):
  """The strategy instance; a constructor is called only by training tasks."""
  if not callable(train_distribute):  # None, or a strategy instance.
    return train_distribute
  # Built here, after TF_CONFIG is read and before the estimator makes any
  # op; evaluators and parameter servers never join the workers' group.
  return train_distribute() if cluster.trains() else None


def _session_config(inter_op_threads, intra_op_threads):
  """The cluster's session config, with thread counts if any is set."""
  config = cluster.session_config()
  if not (inter_op_threads or intra_op_threads):
    return config
  # Estimator's own default (soft placement, one grappler pass) when the
  # cluster sets none: a config given to RunConfig replaces the default.
  config = config or estimator_run_config.get_default_session_config()
  config.inter_op_parallelism_threads = inter_op_threads
  config.intra_op_parallelism_threads = intra_op_threads
  return config


@gin.configurable(denylist=['model_dir', 'tpu_address'])
def build_run_config(model_dir,
                     tpu_address=None,
                     save_checkpoints_steps=500,
                     keep_checkpoint_max=5,
                     log_step_count_steps=50,
                     tf_random_seed=None,
                     train_distribute=None,
                     max_worker_delay_secs=None,
                     iterations_per_loop=100,
                     num_shards=None,
                     per_host_input_for_training='PER_HOST_V1',
                     inter_op_threads=0,
                     intra_op_threads=0):
  """Builds a TPU RunConfig; it is also a valid RunConfig for Estimator.

  The cluster (chief, workers, parameter servers, evaluator) comes from the
  TF_CONFIG environment variable, which the RunConfig reads.

  Args:
    model_dir: str.
    tpu_address: optional `TpuAddress` from the binary's flags; with a TPU
      name the TPUEstimator runs on that TPU.
    save_checkpoints_steps: int, steps between checkpoints.
    keep_checkpoint_max: int, checkpoints kept.
    log_step_count_steps: int, steps between progress log lines.
    tf_random_seed: optional int, graph-level seed.
    train_distribute: optional `tf.distribute.Strategy` constructor (e.g.
      `@tf.distribute.MirroredStrategy`), built only on tasks that train, or
      an instance (`@tf.distribute.MirroredStrategy()`). Estimator only.
    max_worker_delay_secs: optional int; parameter-server workers start
      training (task index + 1) * 5 s after the chief, at most this long.
    iterations_per_loop: int, TPU steps per host round trip.
    num_shards: optional int, TPU cores to use; None uses every core.
    per_host_input_for_training: str, a `tpu.InputPipelineConfig` name:
      'PER_HOST_V2' has each host feed per-core batches to its cores.
    inter_op_threads: int, ops a session runs at once; 0 lets TensorFlow
      choose (one per core). docs/performance.md has a measurement of 1.
    intra_op_threads: int, threads one op uses; 0 lets TensorFlow choose.

  Returns:
    A `tf.compat.v1.estimator.tpu.RunConfig`.

  Raises:
    ValueError: an unknown `per_host_input_for_training`, or a TF_CONFIG
      cluster that does not suit `train_distribute`.
  """
  cluster.check(uses_strategy=train_distribute is not None)
  resolver = tpu_estimator.cluster_resolver(tpu_address)
  return tpu.RunConfig(
      cluster=resolver,
      model_dir=model_dir,
      save_checkpoints_steps=save_checkpoints_steps,
      keep_checkpoint_max=keep_checkpoint_max,
      log_step_count_steps=log_step_count_steps,
      save_summary_steps=save_checkpoints_steps,
      tf_random_seed=tf_random_seed,
      train_distribute=_strategy(train_distribute),
      session_config=_session_config(inter_op_threads, intra_op_threads),
      experimental_max_worker_delay_secs=max_worker_delay_secs,
      tpu_config=tpu_estimator.tpu_config(
          iterations_per_loop, num_shards, per_host_input_for_training,
          on_tpu=resolver is not None))


def _with_batch(input_fn, batch_size, default_context=None):
  """Adapts a TPUEstimator-contract input_fn to Estimator's fixed params."""
  def wrapped(params, input_context=None):
    return input_fn(dict(params, batch_size=batch_size),
                    input_context or default_context)
  return wrapped


_UNCONVERTED_MODEL_FN = tf.autograph.experimental.do_not_convert(
    model_fn_lib.model_fn)


def is_first_replica():
  """Whether this is replica 0 of a strategy's group, or there is no group."""
  context = tf.distribute.get_replica_context()
  replica = context and tf.get_static_value(context.replica_id_in_sync_group)
  return not replica


def estimator_model_fn(features, labels, mode, params, config):
  """The model_fn for `tf.estimator.Estimator`, with or without a strategy.

  Autograph must not convert it: a strategy runs the model_fn through
  autograph, which mistakes gin's configurable wrappers (they share one code
  object) for one another. Summaries are written by the chief's first replica
  only; other replicas and workers would each write a copy. The model is
  built in `mixed_precision_policy`'s dtype policy.
  """
  with tpu_estimator.keras_policy(tpu_estimator.mixed_precision_policy()):
    spec = _UNCONVERTED_MODEL_FN(features, labels, mode, params, config)
  if not (config.is_chief and is_first_replica()):
    spec = spec._replace(host_call=None)
  return spec.as_estimator_spec()


@gin.configurable(denylist=['run_config'])
def build_estimator(run_config,
                    train_batch_size=gin.REQUIRED,
                    eval_batch_size=gin.REQUIRED,
                    use_tpu_estimator=False):
  """Builds the estimator and its train and eval input_fns.

  Batch sizes are global, the examples of one training step: a strategy's
  replicas (or a TPU's cores) each get an equal share, an asynchronous
  parameter-server worker takes the whole batch for each of its steps, and
  the learning rate is never rescaled.

  Args:
    run_config: from `build_run_config`.
    train_batch_size: int, global training batch.
    eval_batch_size: int, global evaluation batch.
    use_tpu_estimator: bool, build a TPUEstimator instead of an Estimator; it
      runs on a TPU when the run config names one (--tpu), else on the CPU.

  Returns:
    (estimator, train_input_fn, eval_input_fn).

  Raises:
    ValueError: a batch size that the replicas cannot split, or a TPU named
      without the TPU platform.
  """
  train_fn = input_lib.make_input_fn(is_training=True)
  eval_fn = input_lib.make_input_fn(is_training=False)
  replicas = num_replicas(run_config)
  if use_tpu_estimator:
    if replicas:  # On a TPU, known only when num_shards is bound.
      per_replica_batch_size(train_batch_size, replicas,
                             'build_estimator.train_batch_size')
      per_replica_batch_size(eval_batch_size, replicas,
                             'build_estimator.eval_batch_size')
    return tpu_estimator.build(run_config, train_fn, eval_fn,
                               train_batch_size, eval_batch_size)
  if run_config.cluster:
    raise ValueError('--tpu names a TPU, but build_estimator.use_tpu_estimator '
                     'is False; add --gin_file=gin/platforms/tpu.gin.')
  tpu_estimator.check_precision_supported(run_config)
  train_batch = per_replica_batch_size(train_batch_size, replicas,
                                       'build_estimator.train_batch_size')
  estimator = tf.estimator.Estimator(
      model_fn=estimator_model_fn, config=run_config,
      params={'use_tpu': False})
  return (estimator,
          _with_batch(train_fn, train_batch,
                      cluster.parameter_server_input_context(run_config)),
          _with_batch(eval_fn, eval_batch_size))
