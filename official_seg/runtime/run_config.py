"""The run config: checkpoints, threads, strategy and TPU, from gin and TF_CONFIG."""

import collections

import gin
import tensorflow as tf
from tensorflow_estimator.python.estimator import run_config as estimator_run_config

from official_seg import validation
from official_seg.runtime import cluster
from official_seg.runtime import tpu_estimator

tpu = tpu_estimator.tpu
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


def _strategy(train_distribute):
  """The strategy instance; a constructor is called only by training tasks."""
  if not callable(train_distribute):  # None, or a strategy instance.
    return train_distribute
  # Built here, after TF_CONFIG is read and before the estimator makes any
  # op; evaluators and parameter servers never join the workers' group.
  return train_distribute() if cluster.trains() else None


def _session_copy(config):
  """A copy of `config`'s session config, or of Estimator's default one.

  A session config given to RunConfig's constructor would replace the one
  it derives (soft placement, one grappler pass and, for a parameter-server
  trainer, device filters from TF_CONFIG); changing a copy keeps them.
  """
  session = tf.compat.v1.ConfigProto()
  session.CopyFrom(config.session_config
                   or estimator_run_config.get_default_session_config())
  return session


def _with_session_options(config, inter_op_threads, intra_op_threads,
                          graph_rewrites):
  """`config` with thread counts and grappler's switch over its session config.

  Unchanged when every option has its default.
  """
  if not (inter_op_threads or intra_op_threads) and graph_rewrites:
    return config
  session = _session_copy(config)
  session.inter_op_parallelism_threads = inter_op_threads
  session.intra_op_parallelism_threads = intra_op_threads
  session.graph_options.rewrite_options.disable_meta_optimizer = (
      not graph_rewrites)
  return config.replace(session_config=session)


def _with_strategy_cpus(config):
  """`config` whose session has every CPU device its strategy runs on.

  Estimator runs its session with RunConfig's ConfigProto (or its own
  default), never the eager context's, so its session has one CPU, even
  where `tf.config.set_logical_device_configuration` made more. A
  MirroredStrategy over '/cpu:0' and '/cpu:1' then has both replicas
  soft-placed on CPU:0, and its all-reduce, a collective of two members that
  must be on two devices, waits forever for the second: the first step never
  ends. `device_count` creates the CPUs the strategy names. GPUs need
  nothing: a session has every visible GPU.
  """
  strategy = config.train_distribute
  if strategy is None:
    return config
  specs = [tf.DeviceSpec.from_string(device)
           for device in strategy.extended.worker_devices]
  cpus = 1 + max([spec.device_index or 0 for spec in specs
                  if spec.device_type == 'CPU'], default=0)
  session = _session_copy(config)
  if cpus <= session.device_count.get('CPU', 1):
    return config
  session.device_count['CPU'] = cpus
  return config.replace(session_config=session)


def _parameter_servers_named(max_worker_delay_secs):
  return max_worker_delay_secs is None or cluster.parameter_servers()


@gin.configurable(denylist=['model_dir', 'tpu_address'])
@validation.checked(
    save_checkpoints_steps=validation.POSITIVE_WHOLE,
    keep_checkpoint_max=validation.WHOLE_AT_LEAST_0,
    relations=(validation.Relation(
        ('max_worker_delay_secs',), _parameter_servers_named,
        'None outside parameter-server training, which TF_CONFIG names with '
        '"ps" tasks: gin/platforms/parameter_server.gin needs a TF_CONFIG '
        'cluster with "ps" tasks (docs/distributed.md)'),))
def build_run_config(model_dir,
                     tpu_address=None,
                     save_checkpoints_steps=1000,
                     keep_checkpoint_max=5,
                     keep_checkpoint_every_n_hours=10000,
                     save_summary_steps=100,
                     log_step_count_steps=50,
                     tf_random_seed=None,
                     train_distribute=None,
                     max_worker_delay_secs=None,
                     iterations_per_loop=100,
                     num_shards=None,
                     per_host_input_for_training='PER_HOST_V1',
                     inter_op_threads=0,
                     intra_op_threads=0,
                     use_tpu_estimator=False,
                     save_graph_def=True,
                     graph_rewrites=True):
  """Builds the RunConfig: TPU's for TPUEstimator, Estimator's otherwise.

  The cluster (chief, workers, parameter servers, evaluator) comes from the
  TF_CONFIG environment variable, which the RunConfig reads.

  Args:
    model_dir: str.
    tpu_address: optional `TpuAddress` from the binary's flags; with a TPU
      name the TPUEstimator runs on that TPU.
    save_checkpoints_steps: int, steps between checkpoints.
    keep_checkpoint_max: int, checkpoints kept.
    keep_checkpoint_every_n_hours: float; one checkpoint of every this many
      hours is kept beyond `keep_checkpoint_max` (the seed trainers' option).
    save_summary_steps: int, steps between Estimator's own summaries (the
      loss, global_step/sec), independent of the checkpoint cadence; the
      host_call's summaries have their own (`host_call.every_n_steps`).
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
    use_tpu_estimator: bool, build TPU's RunConfig (macro
      USE_TPU_ESTIMATOR), with which `build_estimator` builds a
      TPUEstimator.
    save_graph_def: bool, Estimator's `checkpoint_save_graph_def`: write
      `graph.pbtxt` when training starts and a `.meta` beside each
      checkpoint. Off saves their cost at each start and save, which grows
      with the graph (quantization-aware ones most); the summary writer
      still records the graph for TensorBoard.
    graph_rewrites: bool; False turns off grappler, TensorFlow's graph
      optimizer, in every session the estimator opens (training, evaluation,
      export). Sessions then start sooner, which matters only for tiny
      models and few steps (the tests' own); steps may run slower.

  Returns:
    A `tf.estimator.RunConfig`, or with `use_tpu_estimator` a
    `tf.compat.v1.estimator.tpu.RunConfig`. Only Estimator's own class
    derives the device filters of a parameter-server trainer from TF_CONFIG;
    TPU's leaves them out.

  Raises:
    ValueError: an unknown `per_host_input_for_training`, a TF_CONFIG
      cluster that does not suit `train_distribute`, or `--tpu` without
      `use_tpu_estimator`.
  """
  cluster.check(uses_strategy=train_distribute is not None)
  common = dict(
      model_dir=model_dir,
      save_checkpoints_steps=save_checkpoints_steps,
      keep_checkpoint_max=keep_checkpoint_max,
      log_step_count_steps=log_step_count_steps,
      keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
      save_summary_steps=save_summary_steps,
      tf_random_seed=tf_random_seed,
      train_distribute=_strategy(train_distribute),
      experimental_max_worker_delay_secs=max_worker_delay_secs,
      checkpoint_save_graph_def=save_graph_def)
  if not use_tpu_estimator:
    if tpu_address and tpu_address.tpu:
      raise validation.ConfigurationError(
          '--tpu names a TPU, but USE_TPU_ESTIMATOR is False; '
          'add --gin_file=gin/platforms/tpu.gin.')
    return _with_session_options(
        _with_strategy_cpus(tf.estimator.RunConfig(**common)),
        inter_op_threads, intra_op_threads, graph_rewrites)
  resolver = tpu_estimator.cluster_resolver(tpu_address)
  config = tpu.RunConfig(
      cluster=resolver, **common,
      tpu_config=tpu_estimator.tpu_config(
          iterations_per_loop, num_shards, per_host_input_for_training,
          on_tpu=resolver is not None))
  return _with_session_options(config, inter_op_threads, intra_op_threads,
                               graph_rewrites)
