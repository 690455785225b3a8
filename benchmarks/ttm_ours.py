"""official_seg's time to a mean IoU: train_and_eval's train, save, evaluate."""

import tensorflow as tf

from benchmarks import measure
from benchmarks import time_to_miou
# Registers run and the other configurables every experiment binds.
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import gin_config
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.runtime import run_config as run_config_lib


class EvaluateOnSave(tf.estimator.CheckpointSaverListener):
  """Evaluates each checkpoint of an evaluation step; stops at the target.

  As `tf.estimator.train_and_evaluate` does in one process: the training
  session stays open while the saved checkpoint is evaluated over the whole
  split, and a listener's True stops training.
  """

  def __init__(self, estimator, eval_fn, curve, steps):
    """Args: the Estimator, its eval input_fn, a `time_to_miou.Curve` and
    the list of steps to evaluate."""
    self._estimator = estimator
    self._eval_fn = eval_fn
    self._curve = curve
    self._steps = set(steps)

  def after_save(self, session, global_step_value):
    del session  # Unused.
    step = int(global_step_value)
    if step not in self._steps or step in self._curve.steps():
      return False
    with self._curve.evaluating():
      result = self._estimator.evaluate(
          self._eval_fn, steps=None,
          checkpoint_path=self._estimator.latest_checkpoint())
    tf.compat.v1.logging.info('Step %d: mean IoU %.4f (target %.4f).', step,
                              result['mean_iou'], self._curve.target)
    return self._curve.add(step, float(result['mean_iou']))


def run(gin_files, gin_params, model_dir, target, eval_every_steps,
        max_steps=None):
  """Trains official_seg as train_and_eval does until the target mean IoU.

  The experiment's own schedule (TRAIN_STEPS) is kept; a checkpoint is
  saved every `eval_every_steps` (Estimator evaluates checkpoints) and at
  `max_steps`, and each is evaluated on the whole eval split. The
  experiment is parsed over gin's current config; the caller clears it.

  Args:
    gin_files: list of str, the experiment's gin files.
    gin_params: list of str, bindings after the files.
    model_dir: str, an empty folder.
    target: float, the mean IoU to reach.
    eval_every_steps: int, steps between evaluations.
    max_steps: optional int, the most steps; None takes TRAIN_STEPS.

  Returns:
    dict: `time_to_miou.Curve.result` with the trainer and its settings.
  """
  gin_config.parse(gin_files, list(gin_params) + [
      f'build_run_config.save_checkpoints_steps = {eval_every_steps}'])
  max_steps = max_steps or gin_config.binding('run.train_steps')
  steps = time_to_miou.evaluation_steps(eval_every_steps, max_steps)
  curve = time_to_miou.Curve(target)
  estimator, train_fn, eval_fn = estimator_lib.build_estimator(
      run_config_lib.build_run_config(model_dir))[:3]
  estimator.train(train_fn, max_steps=max_steps, saving_listeners=[
      EvaluateOnSave(estimator, eval_fn, curve, steps)])
  result = curve.result()
  result.update({
      'trainer': 'official_seg',
      'eval_every_steps': eval_every_steps,
      'max_steps': max_steps,
      'schedule_steps': gin_config.binding('run.train_steps'),
      'batch_size': gin_config.binding('build_estimator.train_batch_size'),
      'crop_size': list(gin_config.binding('Parser.crop_size',
                                           scope='train')),
      'precision': model_fn_lib.ModelFnOptions().precision,
      'peak_rss_mb': measure.peak_rss_mb(),
  })
  return result
