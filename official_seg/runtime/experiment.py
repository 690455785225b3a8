"""Runs an experiment: train, eval, continuous_eval or train_and_evaluate."""

import functools

import gin
import gin.tf
import tensorflow as tf

from official_seg import validation
from official_seg.data import input_fn as input_lib
from official_seg.evaluation import best_checkpoint
from official_seg.evaluation import continuous
from official_seg.evaluation import eval_summaries
from official_seg.evaluation import metrics
from official_seg.evaluation import results
from official_seg.export import saved_model
from official_seg.export import tflite
from official_seg.export import tflite_qat
from official_seg.runtime import cluster
from official_seg.runtime import config_checks
from official_seg.runtime import dry_run
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import preemption
from official_seg.runtime import run_config as run_config_lib
from official_seg.training import averaging
from official_seg.training import hooks as training_hooks

MODES = ('train', 'eval', 'continuous_eval', 'train_and_eval', 'export',
         'export_tflite')


def _training_hooks(estimator):
  """A trainer's hooks: the chief saves the operative gin config and profiles,
  asynchronous workers wait their startup delay."""
  config = estimator.config
  worker = cluster.parameter_server_input_context(config)
  hooks = training_hooks.startup_delay_hooks(
      worker.input_pipeline_id if worker else 0)
  if not config.is_chief:
    return hooks
  return hooks + [gin.tf.GinConfigSaverHook(estimator.model_dir,
                                            summarize_config=True)
                 ] + training_hooks.profile_hooks(estimator.model_dir)


def _train_hooks(estimator):
  """A trainer's hooks (`_training_hooks`) and its save when preempted."""
  return _training_hooks(estimator) + [
      preemption.SaveOnPreemptionHook(estimator.model_dir)]


def _serving(built):
  """What the exports of this experiment need (see `saved_model.Serving`)."""
  return saved_model.Serving(
      built.serving_estimator,
      saved_model.serving_input_receiver_fn(
          built.eval_parser,
          static_size=built.options.quantize_delay_step is not None),
      built.dataset, saved_model.preprocessing_metadata(built.eval_parser))


def _record(built, timer, eval_result, checkpoint_path):
  """Records one evaluation and keeps (and exports) the best checkpoint.

  A step already recorded is not written again: a resumed
  `train_and_evaluate` re-saves and re-evaluates the checkpoint it resumed
  from.
  """
  estimator = built.estimator
  step = int(eval_result['global_step'])
  new_step = all(r['global_step'] != step
                 for r in results.read_records(estimator.eval_dir()))
  if not new_step:
    tf.compat.v1.logging.info('Step %d is already recorded; its new '
                              'evaluation is logged, not recorded.', step)
  eval_result = dict(
      eval_result,
      weights=averaging.scored_weights(built.options.moving_average_decay),
      boundary_tolerance=built.options.boundary_tolerance)
  record = results.report(estimator.eval_dir(), eval_result, checkpoint_path,
                          built.dataset.class_names, seconds=timer.seconds,
                          append=new_step)
  if new_step and metrics.CONFUSION_MATRIX in eval_result:
    eval_summaries.write_confusion_image(
        estimator.eval_dir(), step,
        metrics.confusion_from_summary(eval_result[metrics.CONFUSION_MATRIX]),
        built.dataset.class_names)
  # export/best/ follows best/, in every mode that evaluates.
  if new_step and best_checkpoint.update(estimator.model_dir, record):
    saved_model.export_best(_serving(built))
  return record


def _last_record(estimator):
  """The record of the latest step, or None before any evaluation."""
  records = results.read_records(estimator.eval_dir())
  return max(records, key=lambda r: r['global_step'], default=None)


def _evaluate(built, checkpoint_path):
  """Evaluates one checkpoint over the whole split and records it."""
  timer = results.EvalTimer()
  with preemption.deferred():  # A record is written whole or not at all.
    eval_result = built.estimator.evaluate(
        built.eval_input_fn, steps=None,
        hooks=[timer, preemption.AbandonOnPreemptionHook()],
        checkpoint_path=checkpoint_path)
    return _record(built, timer, eval_result, checkpoint_path)


def _eval_latest(built, checkpoint_path):
  checkpoint_path = checkpoint_path or built.estimator.latest_checkpoint()
  if not checkpoint_path:
    raise validation.MissingFileError(
        f'No checkpoint to evaluate in {built.estimator.model_dir}; train '
        'first or pass --checkpoint.')
  return _evaluate(built, checkpoint_path)


def _continuous_eval(built, train_steps):
  estimator = built.estimator
  continuous.continuous_eval(
      functools.partial(_evaluate, built), estimator.model_dir,
      estimator.eval_dir(), final_step=train_steps)
  record = _last_record(estimator)
  if not record or record['global_step'] < train_steps:
    # The evaluator's timeout ended the wait before the final step.
    raise continuous.CheckpointTimeoutError(
        f'No checkpoint of step {train_steps} (TRAIN_STEPS) in '
        f'{estimator.model_dir} before continuous_eval.timeout_secs; the '
        'evaluator stops without it. Evaluate it later with --mode=eval.')
  return record


def _train_and_evaluate(built, train_steps, throttle_secs):
  estimator = built.estimator
  timer = results.EvalTimer()
  train_spec = tf.estimator.TrainSpec(
      built.train_input_fn, max_steps=train_steps,
      hooks=_train_hooks(estimator))
  eval_spec = tf.estimator.EvalSpec(
      built.eval_input_fn, steps=None, start_delay_secs=0,
      throttle_secs=throttle_secs,
      hooks=[timer, preemption.AbandonOnPreemptionHook()],
      exporters=[results.MetricsExporter(
          functools.partial(_record, built, timer))]
      + saved_model.make_exporters(_serving(built)))
  with preemption.deferred():
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
  # Kept checkpoints that the throttle or a crash of an earlier run left
  # unevaluated: the records hold every kept checkpoint once, step 0 aside.
  # That one is the model before any training step, which
  # `train_and_evaluate` never evaluates; evaluated here it would be the
  # last evaluation of the run and its table the last one logged.
  continuous.evaluate_pending(
      functools.partial(_evaluate, built), estimator.model_dir,
      continuous.recorded_steps(estimator.eval_dir()) | {0})
  return _last_record(estimator)


@gin.configurable(denylist=['mode', 'model_dir', 'checkpoint_path',
                            'tpu_address', 'check_only'])
@validation.checked(train_steps=validation.POSITIVE_WHOLE)
def run(mode, model_dir, checkpoint_path=None, tpu_address=None,
        train_steps=gin.REQUIRED, throttle_secs=60, check_only=False):
  """Runs one mode of the experiment.

  In a TF_CONFIG cluster, 'train' and 'train_and_eval' do the task's part:
  the chief and workers train, parameter servers serve until training ends,
  and the evaluator runs the continuous evaluator.

  Args:
    mode: one of `MODES`.
    model_dir: str, where checkpoints, summaries and eval results go.
    checkpoint_path: optional checkpoint for 'eval', 'export' (a
      SavedModel under <model_dir>/export/) and 'export_tflite' (.tflite
      models under <model_dir>/export/tflite/); default the latest.
    tpu_address: optional `run_config.TpuAddress` of the TPU to run on.
    train_steps: int, the global step training stops at (macro TRAIN_STEPS);
      the continuous evaluator exits after evaluating it.
    throttle_secs: int, least seconds between evaluations in
      'train_and_eval'; the final checkpoint is always evaluated.
    check_only: bool, --dry_run: check the configuration and data, time a
      training step and report the plan (`dry_run.run`), writing nothing.

  Returns:
    The metrics.jsonl record of the last evaluation, or None after 'train'
    and 'export'; with `check_only` the dry run's report (str).

  Raises:
    ValueError: an unknown mode.
  """
  if mode not in MODES:
    raise ValueError(f'Unknown mode {mode!r}; expected one of {MODES}.')
  if check_only:
    return dry_run.run(model_dir, train_steps)
  role = cluster.role(mode)
  if role == 'ps':
    cluster.serve_parameters()
    return None
  if role == 'evaluator':
    mode = 'continuous_eval'
  built = _build(model_dir, tpu_address)
  config_checks.check_data(built.dataset, built.eval_parser,
                           _splits(built.dataset, mode))
  try:
    if role == 'trainer':
      with preemption.deferred():
        return cluster.train(built.estimator, built.train_input_fn,
                             built.eval_input_fn, train_steps,
                             _train_hooks(built.estimator))
    return _run_mode(mode, built, checkpoint_path, train_steps,
                     throttle_secs)
  except tf.errors.DataLossError as error:
    dataset = built.dataset
    raise input_lib.explain_data_loss(
        error, dataset.data_dir,
        [dataset.train_split, dataset.eval_split]) from error
  except tf.errors.InvalidArgumentError as error:
    # Only our own graph checks (a label of no class, a NaN loss) are a
    # fault of the run; any other failed op is a bug.
    failed = validation.failed_check(error.message)
    if failed is None:
      raise
    raise validation.RunError(failed) from error


def _build(model_dir, tpu_address):
  """The run config and estimator.

  A setting they reject raises `validation.ConfigurationError` where it is
  known; any other error is a bug and propagates with its traceback.
  """
  config = run_config_lib.build_run_config(model_dir, tpu_address)
  return estimator_lib.build_estimator(config)


def _splits(dataset, mode):
  """The splits checked before a mode starts: both, unless it only exports.

  A training-only job checks the eval split too: the evaluator beside it
  would otherwise fail at its first checkpoint.
  """
  if mode in ('export', 'export_tflite'):
    return []
  return [dataset.train_split, dataset.eval_split]


def _export_tflite(built, checkpoint_path):
  """--mode=export_tflite of the built model (quantization-aware or float)."""
  if built.components.inference.output.sigmoid:
    raise validation.ConfigurationError(
        "--mode=export_tflite serves one class per pixel; OutputKind.kind = "
        "'sigmoid' exports a SavedModel only (--mode=export).")
  options = built.options
  qat = None
  if options.quantize_delay_step is not None:
    qat = tflite_qat.QatSource(built.components.model,
                               built.components.inference,
                               options.moving_average_decay)
  tflite.tflite_export(_serving(built), built.eval_parser, qat,
                       checkpoint_path=checkpoint_path)


def _run_mode(mode, built, checkpoint_path, train_steps, throttle_secs):
  """Runs `mode` on a built estimator; see `run`."""
  if mode == 'train':
    with preemption.deferred():
      built.estimator.train(built.train_input_fn, max_steps=train_steps,
                            hooks=_train_hooks(built.estimator))
    return None
  if mode == 'eval':
    return _eval_latest(built, checkpoint_path)
  if mode == 'continuous_eval':
    return _continuous_eval(built, train_steps)
  if mode == 'export':
    saved_model.export_checkpoint(_serving(built), checkpoint_path)
    return None
  if mode == 'export_tflite':
    _export_tflite(built, checkpoint_path)
    return None
  return _train_and_evaluate(built, train_steps, throttle_secs)
