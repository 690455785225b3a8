"""Cluster roles from TF_CONFIG: trainers, parameter servers and the evaluator."""

# Only what RunConfig and the strategies do not do: a task's role is needed
# before any RunConfig exists (the strategy is built by trainers only, a
# parameter server serves instead of building an estimator); and the
# parameter-server platform's start and shutdown, which TensorFlow leaves to
# `server.join()` (never returning). Device filters, the chief flag and the
# replica counts of a running estimator are RunConfig's.

import time

import tensorflow as tf

from official_seg import validation
from official_seg.evaluation import continuous
from official_seg.runtime import preemption

# TF's older 'master' job is not supported: its Estimator task also evaluates.
TRAINERS = ('chief', 'worker')
# Each parameter server holds one queue; every trainer puts one token in it
# when it has finished, and the server exits once it has them all.
_DONE_QUEUE = 'official_seg_trainers_done_{}'
_SIGNAL_TIMEOUT_MS = 60 * 1000
_CHIEF_WAIT_SECS = 30 * 60


def _resolver():
  """The TF_CONFIG resolver.

  Raises:
    ValueError: TF_CONFIG is not valid JSON; the message says so.
  """
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  try:
    resolver.cluster_spec()
  except ValueError as error:
    raise validation.ConfigurationError(
        f'The TF_CONFIG environment variable is not valid JSON '
        f'({error}); see docs/distributed.md.') from error
  return resolver


def task():
  """This process's (task type, task index) in TF_CONFIG.

  Read here rather than from a RunConfig: the RunConfig is built after the
  role is known (see the module docstring), and its errors for a task
  outside the cluster do not name TF_CONFIG.

  Returns:
    (str, int), or (None, None) when TF_CONFIG names no cluster.

  Raises:
    ValueError: TF_CONFIG names a cluster but no valid task of it.
  """
  resolver = _resolver()
  jobs = resolver.cluster_spec().jobs
  if not jobs:
    return None, None
  task_type, index = resolver.task_type, resolver.task_id
  # By TF convention the evaluator is not part of the training cluster.
  if task_type != 'evaluator' and (
      task_type not in jobs or index is None
      or index >= len(resolver.cluster_spec().job_tasks(task_type))):
    raise validation.ConfigurationError(
        f'TF_CONFIG task {task_type!r} index {index} is not in its cluster '
        f'{resolver.cluster_spec().as_dict()}; set "task" to one of its '
        'tasks or to {"type": "evaluator", "index": 0}.')
  return task_type, index


def cluster_spec():
  """TF_CONFIG's `tf.train.ClusterSpec` (empty outside a cluster)."""
  return _resolver().cluster_spec()


def parameter_servers():
  """Whether TF_CONFIG names parameter servers: parameter-server training."""
  return 'ps' in cluster_spec().jobs


def num_trainers(spec):
  """Tasks that train: the chief and the workers."""
  return sum(len(spec.job_tasks(job)) for job in TRAINERS if job in spec.jobs)


def trains():
  """Whether this process trains: outside a cluster, or as chief or worker."""
  task_type, _ = task()
  return task_type is None or task_type in TRAINERS


def is_chief():
  """Whether this process is the chief trainer (or the only process).

  Kept beside `RunConfig.is_chief`, which is True only for a 'chief' task:
  a strategy cluster without one makes worker 0 its chief, and the chief's
  hooks are chosen here before the strategy hands out per-worker configs.
  """
  task_type, index = task()
  if task_type in (None, 'chief'):
    return True
  return (task_type == 'worker' and index == 0
          and 'chief' not in cluster_spec().jobs)


def role(mode):
  """What this process does for `mode` in a cluster.

  In a cluster, modes 'train' and 'train_and_eval' take their work from
  TF_CONFIG's task type; every other mode runs as it does on one machine.

  Args:
    mode: the binary's --mode.

  Returns:
    'trainer', 'ps', 'evaluator', or None outside a cluster.

  Raises:
    ValueError: an unknown task type in TF_CONFIG.
  """
  task_type, _ = task()
  if task_type is None or mode not in ('train', 'train_and_eval'):
    return None
  if task_type in TRAINERS:
    return 'trainer'
  if task_type in ('ps', 'evaluator'):
    return task_type
  raise validation.ConfigurationError(
      f'TF_CONFIG task type {task_type!r} is none of '
      f'{TRAINERS + ("ps", "evaluator")}.')


def check(uses_strategy):
  """Raises ValueError if TF_CONFIG's jobs do not suit the platform's strategy.

  Neither RunConfig nor the strategies object: several trainers without
  either would silently train models of their own.

  Args:
    uses_strategy: bool, `build_run_config.train_distribute` is set.
  """
  task_type, _ = task()
  if task_type is None:
    return
  spec = cluster_spec()
  trainers = num_trainers(spec)
  if uses_strategy and 'ps' in spec.jobs:
    raise validation.ConfigurationError(
        'TF_CONFIG has parameter servers (job "ps") but '
        'build_run_config.train_distribute sets a strategy. Parameter-server '
        'training takes no strategy: use gin/platforms/parameter_server.gin, '
        'or drop the ps tasks for gin/platforms/multi_worker.gin.')
  if not uses_strategy and 'ps' not in spec.jobs and trainers > 1:
    raise validation.ConfigurationError(
        f'TF_CONFIG has {trainers} training tasks but no parameter servers '
        'and build_run_config.train_distribute is not set, so each would '
        'train a model of its own. Use gin/platforms/multi_worker.gin, or add '
        'ps tasks and use gin/platforms/parameter_server.gin.')


def parameter_server_input_context(run_config):
  """Each parameter-server trainer's share of the input, or None.

  Strategies hand the input_fn their own `InputContext`; between-graph
  replication does not, so without this every trainer would read the same
  files in the same order whenever the input is seeded.

  Args:
    run_config: an Estimator `RunConfig` that has read TF_CONFIG.

  Returns:
    A `tf.distribute.InputContext`, or None outside parameter-server
    training.
  """
  if (run_config.train_distribute or not run_config.num_ps_replicas
      or run_config.num_worker_replicas <= 1):
    return None
  return tf.distribute.InputContext(
      num_input_pipelines=run_config.num_worker_replicas,
      input_pipeline_id=run_config.global_id_in_cluster,
      num_replicas_in_sync=1)


def _wait_for_chief(model_dir):
  """Lets a parameter-server worker start once the chief has initialised.

  The chief initialises the variables and then saves its first checkpoint;
  a worker whose session looks earlier sleeps 30 s before looking again
  (Estimator's `experimental_max_worker_delay_secs` only staggers starts).

  Raises:
    continuous.CheckpointTimeoutError: no checkpoint came within
      `_CHIEF_WAIT_SECS`; the binary prints the message and exits 1.
  """
  tf.compat.v1.logging.info('Waiting up to %d s for the chief\'s first '
                            'checkpoint in %s.', _CHIEF_WAIT_SECS, model_dir)
  deadline = time.monotonic() + _CHIEF_WAIT_SECS
  while not tf.train.latest_checkpoint(model_dir):
    if time.monotonic() >= deadline:
      raise continuous.CheckpointTimeoutError(
          f'No checkpoint from the chief in {model_dir} after '
          f'{_CHIEF_WAIT_SECS} s; this worker did not train. Check the '
          'chief\'s log, and that every task has the same --model_dir.')
    time.sleep(1)


def _done_queue(ps_index, trainers):
  """The finished trainers' queue on parameter server `ps_index`."""
  with tf.device(f'/job:ps/task:{ps_index}'):
    return tf.queue.FIFOQueue(trainers, tf.int32, shapes=[[]],
                              shared_name=_DONE_QUEUE.format(ps_index))


def _ps_session_config(ps_index):
  """A session on one parameter server only, not waiting for other tasks."""
  return tf.compat.v1.ConfigProto(
      device_filters=[f'/job:ps/task:{ps_index}'],
      operation_timeout_in_ms=_SIGNAL_TIMEOUT_MS)


def serve_parameters():
  """Runs this parameter server until every trainer has finished.

  TensorFlow's own parameter servers (`server.join()`) never return; this
  one waits for one token from each trainer (see `train`) and returns, so a
  finished cluster exits with status 0.
  """
  resolver = _resolver()
  spec, index = resolver.cluster_spec(), resolver.task_id
  server = tf.distribute.Server(spec, job_name='ps', task_index=index,
                                protocol=resolver.rpc_layer or 'grpc')
  trainers = num_trainers(spec)
  tf.compat.v1.logging.info('Parameter server %d serves %d trainers.', index,
                            trainers)
  with tf.Graph().as_default():
    done = _done_queue(index, trainers).dequeue_many(trainers)
    config = tf.compat.v1.ConfigProto(device_filters=[f'/job:ps/task:{index}'])
    with tf.compat.v1.Session(server.target, config=config) as session:
      session.run(done)
  tf.compat.v1.logging.info('All %d trainers finished; parameter server %d '
                            'exits.', trainers, index)


def _signal_done(spec):
  """Tells every parameter server that this trainer has finished.

  A parameter server that is gone is logged and skipped: training itself
  has finished, and its checkpoints are saved.
  """
  trainers = num_trainers(spec)
  for index, address in enumerate(spec.job_tasks('ps')):
    with tf.Graph().as_default():
      enqueue = _done_queue(index, trainers).enqueue(1)
      try:
        with tf.compat.v1.Session(f'grpc://{address}',
                                  config=_ps_session_config(index)) as session:
          session.run(enqueue)
      except (tf.errors.UnavailableError, tf.errors.DeadlineExceededError):
        tf.compat.v1.logging.warning(
            'Parameter server %d (%s) is gone; it was not told that this '
            'trainer finished.', index, address)


def _wait_for_trainers(strategy):
  """Returns once every trainer in the strategy's group has finished training.

  A trainer that exits first would leave the others' session shutdown
  retrying RPCs to it for about a minute; an all-reduce that every trainer
  joins after training keeps all of them up until all are done.
  """
  ones = strategy.run(lambda: tf.constant(1))
  finished = strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None)
  tf.compat.v1.logging.info('All %d trainers finished.', int(finished))


def train(estimator, train_input_fn, eval_input_fn, train_steps, chief_hooks):
  """Trains as this task of the cluster, with TensorFlow's own runtime.

  `tf.estimator.train_and_evaluate` starts the task's server and, with a
  strategy, the workers' collective group; trainers never evaluate here,
  the evaluator task does.

  Args:
    estimator: the `tf.estimator.Estimator`.
    train_input_fn, eval_input_fn: its input_fns.
    train_steps: int, the global step training stops at.
    chief_hooks: list of `SessionRunHook`s run on the chief only.
  """
  # Other trainers write no checkpoints: preempted, they just stop.
  hooks = list(chief_hooks) if is_chief() else [
      preemption.SaveOnPreemptionHook(estimator.model_dir, save=False)]
  spec = cluster_spec()
  if 'ps' in spec.jobs and not is_chief():
    _wait_for_chief(estimator.model_dir)
  tf.estimator.train_and_evaluate(
      estimator,
      tf.estimator.TrainSpec(train_input_fn, max_steps=train_steps,
                             hooks=hooks),
      tf.estimator.EvalSpec(eval_input_fn, steps=None))
  if 'ps' in spec.jobs:
    _signal_done(spec)
  strategy = estimator.config.train_distribute
  if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    _wait_for_trainers(strategy)
