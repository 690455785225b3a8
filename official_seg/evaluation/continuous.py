"""Continuous evaluation: each kept checkpoint once, restart-safe, never crashing on GC."""

import os
import re

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.data import storage
from official_seg.evaluation import results

_STEP = re.compile(r'-(\d+)$')


class CheckpointTimeoutError(validation.RunError, TimeoutError):
  """No checkpoint came within a wait: a fault of the run, not a setting.

  Its message says which checkpoint and what to do; the binary prints it
  alone and exits 1.
  """


def checkpoint_step(checkpoint_path):
  """The global step in a checkpoint's name, e.g. 500 for 'model.ckpt-500'.

  Raises:
    ValueError: the name has no step suffix.
  """
  match = _STEP.search(checkpoint_path)
  if not match:
    raise ValueError(f'Checkpoint name {checkpoint_path!r} has no -<step> '
                     'suffix.')
  return int(match.group(1))


def checkpoint_exists(checkpoint_path):
  return tf.io.gfile.exists(checkpoint_path + '.index')


def kept_checkpoints(model_dir):
  """Every checkpoint the trainer's state file lists, oldest step first."""
  state = tf.train.get_checkpoint_state(model_dir)
  if not state:
    return []
  paths = [p if storage.is_absolute(p) else os.path.join(model_dir, p)
           for p in state.all_model_checkpoint_paths]
  return sorted(paths, key=checkpoint_step)


def evaluate_once(evaluate_fn, checkpoint_path):
  """Runs `evaluate_fn` unless the checkpoint is gone, before or during it.

  Returns:
    The record from `evaluate_fn`, or None when the checkpoint was deleted
    (by the trainer's `keep_checkpoint_max`) and so skipped.

  Raises:
    Whatever `evaluate_fn` raises while the checkpoint still exists.
  """
  if not checkpoint_exists(checkpoint_path):
    tf.compat.v1.logging.warning(
        'Skipping %s: deleted before evaluation started.', checkpoint_path)
    return None
  try:
    return evaluate_fn(checkpoint_path)
  except (tf.errors.NotFoundError, tf.errors.DataLossError, ValueError):
    if checkpoint_exists(checkpoint_path):
      raise
    tf.compat.v1.logging.warning(
        'Skipping %s: deleted while it was being evaluated.', checkpoint_path)
    return None


def evaluate_pending(evaluate_fn, model_dir, done):
  """Evaluates the kept checkpoints whose steps are not in `done`, oldest first.

  Every pending one is evaluated, also past the final step: asynchronous
  trainers may save their last checkpoint a few steps after TRAIN_STEPS.

  Args:
    evaluate_fn: callable(checkpoint_path) -> record; it must record it.
    model_dir: str, the trainer's model dir, only read.
    done: set of steps already recorded; updated in place.

  Returns:
    The steps evaluated by this call, in order.
  """
  evaluated = []
  for path in kept_checkpoints(model_dir):
    step = checkpoint_step(path)
    if step in done:
      continue
    if evaluate_once(evaluate_fn, path) is not None:
      evaluated.append(step)
    done.add(step)
  return evaluated


def recorded_steps(eval_dir):
  return {record['global_step'] for record in results.read_records(eval_dir)}


@gin.configurable(denylist=['evaluate_fn', 'model_dir', 'eval_dir',
                            'final_step'])
def continuous_eval(evaluate_fn, model_dir, eval_dir, final_step,
                    min_interval_secs=30, timeout_secs=3600):
  """Evaluates every kept checkpoint of `model_dir` exactly once.

  Steps already recorded in `eval_dir` are never evaluated again, so a
  restarted evaluator carries on where it stopped.

  Args:
    evaluate_fn: callable(checkpoint_path) -> record; it must write the
      record (`results.write_record`).
    model_dir: str, the trainer's model dir, only read.
    eval_dir: str, the evaluator's own folder.
    final_step: int, the last training step; the evaluator exits after it.
    min_interval_secs: int, least seconds between looks at `model_dir`.
    timeout_secs: int, exit when no new checkpoint comes for this long.

  Returns:
    The set of global steps evaluated by this call.
  """
  done = recorded_steps(eval_dir)
  evaluated = set()
  if max(done, default=-1) >= final_step:
    tf.compat.v1.logging.info('Step %d is already evaluated; nothing to do.',
                              final_step)
    return evaluated
  for _ in tf.train.checkpoints_iterator(
      model_dir, min_interval_secs=min_interval_secs, timeout=timeout_secs):
    evaluated.update(evaluate_pending(evaluate_fn, model_dir, done))
    if max(done, default=-1) >= final_step:
      return evaluated
  tf.compat.v1.logging.info('No new checkpoint in %d s; evaluator exits.',
                            timeout_secs)
  return evaluated
