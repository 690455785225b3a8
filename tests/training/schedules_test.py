"""Tests that every shipped learning-rate schedule equals its closed form."""

import math

from absl.testing import parameterized
import gin
import tensorflow as tf

from official_seg.runtime import gin_config
from official_seg.training import schedules

BASE = 0.01
STEPS = 1000
WARMUP = 100


def _poly(step):
  return BASE * (1 - min(step, STEPS) / STEPS) ** 0.9


CLOSED_FORMS = {
    'poly': _poly,
    'poly_warmup': lambda s: s / WARMUP * _poly(WARMUP) if s < WARMUP else _poly(s),
    'poly_slow_start': lambda s: 1e-4 if s < WARMUP else _poly(s),
    'cosine': lambda s: (s / WARMUP * BASE * 0.5 * (1 + math.cos(math.pi * WARMUP / STEPS))
                         if s < WARMUP else
                         BASE * 0.5 * (1 + math.cos(math.pi * min(s, STEPS) / STEPS))),
    'exponential': lambda s: BASE * 0.1 ** (s / STEPS),
    'constant': lambda s: s / WARMUP * BASE if s < WARMUP else BASE,
    # Boundaries at 60% and 85% of TRAIN_STEPS, rates BASE, BASE/10, BASE/100.
    'step': lambda s: BASE if s <= 600 else (BASE / 10 if s <= 850 else BASE / 100),
}


class SchedulesTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  @parameterized.parameters(*sorted(CLOSED_FORMS))
  def test_gin_schedule_matches_closed_form(self, name):
    gin_config.parse([f'schedules/{name}.gin'], [
        f'BASE_LEARNING_RATE = {BASE}', f'TRAIN_STEPS = {STEPS}',
        f'WARMUP_STEPS = {WARMUP}', f'SLOW_START_STEPS = {WARMUP}'], finalize=False)
    for step in (0, 1, 50, 99, 100, 101, 400, 600, 601, 850, 851, 999, 1000,
                 1500):
      rate = float(schedules.learning_rate(tf.constant(step, tf.int64)))
      self.assertAllClose(rate, CLOSED_FORMS[name](step), rtol=1e-5,
                          atol=1e-9, msg=f'{name} at step {step}')

  def test_float_schedule_is_constant(self):
    rate = schedules.learning_rate(tf.constant(7, tf.int64), schedule=0.25)
    self.assertAllClose(float(rate), 0.25)

  @parameterized.parameters([0.5, 0.4], [0.0, 0.5], [0.5, 1.0], [0.5, 0.5])
  def test_step_decay_names_bad_fractions(self, *fractions):
    with self.assertRaisesRegex(ValueError, 'boundary_fractions'):
      schedules.step_decay(0.1, 1000, boundary_fractions=list(fractions))


if __name__ == '__main__':
  tf.test.main()
