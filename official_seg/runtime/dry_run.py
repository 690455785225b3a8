"""--dry_run: checks data, batch split and model of a parsed config before a costly job."""

import contextlib
import os
import time

import gin
import numpy as np
import tensorflow as tf

from official_seg.data import input_fn as input_lib
from official_seg.data import split_metadata
from official_seg.runtime import cluster
from official_seg.runtime import config_checks
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import memory
from official_seg.runtime import run_config as run_config_lib
from official_seg.runtime import tpu_estimator


def _check_shards(scope, data_dir, split):
  """Lists a split's shards and reads one record of each.

  Args:
    scope: 'train' or 'eval', for the report.
    data_dir: str, the folder of the shards.
    split: str, the split.

  Returns:
    str, one report line.

  Raises:
    validation.ConfigurationError: no shard matches DATA_DIR and the split
      (the message names the pattern).
    input_lib.CorruptDataError: a shard cannot be read; the message names it.
  """
  files = input_lib.list_shards(data_dir, split)
  empty = []
  for path in files:
    try:
      if not list(tf.data.TFRecordDataset(path).take(1)):
        empty.append(path)
    except tf.errors.OpError as error:
      raise input_lib.CorruptDataError(
          f'Shard {path} of split {split!r} is not readable '
          f'({error.message}); rewrite or remove it.') from error
  line = (f'{scope}: split {split!r} in {data_dir}: {len(files)} shards, '
          'the first record of each read')
  return line + (f'; empty shards: {empty}' if empty else '')


@contextlib.contextmanager
def _without_cluster():
  """Builds as one machine: a strategy must not wait for the cluster's tasks."""
  saved = os.environ.pop('TF_CONFIG', None)
  try:
    yield
  finally:
    if saved is not None:
      os.environ['TF_CONFIG'] = saved


def _replicas(config):
  """Replicas of one step; a multi-worker strategy has some on every trainer."""
  replicas = estimator_lib.num_replicas(config)
  if isinstance(config.train_distribute,
                tf.distribute.MultiWorkerMirroredStrategy):
    spec = cluster.cluster_spec()
    replicas *= max(1, cluster.num_trainers(spec))
  return replicas


def _batch_line(name, global_batch, replicas):
  if not replicas:
    return (f'{name}: global {global_batch}; the TPU splits it over its cores '
            '(bind build_run_config.num_shards to check the split here)')
  share = estimator_lib.per_replica_batch_size(global_batch, replicas, name)
  return f'{name}: global {global_batch} = {replicas} replica(s) x {share}'


def update_line(global_batch, replicas, accumulation_steps):
  """The examples of one update: micro-batch x accumulation x replicas.

  Args:
    global_batch: int, build_estimator.train_batch_size (one micro-batch
      over all replicas).
    replicas: int.
    accumulation_steps: int, `UpdateOptions.accumulation_steps`.

  Returns:
    str, one report line.
  """
  share = global_batch // replicas
  return (f'update: {accumulation_steps} micro-batch(es) x {share} images x '
          f'{replicas} replica(s) = '
          f'{global_batch * accumulation_steps} images a step '
          '(UpdateOptions.accumulation_steps); the global step, schedule, '
          'averages and checkpoints count updates; batch norm normalises '
          'each micro-batch alone')


# /proc/cpuinfo's flags of bfloat16 arithmetic: AVX512_BF16 (dot products)
# and AMX's bfloat16 tiles (matrix products).
BFLOAT16_FLAGS = ('amx_bf16', 'avx512_bf16')


def bfloat16_flags(cpuinfo):
  """The bfloat16 flags in the text of /proc/cpuinfo, sorted; may be empty."""
  found = set()
  for line in cpuinfo.splitlines():
    key, _, value = line.partition(':')
    if key.strip() == 'flags':
      found.update(set(value.split()) & set(BFLOAT16_FLAGS))
  return sorted(found)


def cpu_line(cpuinfo):
  """Whether this CPU computes in bfloat16 (gin/platforms/bfloat16.gin).

  Args:
    cpuinfo: str, the text of /proc/cpuinfo, or None where there is none.

  Returns:
    str, one report line.
  """
  if cpuinfo is None:
    return 'cpu: no /proc/cpuinfo, so bfloat16 support is unknown'
  flags = bfloat16_flags(cpuinfo)
  if flags:
    return (f'cpu: bfloat16 instructions ({", ".join(flags)}): '
            'gin/platforms/bfloat16.gin can train faster here')
  return ('cpu: no bfloat16 instructions (avx512_bf16, amx_bf16): bfloat16 '
          'would be emulated here; keep float32 on this CPU')


def _read_cpuinfo(path='/proc/cpuinfo'):
  try:
    with open(path, encoding='utf-8') as f:
      return f.read()
  except OSError:
    return None


def count_and_time(built, config, train_batch, timed_steps=2):
  """Builds the model_fn once in TRAIN mode on real batches and times steps.

  The model_fn and input_fn are the ones both estimators wrap, so the graph
  is built in the run's precision on the training step's own input (with the
  unlabeled stream in semi-supervised training). Two steps warm up;
  `timed_steps` more are timed. The process's peak resident size is taken
  over all of them (`memory.PeakMeter`), from a start after the variables
  are initialized.

  Returns:
    (trainable parameter count, shape of the images it was built on,
    seconds per training step on this machine, the `memory.PeakMeter`
    around the steps, the variables' bytes).
  """
  with tf.Graph().as_default():
    params = {'batch_size': train_batch, 'use_tpu': False}
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        built.step_input_fn(params)).get_next()
    spec = built.model_fn(features, labels, tf.estimator.ModeKeys.TRAIN,
                          params, config)
    count = sum(int(np.prod(v.shape)) for v in
                tf.compat.v1.trainable_variables())
    held = memory.variable_bytes((v.shape, v.dtype.base_dtype.size)
                                 for v in tf.compat.v1.global_variables() +
                                 tf.compat.v1.local_variables())
    # The run's session options (threads, grappler's rewrites): the step is
    # timed as the run's estimator will run it.
    with tf.compat.v1.Session(config=config.session_config) as session:
      session.run([tf.compat.v1.global_variables_initializer(),
                   tf.compat.v1.local_variables_initializer()])
      with memory.PeakMeter() as meter:
        # A real batch through the pipeline proves decoding and parsing.
        images, _ = session.run([features['image'], spec.train_op])
        # Another fetch is another callable, whose first run prunes and
        # rewrites the graph again: it is warmed up before it is timed.
        session.run(spec.train_op)
        start = time.perf_counter()
        for _ in range(timed_steps):
          session.run(spec.train_op)
        seconds = (time.perf_counter() - start) / timed_steps
  return count, images.shape, seconds, meter, held


def _metadata(dataset, lines):
  """Each split's metadata; computed (and its line reported) when missing."""
  known = {}
  for split in sorted({dataset.train_split, dataset.eval_split}):
    metadata = split_metadata.read(dataset.data_dir, split)
    if metadata is None:
      metadata = split_metadata.compute(dataset.data_dir, split,
                                        progress=True)
      lines.append(
          f'split {split!r}: no metadata beside its shards, so every record '
          f'was read; save this line as '
          f'{split_metadata.path(dataset.data_dir, split)}:\n'
          f'{split_metadata.line(metadata)}')
    known[split] = metadata
  return known


def _plan(dataset, metadata, config, train_batch, steps, step_seconds,
          micro_batches=1):
  """Lines on what the run will do: steps, epochs, evaluations, time.

  A step is an update of `micro_batches` runs of `train_batch` images.
  """
  every = config.save_checkpoints_steps
  kept = config.keep_checkpoint_max
  train_images = metadata[dataset.train_split]['num_images']
  train_batch *= micro_batches
  step_seconds *= micro_batches
  epochs = steps * train_batch / max(train_images, 1)
  evaluations = -(-steps // every)
  return [
      f'plan: {steps} steps of {train_batch} images = {epochs:.1f} epochs of '
      f'split {dataset.train_split!r} ({train_images} images); '
      f'{evaluations} checkpoint(s), every {every} steps and at the last, '
      f'each evaluated on split {dataset.eval_split!r} '
      f'({metadata[dataset.eval_split]["num_images"]} images) by '
      f'train_and_eval or the evaluator; the newest {kept} kept',
      f'time: {step_seconds:.3f} s a training step on this machine (one '
      f'replica\'s share, 2 runs timed after one warm-up'
      f'{"" if micro_batches == 1 else f" x {micro_batches} micro-batches"}'
      '): about '
      f'{steps * step_seconds / 60:.1f} min of training, evaluation not '
      'included']


def run(model_dir, train_steps):
  """Checks the parsed config without training, and reports.

  Lists the train and eval shards and reads a record of each, checks the
  splits' metadata against the configuration (computing it, with a
  progress bar, for shards written without one), builds the estimator
  (which checks the batch split), runs the model_fn's training step on real
  batches to count the parameters, time a step and measure its peak memory,
  and says what the run will do. Nothing is written and no TPU or cluster task is contacted.

  Args:
    model_dir: str, the run's model dir (only read).
    train_steps: int, the step training stops at (`experiment.run`'s).

  Returns:
    str, the report, ending with gin's operative config.

  Raises:
    validation.ConfigurationError: a setting the run cannot use: no shards
      where DATA_DIR and the splits say, data that contradicts the
      configuration, a batch the replicas cannot split; the message names
      the binding.
    input_lib.CorruptDataError: a shard cannot be read.
  """
  with _without_cluster():
    config = run_config_lib.build_run_config(model_dir)
    built = estimator_lib.build_estimator(config)
  dataset = built.dataset
  lines = [_check_shards('train', dataset.data_dir, dataset.train_split),
           _check_shards('eval', dataset.data_dir, dataset.eval_split)]
  metadata = _metadata(dataset, lines)
  problems = config_checks.data_problems(dataset, built.eval_parser, metadata)
  if problems:
    raise config_checks.ConfigurationError('\n'.join(problems))
  tpu_platform = isinstance(built.estimator, tpu_estimator.TPUEstimator)
  replicas = (config.tpu_config.num_shards if tpu_platform
              else _replicas(config))
  train_batch = built.train_batch_size
  lines.append(_batch_line('build_estimator.train_batch_size', train_batch,
                           replicas))
  # Estimator evaluates on one replica; a TPU slices eval batches over cores.
  lines.append(_batch_line('build_estimator.eval_batch_size',
                           built.eval_batch_size,
                           replicas if tpu_platform else 1))
  step_batch = train_batch // replicas if replicas else train_batch
  count, shape, seconds, meter, held = count_and_time(built, config,
                                                      step_batch)
  lines.append(f'model: {count:,} trainable parameters, built on training '
               f'images {list(shape)}')
  lines.append(memory.report_line(meter, held, step_batch))
  micro_batches = built.components.updates.accumulation_steps
  if micro_batches > 1:
    lines.append(update_line(train_batch, replicas, micro_batches))
  lines.append(cpu_line(_read_cpuinfo()))
  lines += _plan(dataset, metadata, config, train_batch, train_steps,
                 seconds, micro_batches)
  lines.append('Operative gin config:\n' + gin.operative_config_str())
  return '\n'.join(lines)
