"""Runs an experiment: train, eval, or train_and_evaluate, on one estimator."""

import gin
import tensorflow as tf

from official_seg.evaluation import results
from official_seg.runtime import run_config as run_config_lib

MODES = ('train', 'eval', 'train_and_eval')


def _config_saver_hooks(estimator):
  """Saves the operative gin config into the model dir, on the chief only."""
  if not estimator.config.is_chief:
    return []
  return [gin.tf.GinConfigSaverHook(estimator.model_dir,
                                    summarize_config=True)]


def _train(estimator, train_input_fn, train_steps):
  estimator.train(train_input_fn, max_steps=train_steps,
                  hooks=_config_saver_hooks(estimator))


def _evaluate(estimator, eval_input_fn, checkpoint_path):
  checkpoint_path = checkpoint_path or estimator.latest_checkpoint()
  if not checkpoint_path:
    raise FileNotFoundError(
        f'No checkpoint to evaluate in {estimator.model_dir}; train first or '
        'pass the checkpoint to evaluate.')
  eval_result = estimator.evaluate(eval_input_fn, steps=None,
                                   checkpoint_path=checkpoint_path)
  return results.report(estimator.eval_dir(), eval_result, checkpoint_path)


def _train_and_evaluate(estimator, train_input_fn, eval_input_fn,
                        train_steps, throttle_secs):
  train_spec = tf.estimator.TrainSpec(
      train_input_fn, max_steps=train_steps,
      hooks=_config_saver_hooks(estimator))
  eval_spec = tf.estimator.EvalSpec(
      eval_input_fn, steps=None, start_delay_secs=0,
      throttle_secs=throttle_secs,
      exporters=[results.MetricsExporter(estimator.eval_dir())])
  tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
  records = results.read_records(estimator.eval_dir())
  return records[-1] if records else None


@gin.configurable(denylist=['mode', 'model_dir', 'checkpoint_path'])
def run(mode, model_dir, checkpoint_path=None, train_steps=gin.REQUIRED,
        throttle_secs=60):
  """Runs one mode of the experiment.

  Args:
    mode: one of `MODES`.
    model_dir: str, where checkpoints, summaries and eval results go.
    checkpoint_path: optional checkpoint for 'eval'; default the latest.
    train_steps: int, the global step training stops at (macro TRAIN_STEPS).
    throttle_secs: int, least seconds between evaluations in
      'train_and_eval'; the final checkpoint is always evaluated.

  Returns:
    The metrics.jsonl record of the last evaluation, or None after 'train'.

  Raises:
    ValueError: an unknown mode.
  """
  if mode not in MODES:
    raise ValueError(f'Unknown mode {mode!r}; expected one of {MODES}.')
  config = run_config_lib.build_run_config(model_dir)
  estimator, train_fn, eval_fn = run_config_lib.build_estimator(config)
  if mode == 'train':
    return _train(estimator, train_fn, train_steps)
  if mode == 'eval':
    return _evaluate(estimator, eval_fn, checkpoint_path)
  return _train_and_evaluate(estimator, train_fn, eval_fn, train_steps,
                             throttle_secs)
