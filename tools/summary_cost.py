"""Measures what the training summaries at their defaults cost, as a ratio.

  python tools/summary_cost.py --gin_file=experiments/quickstart.gin \
    --steps=1100 --block=25

Builds the experiment's training step as `train_and_eval` does, with the
summaries at their defaults (`host_call` scalars and rates every 50 steps,
training pictures every 1,000), on a synthetic dataset (or --data_dir). Then
runs it in one session, alternating blocks of --block steps: with the
host_call (what its hook runs after each step on CPUs and GPUs) and without
it. Fine alternation makes both arms see the same load of a shared machine.
Every step on which a summary is written (multiples of 50 and 1,000) falls
in a block with the host_call, so that arm carries all the writing of the
run on half of its steps: the ratio bounds the cost from above. The first
--warmup_steps (two blocks at least: each arm's first step builds its
executor) are not timed. Prints steps per second of each arm, their
ratio, and one JSON line. --control runs both arms without the host_call,
for the spread of the method itself.
"""

import datetime
import json
import sys
import tempfile
import time

from absl import app
from absl import flags
import tensorflow as tf

from benchmarks import profile
from benchmarks import report
from official_seg import flags as seg_flags
from official_seg.datasets import synthetic
from official_seg.runtime import gin_config

# --gin_file, --gin_param and --data_dir (default a synthetic dataset written
# to a temporary folder).
flags.adopt_module_key_flags(seg_flags)
flags.set_default(seg_flags.GIN_FILE, ['experiments/quickstart.gin'])
flags.DEFINE_integer('steps', 1100, 'Steps run in all.')
flags.DEFINE_integer('warmup_steps', 50, 'First steps, not timed.')
flags.DEFINE_integer('block', 25, 'Steps of one arm before switching; a '
                     'divisor of 50, so writing steps fall in host_call '
                     'blocks.')
flags.register_validator('block', lambda value: value > 0 and 50 % value == 0,
                         '--block must divide 50.')
flags.register_multi_flags_validator(
    ['warmup_steps', 'block'],
    lambda values: values['warmup_steps'] >= 2 * values['block'],
    '--warmup_steps must cover two blocks: the first step of each arm '
    'builds its own executor.')
flags.DEFINE_bool('control', False,
                  'Run both arms without the host_call: the ratio then '
                  'shows the spread of the method itself.')
FLAGS = flags.FLAGS


def _with_host_call(step):
  """Whether global step `step` runs in a block with the host_call."""
  return (step // FLAGS.block) % 2 == 0


def measure(spec, session_config):
  """Seconds and steps of each arm after warm-up."""
  (host_hook,) = [hook for hook in spec.training_hooks
                  if type(hook).__name__ == '_OutfeedHostCallHook']
  host_hook.begin()
  host_fetches = host_hook.before_run(None).fetches
  seconds = {True: 0.0, False: 0.0}
  steps = {True: 0, False: 0}
  with tf.compat.v1.Session(config=session_config) as session:
    session.run([tf.compat.v1.global_variables_initializer(),
                 tf.compat.v1.local_variables_initializer(),
                 tf.compat.v1.tables_initializer()])
    host_hook.after_create_session(session, None)
    for step in range(FLAGS.steps):
      arm = _with_host_call(step)
      start = time.perf_counter()
      with_host_call = arm and not FLAGS.control
      session.run([spec.train_op, host_fetches] if with_host_call
                  else spec.train_op)
      if step >= FLAGS.warmup_steps:
        seconds[arm] += time.perf_counter() - start
        steps[arm] += 1
    host_hook.end(session)
  return {('defaults' if arm else 'off'): steps[arm] / seconds[arm]
          for arm in (True, False)}


def main(argv):
  del argv  # Unused.
  work_dir = tempfile.mkdtemp(prefix='summary-cost-')
  extra = [f'TRAIN_STEPS = {FLAGS.steps}']
  if not FLAGS.data_dir:
    data_dir = f'{work_dir}/data'
    synthetic.write_dataset(data_dir, {'train': 64, 'val': 8})
    extra.append(f'DATA_DIR = {data_dir!r}')
  seg_flags.parse_gin(extra_params=extra)
  with tf.Graph().as_default():
    spec, session_config = profile.train_spec(
        gin_config.binding('build_estimator.train_batch_size'),
        f'{work_dir}/model')
    rates = measure(spec, session_config)
  line = {
      'date': datetime.datetime.now().isoformat(timespec='seconds'),
      'command': ' '.join(sys.argv),
      'machine': report.machine(),
      'steps_per_second': rates,
      'ratio_defaults_to_off': rates['defaults'] / rates['off'],
  }
  print(f"summaries at defaults: {rates['defaults']:.3f} steps/s, off: "
        f"{rates['off']:.3f} steps/s, ratio "
        f"{line['ratio_defaults_to_off']:.4f}")
  print(json.dumps(line, sort_keys=True))


if __name__ == '__main__':
  app.run(main)
