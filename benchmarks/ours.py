"""Measures official_seg itself: input, training and evaluation throughput."""

import glob
import os
import time

import tensorflow as tf

from benchmarks import input as input_benchmark
from benchmarks import measure
from benchmarks import memory
# Registers run and the other configurables every experiment binds.
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import gin_config
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.runtime import run_config as run_config_lib

LOSS_TAG = 'loss/total'


class StepTimer(tf.estimator.SessionRunHook):
  """Times the steps after `warmup_steps` and counts the step graph's FLOPs.

  The FLOPs are counted in `begin`, on the ops the Estimator's train op
  really runs, so they include the loss, gradients and optimizer update.
  """

  def __init__(self, warmup_steps, count_flops=False):
    self._warmup_steps = warmup_steps
    self._count_flops = count_flops
    self.steps = 0
    self.flops = self.uncounted_ops = None
    self.bytes = self.uncounted_byte_ops = None
    self._start = self._last = None

  def begin(self):
    if self._count_flops:
      graph = tf.compat.v1.get_default_graph()
      train_ops = graph.get_collection(tf.compat.v1.GraphKeys.TRAIN_OP)
      self.flops, self.uncounted_ops = measure.graph_flops_and_unknown(
          graph, train_ops)
      self.bytes, self.uncounted_byte_ops = memory.graph_bytes_and_unknown(
          graph, train_ops)

  def after_run(self, run_context, run_values):
    del run_context, run_values  # Unused.
    self.steps += 1
    self._last = time.perf_counter()
    if self.steps == self._warmup_steps:
      self._start = self._last

  def steps_per_second(self):
    """Steps per second after warm-up.

    Raises:
      ValueError: no step ran after warm-up.
    """
    timed = self.steps - self._warmup_steps
    if timed <= 0 or self._start is None:
      raise ValueError(f'Only {self.steps} steps ran; the benchmark needs more '
                       f'than the {self._warmup_steps} warm-up steps.')
    return timed / (self._last - self._start)


class SaveTimer(tf.estimator.CheckpointSaverListener):
  """Times each checkpoint save, to weigh the checkpoint cadence's cost."""

  def __init__(self):
    self.seconds = []
    self._start = None

  def before_save(self, session, global_step_value):
    del session, global_step_value  # Unused.
    self._start = time.perf_counter()

  def after_save(self, session, global_step_value):
    del session, global_step_value  # Unused.
    self.seconds.append(time.perf_counter() - self._start)


def loss_curve(model_dir, tag=LOSS_TAG):
  """The [[step, loss], ...] the host_call wrote into `model_dir`'s events."""
  points = {}
  for path in glob.glob(os.path.join(model_dir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == tag:
          points[event.step] = float(tf.make_ndarray(value.tensor))
  return [[step, points[step]] for step in sorted(points)]


def _input_throughput(batch_size, input_batches):
  """Images/s of the training input pipeline alone (10 warm-up batches)."""
  dataset = input_benchmark.training_dataset(batch_size)
  return input_benchmark.measure(dataset, batch_size, 10,
                                 input_batches).images_per_second


def _train(estimator, train_fn, train_steps, warmup_steps, batch_size):
  """Trains; the checkpoint cost is one save's time over the save interval."""
  timer, saves = StepTimer(warmup_steps, count_flops=True), SaveTimer()
  estimator.train(train_fn, max_steps=train_steps, hooks=[timer],
                  saving_listeners=[saves])
  steps_per_second = timer.steps_per_second()
  save_secs = max(saves.seconds, default=0.0)
  interval = estimator.config.save_checkpoints_steps
  return {
      'train_images_per_sec': steps_per_second * batch_size,
      'checkpoint_secs': save_secs,
      'checkpoint_cost': save_secs / (save_secs + interval / steps_per_second),
      'flops_per_step': timer.flops,
      'uncounted_flop_ops': timer.uncounted_ops,
      'bytes_per_step': timer.bytes,
      'uncounted_byte_ops': timer.uncounted_byte_ops,
      'loss_curve': loss_curve(estimator.model_dir),
  }


def _evaluate(estimator, eval_fn, eval_batches, batch_size):
  timer = StepTimer(warmup_steps=1)
  metrics = estimator.evaluate(eval_fn, steps=eval_batches, hooks=[timer])
  return {
      'eval_images_per_sec': timer.steps_per_second() * batch_size,
      'mean_iou': float(metrics['mean_iou']),
  }


def run(gin_files, gin_params, model_dir, train_steps, warmup_steps,
        input_batches=50, eval_batches=None):
  """Measures one experiment of official_seg, as train_and_eval runs it.

  The experiment is parsed over gin's current config and locked; the caller
  (a binary or a test) clears that config first.

  Args:
    gin_files: list of str, the experiment's gin files.
    gin_params: list of str, bindings after the files (DATA_DIR, ...).
    model_dir: str, an empty folder for this run's checkpoints and events.
    train_steps: int, steps to train (TRAIN_STEPS is set to it, so the
      learning-rate schedule spans the run).
    warmup_steps: int, steps not timed (graph building, oneDNN's first
      calls, tf.data's buffers).
    input_batches: int, batches timed for the input pipeline alone.
    eval_batches: optional int, evaluation batches; None reads the split.

  Returns:
    dict of the measurements; `measure.emit` prints it.
  """
  gin_config.parse(gin_files,
                   list(gin_params) + [f'TRAIN_STEPS = {train_steps}'])
  train_batch = gin_config.binding('build_estimator.train_batch_size')
  eval_batch = gin_config.binding('build_estimator.eval_batch_size')
  result = {'trainer': 'official_seg', 'train_steps': train_steps,
            'input_images_per_sec': _input_throughput(train_batch,
                                                      input_batches)}
  estimator, train_fn, eval_fn = estimator_lib.build_estimator(
      run_config_lib.build_run_config(model_dir))[:3]
  result.update(_train(estimator, train_fn, train_steps, warmup_steps,
                       train_batch))
  result.update(_evaluate(estimator, eval_fn, eval_batches, eval_batch))
  result.update({
      'batch_size': train_batch,
      'crop_size': list(gin_config.binding('Parser.crop_size',
                                           scope='train')),
      'precision': model_fn_lib.ModelFnOptions().precision,
      'peak_rss_mb': measure.peak_rss_mb(),
  })
  return result
