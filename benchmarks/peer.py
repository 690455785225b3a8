"""Measures the Model Garden's own segmentation trainer on a gin experiment."""

import time

import tensorflow as tf
from official.common import distribute_utils
from official.core import base_trainer
from official.core import task_factory
from official.core import train_utils
from official.modeling import performance
# Registers the Model Garden segmentation task with task_factory.
from official.vision.tasks import semantic_segmentation  # pylint: disable=unused-import

from benchmarks import input as input_benchmark
from benchmarks import measure
from benchmarks import peer_config as peer_config_lib
# Registers run and the other configurables every experiment binds.
from official_seg.runtime import gin_config


class Trainer(base_trainer.Trainer):
  """The Model Garden's Trainer, with every evaluation batch in the mean IoU.

  SemanticSegmentationTask.aggregate_logs resets its IoU metric when Orbit
  hands it the first batch's outputs with no state, after that batch was
  counted: the stock Trainer's mean IoU leaves the first batch out. Starting
  from a state skips that reset; the metric is reset here instead.
  """

  def eval_begin(self):
    super().eval_begin()
    self.task.iou_metric.reset_states()
    return True  # Truthy, so eval_end still reduces the IoU.


def build_trainer(config, model_dir):
  """(strategy, task, trainer) as official.core.train_lib builds them.

  Args:
    config: an `ExperimentConfig` (see `peer_config`).
    model_dir: str, the task's logging dir.

  Returns:
    The `tf.distribute.Strategy`, the `SemanticSegmentationTask` and its
    initialised `Trainer`, built in the strategy's scope.
  """
  strategy = distribute_utils.get_distribution_strategy(
      config.runtime.distribution_strategy, num_gpus=config.runtime.num_gpus)
  with strategy.scope():
    task = task_factory.get_task(config.task, logging_dir=model_dir)
    trainer = train_utils.create_trainer(config, task, train=True,
                                         evaluate=True, trainer_cls=Trainer)
    trainer.initialize()
  return strategy, task, trainer


def _chunks(total, size):
  """Orbit Controller's loop lengths: `size` steps, then the remainder."""
  while total > 0:
    yield min(size, total)
    total -= size


def _train(trainer, train_steps, warmup_steps):
  """Trains as Orbit's Controller does; times the loops after warm-up."""
  curve = []

  def loop(num_steps):
    logs = trainer.train(tf.constant(num_steps, tf.int32))
    curve.append([int(trainer.global_step.numpy()),
                  float(logs['training_loss'])])

  per_loop = trainer.config.trainer.steps_per_loop
  for num_steps in _chunks(warmup_steps, per_loop):
    loop(num_steps)
  start = time.perf_counter()
  for num_steps in _chunks(train_steps - warmup_steps, per_loop):
    loop(num_steps)
  seconds = time.perf_counter() - start
  batch = trainer.config.task.train_data.global_batch_size
  images = batch * (train_steps - warmup_steps)
  return {'train_images_per_sec': images / seconds, 'loss_curve': curve}


def _evaluate(trainer, eval_batches):
  """Evaluates once for one batch (tracing), then times a whole evaluation."""
  data = trainer.config.task.validation_data
  trainer.evaluate(tf.constant(1, tf.int32))
  start = time.perf_counter()
  logs = trainer.evaluate(tf.constant(eval_batches or -1, tf.int32))
  seconds = time.perf_counter() - start
  images = sum(1 for _ in tf.data.TFRecordDataset(
      tf.io.gfile.glob(data.input_path)))
  if eval_batches:
    images = min(images, eval_batches * data.global_batch_size)
  return {'eval_images_per_sec': images / seconds,
          'mean_iou': float(logs['mean_iou'])}


def _train_step_flops(strategy, trainer, element_spec):
  """FLOPs of one task.train_step, traced as Trainer.train_step runs it."""

  @tf.function
  def step(inputs):
    strategy.run(trainer.task.train_step, args=(inputs,),
                 kwargs={'model': trainer.model,
                         'optimizer': trainer.optimizer})

  graph = step.get_concrete_function(element_spec).graph
  flops, unknown = measure.graph_flops_and_unknown(graph)
  return {'flops_per_step': int(flops), 'uncounted_flop_ops': unknown}


def run_peer(config, train_steps, warmup_steps, input_batches, eval_batches,
             model_dir, input_warmup_batches=10):
  """Runs the Model Garden's own trainer on `config` and measures it.

  The task, model, optimizer and Orbit Trainer are built as
  official.core.train_lib.run_experiment builds them; the training input,
  training loops, evaluation and one step's FLOPs are measured.

  Args:
    config: an `ExperimentConfig` (see `peer_config`).
    train_steps: int, training steps in all.
    warmup_steps: int, of those, steps not timed (tracing, oneDNN's first
      calls, tf.data's buffers).
    input_batches: int, batches of the training input timed alone.
    eval_batches: optional int, validation batches; None reads the split.
    model_dir: str, where params.yaml is written (no checkpoints are).
    input_warmup_batches: int, input batches read before timing.

  Returns:
    dict of the measurements (images/s, loss curve [[step, loss], ...],
    mean IoU, FLOPs per step, peak RSS in MiB).

  Raises:
    ValueError: warmup_steps is not below train_steps.
  """
  if not 0 < warmup_steps < train_steps:
    raise ValueError(f'--warmup_steps={warmup_steps} must be positive and '
                     f'below --train_steps={train_steps}.')
  previous_policy = tf.keras.mixed_precision.global_policy()
  # As official/vision/train.py: the policy is set before anything is built.
  performance.set_mixed_precision_policy(
      config.runtime.mixed_precision_dtype or 'float32')
  try:
    strategy, task, trainer = build_trainer(config, model_dir)
    train_utils.serialize_config(config, model_dir)
    dataset = task.build_inputs(config.task.train_data)
    batch = config.task.train_data.global_batch_size
    result = {'input_images_per_sec': input_benchmark.measure(
        dataset, batch, input_warmup_batches, input_batches).images_per_second}
    with strategy.scope():
      result.update(_train(trainer, train_steps, warmup_steps))
      result.update(_evaluate(trainer, eval_batches))
      result.update(_train_step_flops(strategy, trainer, dataset.element_spec))
  finally:
    tf.keras.mixed_precision.set_global_policy(previous_policy)
  result.update({
      'trainer': 'model_garden', 'train_steps': train_steps,
      'batch_size': batch, 'crop_size': config.task.train_data.output_size,
      'precision': peer_config_lib.precision_name(config),
      'train_mean_iou': config.task.evaluation.report_train_mean_iou,
      'peak_rss_mb': measure.peak_rss_mb()})
  return result


def run(gin_files, gin_params, model_dir, train_steps, warmup_steps,
        input_batches=50, eval_batches=None, precision=None,
        train_mean_iou=False):
  """Measures the Model Garden trainer on a gin experiment, as `ours.run` does.

  TRAIN_STEPS is set to `train_steps`, so the schedule spans the run. The
  experiment is parsed over gin's current config; the caller (a binary or a
  test) clears that config first.

  Args:
    gin_files: list of str, the experiment's gin files.
    gin_params: list of str, bindings after the files (DATA_DIR, ...).
    model_dir, train_steps, warmup_steps, input_batches, eval_batches: see
      `run_peer`.
    precision: optional 'float32' or 'mixed_bfloat16' (see `peer_config`).
    train_mean_iou: bool, see `peer_config`.

  Returns:
    dict of the measurements; `measure.emit` prints it.
  """
  gin_config.parse(gin_files,
                   list(gin_params) + [f'TRAIN_STEPS = {train_steps}'],
                   finalize=False)
  config = peer_config_lib.peer_config(precision, eval_batches=eval_batches,
                                       train_mean_iou=train_mean_iou)
  return run_peer(config, train_steps, warmup_steps, input_batches,
                  eval_batches, model_dir)
