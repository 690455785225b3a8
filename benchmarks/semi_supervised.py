"""Semi-supervised arms over seeds: final mean IoU, monitors, gap recovered.

Each arm trains the same experiment for the same steps, once per seed:

- labeled_only: TRAIN_SPLIT is the labeled split;
- pseudoseg, fixmatch: the same with gin/semi_supervised/<arm>.gin layered
  on and UNLABELED_SPLIT the unlabeled split;
- full: TRAIN_SPLIT is the unlabeled split with its labels.

Runs go one after the other in this process, as `train_and_eval` runs
them ('train', then 'eval' of the final checkpoint); each parses its
experiment into a clean gin config and builds its own graph. The seed
bindings of docs/scarce_labels.md make a run on a CPU repeat.
"""

import dataclasses
import glob
import hashlib
import os
import statistics
import time
from typing import Sequence

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.runtime import experiment
from official_seg.runtime import gin_config

ARMS = ('labeled_only', 'pseudoseg', 'fixmatch', 'full')
SEMI_SUPERVISED_FILES = {'pseudoseg': 'semi_supervised/pseudoseg.gin',
                         'fixmatch': 'semi_supervised/fixmatch.gin'}
# The semi-supervised step's monitors (semi_supervised/step.py).
MONITORS = ('semi/pseudo_accuracy', 'semi/pseudo_balanced_accuracy',
            'semi/kept_share', 'semi/strong_accuracy')
# Estimator's own step rate, written every log_step_count_steps.
STEP_RATE_TAG = 'global_step/sec'
# SavedModel exports cost seconds a run and score nothing here.
NO_EXPORTS = ('make_exporters.latest = False', 'export_best.enabled = False')


@dataclasses.dataclass(frozen=True)
class Spec:
  """What the benchmark compares.

  Attributes:
    gin_files: the experiment's gin files (with its dataset's).
    gin_params: bindings after them (DATA_DIR, ...).
    labeled_split: str, the few labeled images (e.g. 'train_1_16').
    unlabeled_split: str, the pool; the full arm trains on its labels.
    arms: names from `ARMS`.
    seeds: ints, one run of each arm per seed.
    train_steps: int, every run's TRAIN_STEPS.
  """

  gin_files: Sequence[str]
  gin_params: Sequence[str]
  labeled_split: str
  unlabeled_split: str
  arms: Sequence[str]
  seeds: Sequence[int]
  train_steps: int


def seed_bindings(seed):
  """The bindings that make a CPU run repeat (docs/scarce_labels.md)."""
  return [f'SEED = {int(seed)}', 'build_run_config.tf_random_seed = %SEED',
          'build_dataset.seed = %SEED']


def arm_config(spec, arm, seed):
  """(gin files, bindings) of one run of `arm`.

  Raises:
    ValueError: an arm not in `ARMS`.
  """
  if arm not in ARMS:
    raise ValueError(f'Unknown arm {arm!r}; use some of {ARMS}.')
  files = list(spec.gin_files)
  split = spec.unlabeled_split if arm == 'full' else spec.labeled_split
  params = list(spec.gin_params) + [f'TRAIN_SPLIT = {split!r}']
  if arm in SEMI_SUPERVISED_FILES:
    files.append(SEMI_SUPERVISED_FILES[arm])
    params.append(f'UNLABELED_SPLIT = {spec.unlabeled_split!r}')
  params += seed_bindings(seed) + [f'TRAIN_STEPS = {spec.train_steps}']
  return files, params + list(NO_EXPORTS)


def scalars(model_dir, tags):
  """{tag: {step: value}} of the summaries in `model_dir`'s event files.

  Reads both kinds: the host_call's tensor summaries and Estimator's
  simple values (its step rate).
  """
  points = {tag: {} for tag in tags}
  for path in glob.glob(os.path.join(model_dir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag in points:
          number = (value.simple_value if value.HasField('simple_value')
                    else float(tf.make_ndarray(value.tensor)))
          points[value.tag][event.step] = float(number)
  return points


def late_mean(points, train_steps):
  """Mean of the values logged in the run's second half; None if none."""
  late = [v for step, v in points.items() if step >= train_steps // 2]
  return statistics.fmean(late) if late else None


def train_and_evaluate(gin_files, gin_params, model_dir):
  """Trains one experiment, then evaluates its final checkpoint.

  gin is cleared before and after: one process runs many experiments, each
  from a clean config.

  Returns:
    (the evaluation's metrics record, seconds of training, of evaluation).
  """
  gin.clear_config()
  gin_config.parse(gin_files, gin_params)
  start = time.perf_counter()
  experiment.run('train', model_dir)
  train_secs = time.perf_counter() - start
  record = experiment.run('eval', model_dir)
  gin.clear_config()
  return record, train_secs, time.perf_counter() - start - train_secs


def run_one(spec, arm, seed, model_dir):
  """Trains and evaluates one arm at one seed; its record.

  Returns:
    dict: arm, seed, model_dir, mean_iou, per_class_iou, global_step,
    train_secs, eval_secs, secs_per_step (from Estimator's step rate, None
    when the run logged none) and monitors {tag: late mean or None}.
  """
  record, train_secs, eval_secs = train_and_evaluate(
      *arm_config(spec, arm, seed), model_dir)
  logged = scalars(model_dir, MONITORS + (STEP_RATE_TAG,))
  rates = list(logged.pop(STEP_RATE_TAG).values())
  return {
      'arm': arm, 'seed': int(seed), 'model_dir': model_dir,
      'mean_iou': record['mean_iou'],
      'per_class_iou': record['per_class_iou'],
      'global_step': record['global_step'],
      'train_secs': train_secs, 'eval_secs': eval_secs,
      'secs_per_step': 1.0 / statistics.median(rates) if rates else None,
      'monitors': {tag: late_mean(values, spec.train_steps)
                   for tag, values in logged.items()},
  }


def gin_fingerprint(spec):
  """{path: SHA-256} of the gin files the runs may read.

  The shipped gin folder's files, and those beside the spec's own files
  (which they may include); not below those, which may be any folder.
  """
  files = [os.path.abspath(gin_config.resolve_gin_file(f))
           for f in spec.gin_files]
  paths = set(files) | set(glob.glob(
      os.path.join(gin_config.gin_dir(), '**', '*.gin'), recursive=True))
  for folder in {os.path.dirname(f) for f in files}:
    paths.update(glob.glob(os.path.join(folder, '*.gin')))
  fingerprint = {}
  for path in sorted(paths):
    with open(path, 'rb') as stream:
      fingerprint[path] = hashlib.sha256(stream.read()).hexdigest()
  return fingerprint


def _check_unchanged(spec, fingerprint):
  """Raises if a gin file changed since `fingerprint`: each run parses the
  files again, so later runs would train another experiment.

  Raises:
    validation.ConfigurationError: naming the changed files.
  """
  now = gin_fingerprint(spec)
  changed = sorted(p for p in set(now) | set(fingerprint)
                   if now.get(p) != fingerprint.get(p))
  if changed:
    raise validation.ConfigurationError(
        f'gin files changed after the benchmark started: {changed}; its '
        'runs would not train the same experiment. Put them back, or start '
        'again in a new work folder.')


def run(spec, work_dir, log=print):
  """Runs every arm at every seed, seeds outermost; the list of records.

  Raises:
    validation.ConfigurationError: a run's folder under `work_dir` is not
      empty, or a gin file changed while the benchmark ran.
  """
  records = []
  fingerprint = gin_fingerprint(spec)
  for seed in spec.seeds:
    for arm in spec.arms:
      model_dir = os.path.join(work_dir, f'{arm}-seed{seed}')
      if tf.io.gfile.exists(model_dir) and tf.io.gfile.listdir(model_dir):
        raise validation.ConfigurationError(
            f'{model_dir} is not empty; give the benchmark a new work '
            'folder.')
      log(f'Running {arm}, seed {seed}, in {model_dir}')
      _check_unchanged(spec, fingerprint)
      records.append(run_one(spec, arm, seed, model_dir))
      log(f"{arm}, seed {seed}: mean IoU {records[-1]['mean_iou']:.4f}")
  return records


def _mean_or_none(values):
  values = [v for v in values if v is not None]
  return statistics.fmean(values) if values else None


def _arm_summary(runs):
  """Mean, min and max of mean IoU over seeds; means of the rest."""
  ious = [r['mean_iou'] for r in runs]
  return {
      'runs': len(runs), 'seeds': [r['seed'] for r in runs],
      'mean_iou_mean': statistics.fmean(ious), 'mean_iou_min': min(ious),
      'mean_iou_max': max(ious),
      'secs_per_step': _mean_or_none([r['secs_per_step'] for r in runs]),
      'monitors': {tag: _mean_or_none([r['monitors'].get(tag)
                                       for r in runs]) for tag in MONITORS},
  }


def recovery(arm_miou, labeled_only_miou, full_miou):
  """Share of the gap recovered: (arm - labeled_only) / (full - labeled_only).

  None when the gap is not positive: nothing to recover.
  """
  gap = full_miou - labeled_only_miou
  return (arm_miou - labeled_only_miou) / gap if gap > 0 else None


def summarize(records):
  """{arm: summary} in `ARMS` order, with each semi-supervised arm's
  'recovery' (of the mean mIoUs) and 'step_cost' (its seconds a step over
  labeled_only's) when those arms ran."""
  arms = [a for a in ARMS if any(r['arm'] == a for r in records)]
  summary = {a: _arm_summary([r for r in records if r['arm'] == a])
             for a in arms}
  base, full = summary.get('labeled_only'), summary.get('full')
  for arm in set(arms) & set(SEMI_SUPERVISED_FILES):
    s = summary[arm]
    s['recovery'] = (recovery(s['mean_iou_mean'], base['mean_iou_mean'],
                              full['mean_iou_mean'])
                     if base and full else None)
    s['step_cost'] = (s['secs_per_step'] / base['secs_per_step']
                      if base and base['secs_per_step'] and s['secs_per_step']
                      else None)
  return summary


def _cell(value, spec='.4f'):
  return '-' if value is None else format(value, spec)


def table(summary):
  """A text table: one row per arm."""
  rows = [('arm', 'runs', 'mIoU mean', 'min', 'max', 'recovered',
           's/step', 'step cost', 'pseudo acc', 'kept')]
  for arm, s in summary.items():
    rows.append((arm, str(s['runs']), _cell(s['mean_iou_mean']),
                 _cell(s['mean_iou_min']), _cell(s['mean_iou_max']),
                 _cell(s.get('recovery'), '.3f'),
                 _cell(s['secs_per_step'], '.3f'),
                 _cell(s.get('step_cost'), '.2f'),
                 _cell(s['monitors']['semi/pseudo_accuracy']),
                 _cell(s['monitors']['semi/kept_share'])))
  widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
  return '\n'.join('  '.join(cell.rjust(w) for cell, w in zip(row, widths))
                   for row in rows)
