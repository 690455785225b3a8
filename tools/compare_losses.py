"""Says whether two runs logged the same losses, step by step (seeded runs repeat).

  python tools/compare_losses.py --model_dirs=/tmp/run_a,/tmp/run_b

Reads a scalar (--tag, default loss/total) from each model dir's TensorBoard
events and compares the steps both logged. For every step's loss, train with
--gin_param=host_call.every_n_steps=1. Exits 0 when every common step holds
the same value, 1 at the first step that differs (printed), 2 when a run
logged none of the tag.
"""

import sys

from absl import app
from absl import flags

from benchmarks import semi_supervised

FLAGS = flags.FLAGS


def _define_flags():
  """The tool's flags; defined only when it runs, so tests can import it."""
  flags.DEFINE_list('model_dirs', None, 'The two model dirs to compare.')
  flags.DEFINE_string('tag', 'loss/total', 'The scalar to compare.')
  flags.DEFINE_float('tolerance', 0.0,
                     'Largest difference still called equal.')
  flags.mark_flag_as_required('model_dirs')
  flags.register_validator('model_dirs', lambda dirs: len(dirs) == 2,
                           '--model_dirs must name two model dirs.')


def compare(first, second, tolerance=0.0):
  """(equal steps, first differing step or None) of two {step: value}.

  Only the steps both hold are compared, in order.
  """
  steps = sorted(set(first) & set(second))
  for count, step in enumerate(steps):
    if abs(first[step] - second[step]) > tolerance:
      return count, step
  return len(steps), None


def verdict(model_dirs, tag, tolerance=0.0):
  """(exit status, message) of comparing `tag` in two model dirs."""
  runs = [semi_supervised.scalars(d, [tag])[tag] for d in model_dirs]
  for model_dir, points in zip(model_dirs, runs):
    if not points:
      return 2, f'{model_dir} logged no {tag!r}.'
  equal, differing = compare(*runs, tolerance=tolerance)
  if differing is None:
    return 0, f'{tag}: the same at all {equal} steps both runs logged.'
  return 1, (f'{tag}: the same at the first {equal} common steps; step '
             f'{differing} differs: {runs[0][differing]!r} against '
             f'{runs[1][differing]!r}.')


def main(argv):
  del argv  # Unused.
  status, message = verdict(FLAGS.model_dirs, FLAGS.tag, FLAGS.tolerance)
  print(message, file=sys.stderr if status == 2 else sys.stdout)
  return status


if __name__ == '__main__':
  _define_flags()
  app.run(main)
