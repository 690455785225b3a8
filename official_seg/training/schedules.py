"""Learning-rate schedules: Keras and Model Garden schedules bound in gin, plus slow start."""

import gin
import gin.tf.external_configurables  # pylint: disable=unused-import
import tensorflow as tf
from official.modeling.optimization import lr_schedule

from official_seg import validation

# gin.tf registers Keras's decays as @tf.keras.optimizers.schedules.*; the
# Model Garden adds the linear warm-up that wraps any of them.
gin.external_configurable(lr_schedule.LinearWarmup, module='schedules')
_SCHEDULES = tf.keras.optimizers.schedules


@gin.configurable(module='schedules')
class SlowStart(_SCHEDULES.LearningRateSchedule):
  """DeepLab's slow start: a fixed small rate for the first steps.

  Neither Keras nor the Model Garden has it: their warm-ups ramp linearly,
  while DeepLab holds `slow_start_learning_rate` flat, then switches.
  """

  def __init__(self, after_slow_start=gin.REQUIRED, slow_start_step=0,
               slow_start_learning_rate=1e-4):
    """Initializes the schedule.

    Args:
      after_slow_start: a `LearningRateSchedule` or a float, used from
        `slow_start_step` on, evaluated at the global step.
      slow_start_step: int, steps at the slow rate.
      slow_start_learning_rate: float, the rate before `slow_start_step`.
    """
    super().__init__()
    self._after = after_slow_start
    self._slow_start_step = slow_start_step
    self._slow_rate = slow_start_learning_rate

  def __call__(self, step):
    after = self._after(step) if callable(self._after) else self._after
    after = tf.cast(after, tf.float32)
    return tf.where(
        tf.cast(step, tf.int64) < self._slow_start_step,
        tf.constant(self._slow_rate, tf.float32), after)

  def get_config(self):
    return {'slow_start_step': self._slow_start_step,
            'slow_start_learning_rate': self._slow_rate}


@gin.configurable(module='schedules')
def step_decay(base_learning_rate=gin.REQUIRED, train_steps=gin.REQUIRED,
               boundary_fractions=(0.6, 0.85), decay_rate=0.1):
  """A step schedule scaled to the run: Keras's piecewise-constant decay.

  Keras's `PiecewiseConstantDecay` takes absolute steps and rates; this
  derives them from BASE_LEARNING_RATE and TRAIN_STEPS, so changing either
  retargets the schedule.

  Args:
    base_learning_rate: float, the rate before the first boundary.
    train_steps: int, the step training ends at.
    boundary_fractions: increasing fractions of `train_steps` in (0, 1).
    decay_rate: float, the rate is multiplied by it at each boundary.

  Returns:
    A `tf.keras.optimizers.schedules.PiecewiseConstantDecay`.

  Raises:
    ValueError: the fractions are not increasing within (0, 1).
  """
  fractions = list(boundary_fractions)
  if fractions != sorted(set(fractions)) or not all(
      0 < f < 1 for f in fractions):
    raise validation.ConfigurationError(
        'schedules.step_decay.boundary_fractions must increase '
        f'within (0, 1), got {fractions}.')
  return _SCHEDULES.PiecewiseConstantDecay(
      [int(round(f * train_steps)) for f in fractions],
      [base_learning_rate * decay_rate**i for i in range(len(fractions) + 1)])


@gin.configurable(denylist=['global_step'])
def learning_rate(global_step, schedule=gin.REQUIRED):
  """The learning rate at `global_step`.

  Args:
    global_step: int64 scalar tensor.
    schedule: a `LearningRateSchedule` (e.g.
      `@tf.keras.optimizers.schedules.PolynomialDecay()`,
      wrapped in `@schedules.LinearWarmup()` or `@schedules.SlowStart()` for a
      warm-up) or a float for a constant rate.

  Returns:
    Scalar float32 tensor.
  """
  if callable(schedule):
    return tf.cast(schedule(global_step), tf.float32)
  return tf.constant(float(schedule), tf.float32)
