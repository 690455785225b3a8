"""TPUEstimator platform: per-host input, exact eval, cross-shard batch norm."""

import contextlib
import types

import tensorflow as tf
from tensorflow_estimator.python.estimator.tpu import tpu_config
from tensorflow_estimator.python.estimator.tpu import tpu_estimator as tpu_estimator_lib

from official_seg import validation

# TPUEstimator's API from the modules that define it: the first name read
# through tf.compat.v1.estimator.tpu logs a deprecation whose caller
# TensorFlow finds by reading the source of every frame on the stack, at
# every process's start.
tpu = types.SimpleNamespace(
    InputPipelineConfig=tpu_config.InputPipelineConfig,
    RunConfig=tpu_config.RunConfig,
    TPUConfig=tpu_config.TPUConfig,
    TPUEstimator=tpu_estimator_lib.TPUEstimator,
    TPUEstimatorSpec=tpu_estimator_lib.TPUEstimatorSpec)
ModeKeys = tf.estimator.ModeKeys


def cluster_resolver(tpu_address):
  """A `TPUClusterResolver` for the binary's --tpu flags, or None without a TPU.

  Args:
    tpu_address: optional `run_config.TpuAddress`.

  Returns:
    A `tf.distribute.cluster_resolver.TPUClusterResolver`, or None when no
    TPU is named; only a named TPU (or its cloud API) is ever contacted.
  """
  if not tpu_address or not tpu_address.tpu:
    return None
  return tf.distribute.cluster_resolver.TPUClusterResolver(
      tpu=tpu_address.tpu, zone=tpu_address.zone, project=tpu_address.project)


def tpu_config(iterations_per_loop, num_shards, per_host_input, on_tpu):
  """A `TPUConfig`; evaluation on a TPU reads one pipeline sliced over cores.

  Args:
    iterations_per_loop: int.
    num_shards: optional int.
    per_host_input: str, a `tpu.InputPipelineConfig` name.
    on_tpu: bool, a TPU is named.

  Returns:
    A `tpu.TPUConfig`.

  Raises:
    ValueError: `per_host_input` names no input pipeline configuration.
  """
  names = ('PER_SHARD_V1', 'PER_HOST_V1', 'PER_HOST_V2', 'BROADCAST')
  if per_host_input not in names:
    raise validation.ConfigurationError(
        f'build_run_config.per_host_input_for_training={per_host_input!r} is '
        f'not one of {names}.')
  # SLICED: host 0 reads the eval split once and each core gets a slice of
  # every global batch, so padding stays in the last batch and each image
  # counts once. TPUEstimator refuses it off the TPU.
  eval_input = tpu.InputPipelineConfig.SLICED if on_tpu else (
      tpu.InputPipelineConfig.PER_HOST_V1)
  return tpu.TPUConfig(
      iterations_per_loop=iterations_per_loop, num_shards=num_shards,
      per_host_input_for_training=getattr(tpu.InputPipelineConfig,
                                          per_host_input),
      eval_training_input_configuration=eval_input)


class CrossShardReplicaContext(tf.distribute.ReplicaContext):
  """Lets Keras's synchronized batch norm sum its statistics over TPU shards.

  Keras batch norm with `synchronized=True` (Model Garden's `use_sync_bn`)
  all-reduces through the current replica context. TPUEstimator shards the
  model_fn without a distribution strategy, so that context is the default
  one and the statistics would stay per shard; inside this context they are
  summed with `tf.compat.v1.tpu.cross_replica_sum` over all shards. Variables
  are still created by the default strategy.
  """

  def __init__(self, num_shards, sum_fn=tf.compat.v1.tpu.cross_replica_sum):
    super().__init__(tf.distribute.get_strategy(), replica_id_in_sync_group=0)
    self._num_shards = num_shards
    self._sum_fn = sum_fn

  @property
  def num_replicas_in_sync(self):
    return self._num_shards

  def all_reduce(self, reduce_op, value, options=None):
    del options  # Unused: one implementation on TPUs.
    total = tf.nest.map_structure(self._sum_fn, value)
    if reduce_op == tf.distribute.ReduceOp.MEAN:
      return tf.nest.map_structure(lambda t: t / self._num_shards, total)
    return total


def cross_shard_context(mode, params):
  """The context of a training step on more than one TPU shard, else a no-op."""
  context = params.get('context')
  if (mode == ModeKeys.TRAIN and params.get('use_tpu') and context
      and context.num_replicas > 1):
    return CrossShardReplicaContext(context.num_replicas)
  return contextlib.nullcontext()


def host_input_context(context):
  """The `InputContext` of one TPU host's input pipeline, or None for one host.

  Args:
    context: the `TPUContext` TPUEstimator puts in params['context'], or None
      off the TPU.
  """
  if context is None:
    return None
  _, host, hosts = context.current_input_fn_deployment()
  if hosts <= 1:
    return None
  return tf.distribute.InputContext(num_input_pipelines=hosts,
                                    input_pipeline_id=host,
                                    num_replicas_in_sync=context.num_replicas)


def _per_host(input_fn):
  """Has each TPU host read its own share of the shards (PER_HOST_V2)."""
  def wrapped(params):
    return input_fn(params, host_input_context(params.get('context')))
  return wrapped


def count_batches(input_fn, batch_size):
  """Batches the eval input_fn yields for the whole split at `batch_size`.

  Args:
    input_fn: an eval input_fn (TPUEstimator contract); its last batch is
      padded, so this is ceil(images / batch_size).
    batch_size: int, the global eval batch.

  Returns:
    int.
  """
  dataset = input_fn({'batch_size': batch_size})
  return int(dataset.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))


class TPUEstimator(tpu.TPUEstimator):
  """TPUEstimator whose `evaluate(steps=None)` covers the split once on a TPU.

  TPUEstimator needs explicit eval steps on a TPU; they are counted once from
  the padded eval pipeline itself, so they always match what it yields.
  """

  def __init__(self, use_tpu, eval_batch_size, **kwargs):
    super().__init__(use_tpu=use_tpu, eval_batch_size=eval_batch_size,
                     **kwargs)
    self._on_tpu = use_tpu
    self._global_eval_batch = eval_batch_size
    self._eval_steps = {}

  def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None,
               name=None):
    if steps is None and self._on_tpu:
      if input_fn not in self._eval_steps:
        self._eval_steps[input_fn] = count_batches(input_fn,
                                                   self._global_eval_batch)
      steps = self._eval_steps[input_fn]
    return super().evaluate(input_fn, steps=steps, hooks=hooks,
                            checkpoint_path=checkpoint_path, name=name)


def build(model_fn, run_config, train_input_fn, eval_input_fn,
          train_batch_size, eval_batch_size):
  """Builds the TPUEstimator; on a TPU exactly when the run config names one.

  Args:
    model_fn: a TPUEstimator-contract model_fn (`model_fn.make_model_fn`).
    run_config: a `tpu.RunConfig`; its `cluster` is the TPU, or None.
    train_input_fn, eval_input_fn: input_fns (TPUEstimator contract).
    train_batch_size, eval_batch_size: int, global batches.

  Returns:
    (estimator, train_input_fn, eval_input_fn).
  """
  estimator = TPUEstimator(
      model_fn=model_fn, config=run_config,
      use_tpu=run_config.cluster is not None,
      train_batch_size=train_batch_size, eval_batch_size=eval_batch_size,
      predict_batch_size=eval_batch_size)
  return estimator, _per_host(train_input_fn), eval_input_fn
