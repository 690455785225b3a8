"""Losses and rare-class crops over seeds: mean IoU and the rare class's IoU, Dice and Boundary IoU.

An arm is one part of `ARMS` or several joined by '+' ('ce_dice+crops'):

- cross_entropy: the experiment as it is (its loss, cross-entropy unless
  it binds another);
- focal, dice, ce_dice, lovasz: gin/losses/<arm>.gin layered on it;
- class_weights: the training split's median-frequency weights
  (`datasets/stats.median_frequency_weights`) as the class weights of the
  loss (cross-entropy's, or focal's or ce_dice's when joined to them);
- crops: the sampling settings `dataset_stats` suggests for the training
  split (`datasets/sampling_advice`: cat_max_ratio, foreground crops of the
  classes under 1% of the pixels, the repeat-factor threshold).

Every run trains the experiment for the same steps, then evaluates its final
checkpoint, in this process, as `train_and_eval` runs 'train' then 'eval';
the seed bindings of docs/scarce_labels.md make a run on a CPU repeat. Each
run's record joins the JSON-lines output as the run ends; started again with
the same output, the benchmark skips the runs recorded there, so a stopped
benchmark resumes at the run it stopped in.
"""

import dataclasses
import hashlib
import json
import os
from typing import Optional, Sequence

import gin
import tensorflow as tf

from benchmarks import semi_supervised
from official_seg import validation
from official_seg.data import storage
from official_seg.datasets import sampling_advice
from official_seg.datasets import stats as stats_lib
from official_seg.runtime import gin_config

LOSS_FILES = {'focal': 'losses/focal.gin', 'dice': 'losses/dice.gin',
              'ce_dice': 'losses/ce_dice.gin', 'lovasz': 'losses/lovasz.gin'}
BASELINE = 'cross_entropy'
LOSSES = (BASELINE,) + tuple(LOSS_FILES)
ARMS = ('cross_entropy', 'class_weights', 'focal', 'dice', 'ce_dice',
        'lovasz', 'crops')
# The configurable whose class_weights the class_weights part sets, by loss;
# Dice and Lovász-softmax weigh no class.
WEIGHTED_LOSSES = {'cross_entropy': 'segmentation_loss',
                   'focal': 'focal_loss', 'ce_dice': 'ce_dice_loss'}
# Written in a run's folder as it starts: a folder holding it and no record
# is a run that stopped, started again from nothing.
STARTED_FILE = 'rare_class_run.json'


@dataclasses.dataclass(frozen=True)
class Spec:
  """What the benchmark compares.

  Attributes:
    gin_files: the experiment's gin files, its dataset's among them.
    gin_params: bindings after them (DATA_DIR, ...).
    arms: arm names (see the module docstring).
    seeds: ints, one run of each arm per seed.
    train_steps: int, every run's TRAIN_STEPS.
    rare_class: optional class name; default the class with the fewest
      labelled pixels in the training split.
  """

  gin_files: Sequence[str]
  gin_params: Sequence[str]
  arms: Sequence[str]
  seeds: Sequence[int]
  train_steps: int
  rare_class: Optional[str] = None


def _arm_problem(parts):
  """What makes these parts of an arm's name no arm, or None."""
  known = LOSSES + ('class_weights', 'crops')
  unknown = [part for part in parts if part not in known]
  losses = [part for part in parts if part in LOSSES]
  if unknown:
    return f'{unknown[0]!r} is none of {", ".join(known)}'
  if len(set(parts)) < len(parts):
    return 'it names a part twice'
  if len(losses) > 1:
    return 'it names two losses'
  if 'class_weights' in parts and losses and (
      losses[0] not in WEIGHTED_LOSSES):
    return f'{losses[0]} takes no class weights'
  return None


def arm_parts(arm):
  """(loss, frozenset of 'class_weights' and 'crops') of an arm's name.

  Raises:
    validation.ConfigurationError: a part of no arm, a part twice, two
      losses, or class weights for a loss that takes none.
  """
  parts = arm.split('+')
  problem = _arm_problem(parts)
  if problem:
    raise validation.ConfigurationError(
        f'Arm {arm!r}: {problem}; join parts with "+", one loss at most.')
  losses = [part for part in parts if part in LOSSES]
  return (losses[0] if losses else BASELINE), frozenset(parts) - set(LOSSES)


@dataclasses.dataclass(frozen=True)
class Facts:
  """What the arms take from the training split.

  Attributes:
    class_names: tuple of the dataset's class names.
    rare_class: int, the class whose scores each record keeps.
    class_weights: list of float, median-frequency weights, 4 decimals.
    sampling: list of (binding, value) that `dataset_stats` suggests.
  """

  class_names: tuple
  rare_class: int
  class_weights: list
  sampling: list


def _rare_class(stats, class_names, name):
  """The index of class `name`, or of the class with the fewest pixels."""
  if name is None:
    present = [c for c in range(len(class_names)) if stats.class_pixels[c]]
    return min(present, key=lambda c: stats.class_pixels[c])
  if name not in class_names:
    raise validation.ConfigurationError(
        f'The rare class {name!r} is none of the classes {class_names}.')
  return class_names.index(name)


def dataset_facts(spec):
  """The `Facts` of the experiment's training split, read once.

  Raises:
    validation.ConfigurationError: `spec.rare_class` names no class.
    validation.MissingFileError: the split has no shard.
  """
  gin.clear_config()
  info = gin_config.read_dataset(spec.gin_files, spec.gin_params)
  gin.clear_config()
  stats = stats_lib.compute_stats(info.data_dir, info.train_split,
                                  info.num_classes, info.ignore_label)
  suggestions = sampling_advice.suggest(stats, info.class_names,
                                        info.ignore_label)
  return Facts(
      class_names=tuple(info.class_names),
      rare_class=_rare_class(stats, info.class_names, spec.rare_class),
      class_weights=[round(float(w), 4)
                     for w in stats_lib.median_frequency_weights(stats)],
      sampling=[(name, value) for s in suggestions
                for name, value in s.bindings])


def arm_config(spec, facts, arm, seed):
  """(gin files, bindings) of one run of `arm` at `seed`.

  The arm's loss file follows the experiment's files; its bindings follow
  the spec's, then the seed's, TRAIN_STEPS and no exports.
  """
  loss, modifiers = arm_parts(arm)
  files = list(spec.gin_files) + ([LOSS_FILES[loss]]
                                  if loss in LOSS_FILES else [])
  params = list(spec.gin_params)
  if 'class_weights' in modifiers:
    params.append(f'{WEIGHTED_LOSSES[loss]}.class_weights = '
                  f'{facts.class_weights}')
  if 'crops' in modifiers:
    params += [f'{name} = {value!r}' for name, value in facts.sampling]
  params += semi_supervised.seed_bindings(seed)
  params.append(f'TRAIN_STEPS = {spec.train_steps}')
  return files, params + list(semi_supervised.NO_EXPORTS)


def gin_digest(spec):
  """SHA-256 of the gin files the runs may read (`gin_fingerprint`'s),
  named relative to the gin folder."""
  root = gin_config.gin_dir()
  fingerprint = {os.path.relpath(path, root): digest for path, digest in
                 semi_supervised.gin_fingerprint(spec).items()}
  return hashlib.sha256(
      json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()


def experiment_key(spec, facts):
  """What every run of one benchmark shares: its records carry it."""
  return {'gin_files': list(spec.gin_files),
          'gin_params': list(spec.gin_params),
          'train_steps': spec.train_steps, 'gin_digest': gin_digest(spec),
          'rare_class': facts.class_names[facts.rare_class],
          'class_weights': facts.class_weights,
          'sampling': [list(pair) for pair in facts.sampling]}


def run_one(spec, facts, arm, seed, model_dir):
  """Trains and evaluates one arm at one seed; its record.

  Returns:
    dict: arm, seed, model_dir, global_step, mean_iou, rare_class,
    rare_iou, rare_dice, rare_boundary_iou, per_class_iou, train_secs,
    eval_secs, wall_secs (the two together), gin_files, gin_params.
  """
  files, params = arm_config(spec, facts, arm, seed)
  result, train_secs, eval_secs = semi_supervised.train_and_evaluate(
      files, params, model_dir)
  name = facts.class_names[facts.rare_class]
  return {
      'arm': arm, 'seed': int(seed), 'model_dir': model_dir,
      'global_step': result['global_step'], 'mean_iou': result['mean_iou'],
      'rare_class': name, 'rare_iou': result['per_class_iou'][name],
      'rare_dice': result['per_class_dice'][name],
      'rare_boundary_iou': result['per_class_boundary_iou'][name],
      'per_class_iou': result['per_class_iou'],
      'train_secs': train_secs, 'eval_secs': eval_secs,
      'wall_secs': train_secs + eval_secs,
      'gin_files': files, 'gin_params': params,
  }


def read_records(path):
  """The records of a JSON-lines output, [] when it does not exist."""
  if not tf.io.gfile.exists(path):
    return []
  with tf.io.gfile.GFile(path) as stream:
    return [json.loads(line) for line in stream if line.strip()]


def write_records(path, records):
  """Writes the output whole (`storage.write_whole`): a stop mid-write
  leaves the previous file, never part of a line."""
  storage.write_whole(path, ''.join(json.dumps(r, sort_keys=True) + '\n'
                                    for r in records))


def prepare_run_dir(model_dir, log=print):
  """Empties the folder of a run that stopped before its record.

  Raises:
    validation.ConfigurationError: the folder holds files but no run of
      this benchmark started there.
  """
  if not tf.io.gfile.exists(model_dir) or not tf.io.gfile.listdir(model_dir):
    return
  if not tf.io.gfile.exists(os.path.join(model_dir, STARTED_FILE)):
    raise validation.ConfigurationError(
        f'{model_dir} is not empty and no run of this benchmark started '
        'there; give the benchmark a new work folder.')
  log(f'{model_dir}: its run stopped before its record; starting it again.')
  tf.io.gfile.rmtree(model_dir)


def _check_same(key, record, output):
  """Raises unless a record of `output` was run as `key` says."""
  differ = sorted(k for k in key if record.get('experiment', {}).get(k)
                  != key[k])
  if differ:
    raise validation.ConfigurationError(
        f'{output} holds runs of another benchmark (their {", ".join(differ)}'
        ' differ from this one\'s): give a new output file, or the same '
        'experiment, data and gin files to resume it.')


def _check_gin_unchanged(spec, key):
  """Raises if a gin file changed since the benchmark started: later runs
  would train another experiment."""
  if gin_digest(spec) != key['gin_digest']:
    raise validation.ConfigurationError(
        'gin files changed after the benchmark started; its runs would not '
        'train the same experiment. Put them back, or start again with a '
        'new output file.')


def _started(model_dir, arm, seed):
  tf.io.gfile.makedirs(model_dir)
  storage.write_whole(os.path.join(model_dir, STARTED_FILE),
                      json.dumps({'arm': arm, 'seed': seed}))


def _score(value):
  return '-' if value is None else f'{value:.4f}'


def run(spec, work_dir, output, log=print):
  """Runs every arm at every seed not yet in `output`, seeds outermost.

  Returns:
    The records of `output`, those of earlier runs first.

  Raises:
    validation.ConfigurationError: an arm's name, a rare class of no
      class, `output` holding runs of another experiment, a folder of
      `work_dir` that is not this benchmark's, or a gin file that changed
      while it ran.
  """
  for arm in spec.arms:
    arm_parts(arm)
  facts = dataset_facts(spec)
  key = experiment_key(spec, facts)
  records = read_records(output)
  for record in records:
    _check_same(key, record, output)
  done = {(r['arm'], r['seed']) for r in records}
  for seed in spec.seeds:
    for arm in spec.arms:
      if (arm, seed) in done:
        log(f'{arm}, seed {seed}: recorded in {output}.')
        continue
      model_dir = os.path.join(work_dir, f'{arm}-seed{seed}')
      _check_gin_unchanged(spec, key)
      prepare_run_dir(model_dir, log)
      log(f'Running {arm}, seed {seed}, in {model_dir}')
      _started(model_dir, arm, seed)
      record = run_one(spec, facts, arm, seed, model_dir)
      records.append(dict(record, experiment=key))
      done.add((arm, seed))
      write_records(output, records)
      log(f"{arm}, seed {seed}: mean IoU {_score(record['mean_iou'])}, "
          f"{record['rare_class']} IoU {_score(record['rare_iou'])}")
  return records
