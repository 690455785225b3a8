"""Compares the training step of two commits side by side, in alternating processes.

  python tools/ab_commits.py --a=abc623b --b=HEAD \
    --gin_file=gin/experiments/benchmark_mnv2_deeplabv3.gin \
    --data_dir=/work/runs/synthetic_large --rounds=10 --steps=10

Each commit gets a `git worktree` of its own in --scratch_dir (reused when it
is there already, named by the commit's hash). Then, --rounds times, a
process of commit A and one of commit B run in turn, each in its worktree
with that worktree alone on PYTHONPATH, so each imports its own
`official_seg` and reads its own gin files; each builds the experiment's
training step (`tools/ab_commit_step.py` with this tree's `benchmarks/ab.py`
and `profile.py`, copied beside it, as `tools/ab_step.py` builds an arm),
runs --warmup_steps untimed and times --steps. One arm runs at a time, so
both see the same load round by round. Prints each round's seconds a step,
B's speed over A's (above 1: B is faster) per round, their mean and median,
and one JSON line with the commits.

A relative --data_dir is made absolute (the processes run in the
worktrees); gin files are read in each worktree, so a relative
--gin_file must exist in both commits.
"""

import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

from benchmarks import report
from official_seg import flags as seg_flags
from official_seg import validation
from official_seg.data import storage

flags.adopt_module_key_flags(seg_flags)
flags.DEFINE_string('a', None, 'Commit A (a hash, branch or tag).')
flags.DEFINE_string('b', None, 'Commit B, compared with A.')
flags.DEFINE_integer('rounds', 5, 'Rounds, each a process of A then of B.')
flags.DEFINE_integer('steps', 10, 'Steps each process times.')
flags.DEFINE_integer('warmup_steps', 3,
                     'Steps each process runs first, not timed.')
flags.DEFINE_string(
    'scratch_dir', os.path.join(tempfile.gettempdir(), 'ab_commits'),
    'Where the worktrees (kept for the next run) and the timing script go.')
flags.DEFINE_string('repo', os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'The git repository holding the commits.')
flags.DEFINE_integer('timeout_secs', 3600, 'The longest one process may run.')
flags.mark_flags_as_required(['a', 'b', 'gin_file'])
FLAGS = flags.FLAGS

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# This tree's files that time a step; copied, so every commit runs them.
_TIMING_FILES = ('tools/ab_commit_step.py', 'benchmarks/__init__.py',
                 'benchmarks/ab.py', 'benchmarks/profile.py')


def _git(repo, *args):
  """stdout of `git -C repo args`, stripped; None when git fails."""
  process = subprocess.run(['git', '-C', repo, *args], capture_output=True,
                           text=True, check=False)
  return process.stdout.strip() if process.returncode == 0 else None


def resolve(repo, flag, commit):
  """{'commit': full hash, 'subject': its first line} of a commit name."""
  sha = _git(repo, 'rev-parse', '--verify', '--quiet', f'{commit}^{{commit}}')
  if not sha:
    raise app.UsageError(f'--{flag}={commit}: no such commit in {repo}.')
  return {'commit': sha, 'subject': _git(repo, 'log', '-1', '--format=%s',
                                         sha)}


def worktree(repo, sha, scratch_dir):
  """The path of a detached worktree of `sha` in `scratch_dir`, made once.

  Raises:
    app.UsageError: the path holds something else than that commit.
  """
  path = os.path.join(scratch_dir, sha)
  if os.path.exists(path):
    if _git(path, 'rev-parse', 'HEAD') != sha:
      raise app.UsageError(f'{path} is not a worktree of {sha}; remove it '
                           'or give another --scratch_dir.')
    return path
  os.makedirs(scratch_dir, exist_ok=True)
  # Forgets worktrees whose folders were deleted, this one's among them.
  subprocess.run(['git', '-C', repo, 'worktree', 'prune'], check=True)
  subprocess.run(['git', '-C', repo, 'worktree', 'add', '--detach', '--quiet',
                  path, sha], check=True)
  return path


def copy_timing(scratch_dir):
  """This tree's timing files in `scratch_dir`/timing; the script's path."""
  folder = os.path.join(scratch_dir, 'timing')
  for name in _TIMING_FILES:
    target = os.path.join(folder, name.replace('tools/', ''))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(os.path.join(_HERE, name), target)
  return os.path.join(folder, 'ab_commit_step.py')


def run_arm(script, tree, gin_files, gin_params, scratch_dir):
  """The seconds of each timed step of one process in worktree `tree`.

  Raises:
    validation.RunError: the process failed, or imported another
      `official_seg` than the worktree's.
  """
  model_dir = tempfile.mkdtemp(prefix='arm-', dir=scratch_dir)
  command = [sys.executable, script, f'--model_dir={model_dir}',
             f'--warmup_steps={FLAGS.warmup_steps}', f'--steps={FLAGS.steps}']
  command += [f'--gin_file={name}' for name in gin_files]
  command += [f'--gin_param={binding}' for binding in gin_params]
  try:
    process = subprocess.run(
        command, cwd=tree, env=dict(os.environ, PYTHONPATH=tree),
        capture_output=True, text=True, timeout=FLAGS.timeout_secs,
        check=False)
  finally:
    shutil.rmtree(model_dir, ignore_errors=True)
  if process.returncode:
    sys.stderr.write(process.stderr[-4000:])
    raise validation.RunError(f'The step of {os.path.basename(tree)} exited '
                              f'with status {process.returncode} (its stderr '
                              'above).')
  result = json.loads(process.stdout.strip().splitlines()[-1])
  if os.path.realpath(result['official_seg']) != os.path.realpath(
      os.path.join(tree, 'official_seg')):
    raise validation.RunError(f"The step in {tree} imported official_seg "
                              f"from {result['official_seg']}.")
  return result['seconds']


def summarize(rounds_a, rounds_b):
  """Seconds a step per round, and B's speed over A's.

  Args:
    rounds_a, rounds_b: lists (one per round) of the timed steps' seconds.

  Returns:
    dict: 'seconds_per_step' [A's rounds, B's rounds]; 'paired_ratios', per
    round A's seconds a step over B's (B's speed over A's); their
    'mean_paired_ratio' and 'median_paired_ratio'; 'ratio', A's seconds a
    step over B's over all rounds.
  """
  per_step = [[statistics.fmean(steps) for steps in rounds]
              for rounds in (rounds_a, rounds_b)]
  paired = [a / b for a, b in zip(*per_step)]
  return {
      'seconds_per_step': per_step,
      'paired_ratios': paired,
      'mean_paired_ratio': statistics.fmean(paired),
      'median_paired_ratio': statistics.median(paired),
      'ratio': (statistics.fmean(sum(rounds_a, [])) /
                statistics.fmean(sum(rounds_b, []))),
  }


def _gin_params():
  """--gin_param, then --data_dir made absolute."""
  data_dir = FLAGS.data_dir
  if data_dir and not storage.is_absolute(data_dir):
    data_dir = os.path.abspath(data_dir)
  params = list(FLAGS.gin_param)
  return params + ([f'DATA_DIR = {data_dir!r}'] if data_dir else [])


def _print(result):
  for number, (a, b, ratio) in enumerate(zip(
      *result['seconds_per_step'], result['paired_ratios']), 1):
    print(f'round {number}: A {a:.4f} s/step, B {b:.4f} s/step, '
          f'B/A speed {ratio:.4f}')
  print(f"A {result['a']['commit'][:10]} ({result['a']['subject']})\n"
        f"B {result['b']['commit'][:10]} ({result['b']['subject']})\n"
        f"B/A speed (above 1: B is faster): mean of rounds "
        f"{result['mean_paired_ratio']:.4f}, median "
        f"{result['median_paired_ratio']:.4f}, all steps "
        f"{result['ratio']:.4f}")
  print(json.dumps(result, sort_keys=True))


def main(argv):
  del argv  # Unused.
  if FLAGS.rounds < 1 or FLAGS.steps < 1:
    raise app.UsageError('--rounds and --steps must be at least 1.')
  repo, scratch_dir = FLAGS.repo, os.path.abspath(FLAGS.scratch_dir)
  commits = [resolve(repo, 'a', FLAGS.a), resolve(repo, 'b', FLAGS.b)]
  trees = [worktree(repo, c['commit'], scratch_dir) for c in commits]
  script, gin_params = copy_timing(scratch_dir), _gin_params()
  rounds = [[], []]
  for _ in range(FLAGS.rounds):
    for tree, seconds in zip(trees, rounds):
      seconds.append(run_arm(script, tree, FLAGS.gin_file, gin_params,
                             scratch_dir))
  result = summarize(*rounds)
  result.update({
      'a': commits[0], 'b': commits[1], 'steps': FLAGS.steps,
      'warmup_steps': FLAGS.warmup_steps, 'gin_file': FLAGS.gin_file,
      'gin_param': gin_params,
      'date': datetime.datetime.now().isoformat(timespec='seconds'),
      'command': ' '.join(sys.argv), 'machine': report.machine(),
  })
  _print(result)


if __name__ == '__main__':
  app.run(main)
