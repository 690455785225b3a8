"""K-fold cross-validation: each configuration trained on each fold in turn, resumable, and their summary."""

import dataclasses
import json
import math
import os
import statistics
import time
from typing import Sequence, Tuple

import tensorflow as tf

from official_seg import validation
from official_seg.data import storage
from official_seg.export import ensemble as ensemble_lib
from official_seg.export import predictor
from official_seg.export import saved_model
from official_seg.export import tflite
from official_seg.export import tflite_ensemble
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import experiment
from official_seg.runtime import gin_config
from official_seg.runtime import run_config as run_config_lib

DONE_FILE = 'fold_result.json'
ENSEMBLE_DIR = 'ensemble'
TFLITE_ENSEMBLE_DIR = 'ensemble_tflite'
SUMMARY_FILE = 'cross_validation.json'


@dataclasses.dataclass(frozen=True)
class Configuration:
  """One setup compared by cross-validation.

  Attributes:
    name: str, its folder under the work dir and its row in the summary.
    gin_files: the experiment's gin files, later ones winning.
    gin_params: bindings after them.
  """
  name: str
  gin_files: Tuple[str, ...]
  gin_params: Tuple[str, ...]


def fold_params(splits):
  """Bindings that train on a fold's training split and evaluate on its
  evaluation split, from (training split, evaluation split) names."""
  train, val = splits
  return [f"TRAIN_SPLIT = '{train}'", f"EVAL_SPLIT = '{val}'"]


def _settings(configuration, splits):
  return {'gin_files': list(configuration.gin_files),
          'gin_params': list(configuration.gin_params) + fold_params(splits)}


def _finished(model_dir, settings):
  """The record of a fold finished earlier with `settings`, else None.

  Raises:
    validation.OutputExistsError: the folder holds a fold run with other
      settings; the message names the folder.
  """
  path = os.path.join(model_dir, DONE_FILE)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    done = json.load(f)
  if {k: done[k] for k in settings} != settings:
    raise validation.OutputExistsError(
        f'{model_dir} holds a fold trained with other gin files or '
        'bindings; choose another --work_dir, or remove that folder.')
  return done


def run_fold(configuration, splits, model_dir, log=print):
  """Trains `configuration` on one fold, then evaluates its final checkpoint.

  Each fold's config is parsed from a clean state and cleared after
  (`gin_config.parsed_alone`), so one process runs every fold. A fold stopped halfway resumes from its last checkpoint (the
  Estimator's); a finished one is not run again.

  Args:
    configuration: `Configuration`.
    splits: (training split, evaluation split) of the fold.
    model_dir: str, the fold's model dir.
    log: callable taking a line of progress.

  Returns:
    dict: the fold's settings, 'record' (the final evaluation's record) and
    'seconds' of training and evaluation; also written to
    <model_dir>/fold_result.json.
  """
  settings = _settings(configuration, splits)
  done = _finished(model_dir, settings)
  if done is not None:
    log(f'{configuration.name} on {splits[1]}: done earlier, mean IoU '
        f'{done["record"]["mean_iou"]:.4f}')
    return done
  log(f'{configuration.name} on {splits[1]}: training in {model_dir}')
  start = time.perf_counter()
  with gin_config.parsed_alone(settings['gin_files'], settings['gin_params']):
    experiment.run('train', model_dir)
    record = experiment.run('eval', model_dir)
  done = dict(settings, record=record, seconds=time.perf_counter() - start)
  storage.write_whole(os.path.join(model_dir, DONE_FILE),
                      json.dumps(done, indent=1))
  log(f'{configuration.name} on {splits[1]}: mean IoU '
      f'{record["mean_iou"]:.4f} in {done["seconds"]:.0f} s')
  return done


def _spread(values):
  """{'mean', 'std' (sample; 0 for one value), 'folds'} of the non-None
  values; None if there are none."""
  values = [v for v in values if v is not None and not math.isnan(v)]
  if not values:
    return None
  std = statistics.stdev(values) if len(values) > 1 else 0.0
  return {'mean': statistics.fmean(values), 'std': std, 'folds': len(values)}


def summarize(records):
  """The mean and spread over folds of the mean IoU and each class's IoU.

  Args:
    records: list of the folds' evaluation records (`results.make_record`).

  Returns:
    dict: 'mean_iou' and 'per_class_iou' {class: spread}, each spread a dict
    of 'mean', 'std' (sample standard deviation) and 'folds' (the folds
    where the score is defined: a class absent from a fold's images and
    predictions has none there), or None.
  """
  names = list(records[0]['per_class_iou'])
  return {
      'mean_iou': _spread([r['mean_iou'] for r in records]),
      'per_class_iou': {name: _spread([r['per_class_iou'][name]
                                       for r in records]) for name in names},
  }


def best(summaries):
  """The configuration with the highest mean over folds of the mean IoU."""
  return max(summaries, key=lambda name: summaries[name]['mean_iou']['mean'])


def run(configurations: Sequence[Configuration], fold_splits, work_dir,
        log=print):
  """Cross-validates each configuration over the folds, one run at a time.

  Args:
    configurations: the `Configuration`s, names unique.
    fold_splits: list of (training split, evaluation split), one per fold.
    work_dir: str; fold i of configuration c trains in <work_dir>/<c>/fold<i>.
    log: callable taking a line of progress.

  Returns:
    dict written to <work_dir>/cross_validation.json: 'configurations'
    {name: summary (`summarize`) plus 'folds' (each fold's record)} and,
    with several configurations, 'best' (`best`).
  """
  summaries = {}
  for configuration in configurations:
    records = [run_fold(configuration, splits,
                        os.path.join(work_dir, configuration.name,
                                     f'fold{index}'), log)['record']
               for index, splits in enumerate(fold_splits)]
    summaries[configuration.name] = dict(summarize(records), folds=records)
  result = {'configurations': summaries}
  if len(summaries) > 1:
    result['best'] = best(summaries)
  storage.write_whole(os.path.join(work_dir, SUMMARY_FILE),
                      json.dumps(result, indent=1))
  return result


def _fold_export(configuration, splits, model_dir):
  """The SavedModel of a fold's final checkpoint, exported if it has none."""
  try:
    return predictor.find_saved_model(model_dir)
  except validation.MissingFileError:
    pass
  settings = _settings(configuration, splits)
  with gin_config.parsed_alone(settings['gin_files'], settings['gin_params']):
    experiment.run('export', model_dir)
  return predictor.find_saved_model(model_dir)


def _emptied(work_dir, name, folder):
  """<work_dir>/<name>/<folder>, an export from an earlier run removed."""
  output = os.path.join(work_dir, name, folder)
  if tf.io.gfile.exists(output):
    tf.io.gfile.rmtree(output)
  return output


def export_ensemble(configuration, fold_splits, work_dir, log=print):
  """One SavedModel averaging the probabilities of a configuration's folds.

  Each fold's final checkpoint is exported first where it has no SavedModel
  (`--mode=export` with the fold's own settings). Written to
  <work_dir>/<name>/ensemble (`export.ensemble`), replacing an earlier one.

  Returns:
    str, the ensemble's SavedModel dir.
  """
  members = [_fold_export(configuration, splits,
                          os.path.join(work_dir, configuration.name,
                                       f'fold{index}'))
             for index, splits in enumerate(fold_splits)]
  output = _emptied(work_dir, configuration.name, ENSEMBLE_DIR)
  ensemble_lib.export_ensemble(members, output)
  log(f'{configuration.name}: the mean of {len(members)} folds\' '
      f'probabilities exported to {output}')
  return output


def _fold_graph(configuration, splits, model_dir):
  """A fold's final checkpoint as a frozen TFLite serving graph.

  Built with the fold's own settings, at the eval crop (the input of
  `tflite_export` by default).

  Returns:
    (GraphDef, `DatasetInfo`, the metadata of its preprocessing and
    checkpoint).

  Raises:
    validation.ConfigurationError: the sigmoid output kind.
    validation.MissingFileError: the fold has no checkpoint.
  """
  settings = _settings(configuration, splits)
  with gin_config.parsed_alone(settings['gin_files'], settings['gin_params']):
    built = estimator_lib.build_estimator(
        run_config_lib.build_run_config(model_dir))
    tflite_ensemble.check_output_kind(
        built.components.inference.output.sigmoid)
    checkpoint = saved_model.checkpoint_to_export(built.estimator)
    parser = built.eval_parser
    graph = tflite.frozen_serving_graph(
        built.estimator, parser, tuple(int(v) for v in parser.crop_size),
        checkpoint)
    return graph, built.dataset, dict(
        saved_model.preprocessing_metadata(parser), checkpoint=checkpoint)


def export_tflite_ensemble(configuration, fold_splits, work_dir, kinds,
                           log=print):
  """One .tflite a kind averaging the probabilities of a configuration's
  folds (`export.tflite_ensemble`), from their final checkpoints.

  Written to <work_dir>/<name>/ensemble_tflite/model_<kind>.tflite with its
  segmentation.json, replacing an earlier one; the inputs and outputs of
  `--mode=export_tflite`'s models with probabilities.

  Returns:
    dict of kind to the path written.

  Raises:
    tflite.KindError: kinds an ensemble cannot take
      (`tflite_ensemble.check_kinds`).
    validation.ConfigurationError: the sigmoid output kind.
  """
  tflite_ensemble.check_kinds(kinds)
  folds = [_fold_graph(configuration, splits,
                       os.path.join(work_dir, configuration.name,
                                    f'fold{index}'))
           for index, splits in enumerate(fold_splits)]
  output = _emptied(work_dir, configuration.name, TFLITE_ENSEMBLE_DIR)
  metadata = {key: value for key, value in folds[0][2].items()
              if key != 'checkpoint'}
  written = tflite_ensemble.export_ensemble(
      [fold[0] for fold in folds], output, kinds, folds[0][1],
      dict(metadata, ensemble_of=[fold[2]['checkpoint'] for fold in folds]))
  log(f'{configuration.name}: the mean of {len(folds)} folds\' '
      f'probabilities as TFLite {", ".join(kinds)} in {output}')
  return written


def _cell(spread):
  return '-' if spread is None else f'{spread["mean"]:.4f} ± {spread["std"]:.4f}'


def format_summary(result):
  """A table: one row per configuration, the mean IoU and each class's IoU
  as mean ± sample standard deviation over folds."""
  summaries = result['configurations']
  classes = list(next(iter(summaries.values()))['per_class_iou'])
  lines = ['\t'.join(['configuration', 'mean IoU'] + classes)]
  for name, summary in summaries.items():
    lines.append('\t'.join([name, _cell(summary['mean_iou'])] +
                           [_cell(summary['per_class_iou'][c])
                            for c in classes]))
  if 'best' in result:
    lines.append(f'best: {result["best"]}')
  return '\n'.join(lines)
