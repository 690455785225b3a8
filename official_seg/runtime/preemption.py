"""SIGTERM: the trainer saves its current step, the evaluator abandons; both exit 143."""

import contextlib
import os
import signal
import threading

import tensorflow as tf

from official_seg import validation

# Cluster managers announce a preemption with SIGTERM and kill the process
# some seconds later. The handler here only sets a flag: a training step or an
# evaluation batch in progress is left to finish, then
#
# - the trainer's `SaveOnPreemptionHook` saves a checkpoint at the current
#   global step with the Estimator's own saver and raises `Preempted`;
# - the evaluator's `AbandonOnPreemptionHook` raises `Preempted` before the
#   evaluation's metrics exist, so no record of it is written; a record being
#   written is finished first.
#
# Both run inside `deferred()`; anywhere else (an evaluator or a parameter
# server waiting, an export) the handler raises `Preempted` at once.
#
# Raising out of `after_run` makes `MonitoredSession` close without calling
# the hooks' `end()`, so neither the CheckpointSaverHook's final save (done
# here already) nor the final evaluation of `train_and_evaluate` (which could
# outlast the grace period) runs. The binary logs `Preempted` and exits with
# `command_line.PREEMPTED` (143).
#
# Written by hand: tf.estimator has no SIGTERM handling, and
# `tf.distribute.experimental.PreemptionCheckpointHandler` wraps each step of
# a TF2 custom loop (`handler.run(train_fn)`) and saves a `tf.train.Checkpoint`
# through a `CheckpointManager`; Estimator's steps run inside its own
# `MonitoredSession`, whose graph, variables and `Saver` that handler cannot
# reach.

_requested = threading.Event()
_state = {'deferring': False}


def _handle(signum, frame):
  del frame  # Unused.
  _requested.set()
  if not _state['deferring']:
    raise validation.Preempted(
        f'{signal.Signals(signum).name} outside any training or evaluation; '
        'nothing was in progress.')


def install():
  """Makes SIGTERM request a preemption; call from the main thread."""
  signal.signal(signal.SIGTERM, _handle)


def requested():
  """Whether a SIGTERM has arrived."""
  return _requested.is_set()


@contextlib.contextmanager
def deferred():
  """Training or an evaluation: a SIGTERM only sets the flag the hooks read.

  Raises:
    Preempted: on leaving, if a SIGTERM came (e.g. while a record was
      written after the last eval batch).
  """
  outer, _state['deferring'] = _state['deferring'], True
  try:
    yield
  finally:
    _state['deferring'] = outer
  if requested():
    raise validation.Preempted(
        'SIGTERM during an evaluation; its record is complete.')


class SaveOnPreemptionHook(tf.compat.v1.train.SessionRunHook):
  """After the step in progress, saves the current step and raises `Preempted`.

  Args:
    model_dir: str, where the checkpoints go.
    save: bool, False for trainers that write no checkpoints (non-chief
      workers): they stop without saving.
  """

  def __init__(self, model_dir, save=True):
    self._prefix = os.path.join(model_dir, 'model.ckpt')
    self._save = save
    self._global_step = None

  def begin(self):
    self._global_step = tf.compat.v1.train.get_global_step()

  def after_run(self, run_context, run_values):
    del run_values  # Unused.
    if not requested():
      return
    session = run_context.session
    step = int(session.run(self._global_step))
    if not self._save:
      raise validation.Preempted(
          f'SIGTERM at global step {step}; the chief saves.')
    # The Estimator's saver: its keep_checkpoint_max and relative paths.
    saver = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SAVERS)[0]
    path = saver.save(session, self._prefix, global_step=step)
    tf.compat.v1.logging.info('Preempted: saved %s.', path)
    raise validation.Preempted(
        f'SIGTERM at global step {step}; saved checkpoint {path}.')


class AbandonOnPreemptionHook(tf.compat.v1.train.SessionRunHook):
  """After the eval batch in progress, abandons the evaluation (no record)."""

  def after_run(self, run_context, run_values):
    del run_context, run_values  # Unused.
    if requested():
      raise validation.Preempted('SIGTERM during an evaluation; it was '
                                 'abandoned and nothing of it recorded.')
