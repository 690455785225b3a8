"""One arm of tools/ab_commits.py: times the training step of the checkout it runs in.

  cd <worktree> && PYTHONPATH=<worktree> python <copy>/ab_commit_step.py \
    --gin_file=gin/experiments/benchmark_mnv2_deeplabv3.gin \
    --gin_param="DATA_DIR = '/data/synthetic_large'" \
    --model_dir=/tmp/arm --warmup_steps=3 --steps=10

ab_commits copies this file, with benchmarks/ab.py and benchmarks/profile.py
of the same tree, into a folder of their own, and runs it in a commit's
worktree with that worktree alone on PYTHONPATH: so the step is built by one
benchmark code for every commit (`ab.parsed_arm`, as `tools/ab_step.py`
builds an arm: input pipeline, model, loss, gradients, update and the
host_call), from the commit's own `official_seg` and gin files. Runs
--warmup_steps untimed, then --steps timed one by one, and prints one JSON
line: each timed step's seconds and the folder `official_seg` came from.
"""

import argparse
import json
import os
import tempfile
import time

import official_seg
from benchmarks import ab
# Registers the configurables every experiment binds, as ab_step's import.
from official_seg import flags as seg_flags  # pylint: disable=unused-import


def _parser():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--gin_file', action='append', default=[])
  parser.add_argument('--gin_param', action='append', default=[])
  parser.add_argument('--model_dir', default=None,
                      help='An empty folder for the step\'s summaries.')
  parser.add_argument('--warmup_steps', type=int, default=3)
  parser.add_argument('--steps', type=int, default=10)
  return parser


def timed_steps(arm, warmup_steps, steps):
  """Runs `warmup_steps` steps of an `ab.Arm`, then returns the seconds of
  each of `steps` more."""
  for _ in range(warmup_steps):
    arm.session.run(arm.train_op)
  seconds = []
  for _ in range(steps):
    start = time.perf_counter()
    arm.session.run(arm.train_op)
    seconds.append(time.perf_counter() - start)
  return seconds


def main(argv=None):
  args = _parser().parse_args(argv)
  model_dir = args.model_dir or tempfile.mkdtemp(prefix='ab-commit-step-')
  arm = ab.parsed_arm(args.gin_file, args.gin_param, model_dir)
  try:
    seconds = timed_steps(arm, args.warmup_steps, args.steps)
  finally:
    ab.close([arm])
  print(json.dumps({
      'seconds': seconds,
      'official_seg': os.path.dirname(os.path.abspath(official_seg.__file__)),
  }))


if __name__ == '__main__':
  main()
