"""Training-loop hooks bound in gin: profiling a span of steps, workers' startup delay."""

import gin
import tensorflow as tf

from official_seg import validation


class ProfileHook(tf.estimator.SessionRunHook):
  """Traces the steps [start, end) with TensorFlow's profiler.

  Written by hand: Estimator's own `ProfilerHook` writes Chrome timelines,
  which TensorBoard's profile plugin does not read; `tf.profiler` writes
  `plugins/profile/<run>/<host>.xplane.pb` under the log dir, which it does.
  """

  def __init__(self, logdir, start, end):
    self._logdir = logdir
    self._start, self._end = start, end
    self._tracing = False
    self._done = False
    self._global_step = None

  def begin(self):
    self._global_step = tf.compat.v1.train.get_global_step()

  def before_run(self, run_context):
    del run_context  # Unused.
    return tf.estimator.SessionRunArgs(self._global_step)

  def after_run(self, run_context, run_values):
    del run_context  # Unused.
    step = run_values.results
    if not (self._tracing or self._done) and self._start <= step < self._end:
      tf.compat.v1.logging.info('Profiling steps %d-%d into %s.', step,
                                self._end, self._logdir)
      tf.profiler.experimental.start(self._logdir)
      self._tracing = True
    elif self._tracing and step >= self._end:
      self._stop()

  def end(self, session):
    del session  # Unused.
    if self._tracing:
      self._stop()

  def _stop(self):
    tf.profiler.experimental.stop()
    self._tracing, self._done = False, True
    tf.compat.v1.logging.info('Profile written under %s/plugins/profile.',
                              self._logdir)


@gin.configurable(denylist=['model_dir'])
def profile_hooks(model_dir, profile_steps=None):
  """The hooks that profile training, for TensorBoard's profile plugin.

  Args:
    model_dir: str, where the trace goes (`plugins/profile/` under it).
    profile_steps: optional [start, end], the global steps to trace, end
      excluded; None profiles nothing.

  Returns:
    A list of `tf.estimator.SessionRunHook`s.

  Raises:
    ValueError: `profile_steps` is not two steps with start < end.
  """
  if profile_steps is None:
    return []
  if (isinstance(profile_steps, (str, bytes)) or len(profile_steps) != 2
      or not 0 <= profile_steps[0] < profile_steps[1]):
    raise validation.ConfigurationError(
        f'profile_hooks.profile_steps must be [start, end] with '
        f'0 <= start < end, got {profile_steps!r}.')
  return [ProfileHook(model_dir, *profile_steps)]


@gin.configurable(denylist=['worker_id'])
def startup_delay_hooks(worker_id, startup_delay_steps=0):
  """Delays asynchronous workers, as the seed trainers' startup_delay_steps.

  Worker k starts training once the global step reaches k times
  `startup_delay_steps`, so the first updates come from few workers.

  Args:
    worker_id: int, this trainer's place among the asynchronous
      parameter-server trainers (0 for the chief and outside them).
    startup_delay_steps: int, steps each further worker waits; 0 waits not.

  Returns:
    A list of `tf.estimator.SessionRunHook`s (TensorFlow's own
    `GlobalStepWaiterHook`).
  """
  if not (worker_id and startup_delay_steps):
    return []
  wait_until = worker_id * startup_delay_steps
  tf.compat.v1.logging.info('Worker %d starts at global step %d.', worker_id,
                            wait_until)
  return [tf.estimator.GlobalStepWaiterHook(wait_until)]
