"""Evaluation records (a file per step, the metrics.jsonl view) and the IoU table."""

import json
import math
import os
import time

import numpy as np
import tensorflow as tf

from official_seg.data import storage
from official_seg.evaluation import metrics
from official_seg.evaluation import scores

METRICS_FILE = 'metrics.jsonl'
RECORDS_DIR = 'records'
_IOU_PREFIX = 'iou/'


def _number(value):
  """A JSON-safe float: NaN (a class absent from labels and predictions) is None."""
  value = float(np.asarray(value))
  return None if math.isnan(value) else value


def _record(global_step, per_class, overall, num_images, **fields):
  """The one shape of a metrics record; `fields` adds keys of its source.

  Args:
    global_step: int or None.
    per_class: dict of each score of `metrics.SCORES` to {class name:
      value}.
    overall: dict of each name of `metrics.OVERALL` to its value.
    num_images: int.
    **fields: more keys, e.g. 'checkpoint'.

  Returns:
    A JSON-serializable dict.
  """
  record = dict(
      global_step=None if global_step is None else int(global_step),
      num_images=int(num_images), **fields)
  record.update({key: _number(value) for key, value in overall.items()})
  for score, values in per_class.items():
    record[f'per_class_{score}'] = {name: _number(value)
                                    for name, value in values.items()}
  return record


def make_record(eval_result, checkpoint_path, class_names=None):
  """Turns an Estimator eval result dict into one metrics.jsonl record.

  Args:
    eval_result: dict from `Estimator.evaluate`, with 'global_step',
      'loss', 'num_images', 'confusion_matrix', each name of
      `metrics.OVERALL` and '<score>/<class>' of each score of
      `metrics.SCORES`; optionally 'weights': which weights were scored,
      'raw' (the default) or 'moving_average', 'boundary_tolerance',
      the pixels of the contour bands, and 'expected_calibration_error'.
    checkpoint_path: str, the checkpoint that was evaluated.
    class_names: optional list fixing the order of the per-class scores;
      default the order of `eval_result`.

  Returns:
    A JSON-serializable dict.
  """
  names = class_names or [key[len(_IOU_PREFIX):] for key in eval_result
                          if key.startswith(_IOU_PREFIX)]
  confusion = metrics.confusion_from_summary(
      eval_result[metrics.CONFUSION_MATRIX])
  return _record(
      eval_result['global_step'],
      {score: {name: eval_result[f'{score}/{name}'] for name in names}
       for score in metrics.SCORES},
      {key: eval_result[key] for key in metrics.OVERALL},
      eval_result['num_images'], checkpoint=checkpoint_path,
      loss=_number(eval_result['loss']),
      weights=eval_result.get('weights', 'raw'),
      boundary_tolerance=eval_result.get('boundary_tolerance'),
      never_predicted=scores.never_predicted(confusion, names),
      **_calibration(eval_result))


def _calibration(eval_result):
  """{'expected_calibration_error': value} of a result that has it, else {}."""
  if metrics.EXPECTED_CALIBRATION_ERROR not in eval_result:
    return {}
  return {metrics.EXPECTED_CALIBRATION_ERROR: _number(
      eval_result[metrics.EXPECTED_CALIBRATION_ERROR])}


def record_from_confusion(confusion, boundary_counts, class_names,
                          num_images, boundary_tolerance, global_step=None):
  """A metrics record of summed counts, e.g. of scored images.

  Args:
    confusion: int [C, C] over all scored images, rows true class.
    boundary_counts: int [C, 2] over all scored images, the contour bands'
      intersection and union (`metrics.boundary_counts_of_image`).
    class_names: C names.
    num_images: int, the images scored.
    boundary_tolerance: int, the bands' width in pixels.
    global_step: optional int, the step of the model's checkpoint.

  Returns:
    A JSON-serializable dict shaped like `make_record`'s, without
    'checkpoint', 'loss' and 'weights'; `format_table` prints it.
  """
  per_class, overall = metrics.scores_of_counts(
      tf.constant(confusion, tf.float64),
      tf.constant(boundary_counts, tf.float64))
  return _record(
      global_step,
      {score: dict(zip(class_names, values.numpy()))
       for score, values in per_class.items()},
      overall, num_images, boundary_tolerance=int(boundary_tolerance),
      never_predicted=scores.never_predicted(confusion, class_names))


def record_path(eval_dir, step):
  """`<eval_dir>/records/step-<step>.json`, zero-padded so names sort by step."""
  return os.path.join(eval_dir, RECORDS_DIR, f'step-{int(step):012d}.json')


def write_record(eval_dir, record):
  """Writes one record as a file of its own, then the step-ordered view.

  Object stores have no append and no atomic rename: each evaluation is one
  whole object, `records/step-<step>.json`, the record of truth. The view
  `metrics.jsonl` (one line per record, in step order) is rewritten whole
  from them after each record, so readers of one file keep working and a
  record evaluated out of order (a step-0 or throttle-skipped checkpoint)
  still lands in its place.

  Args:
    eval_dir: str, local or `scheme://` folder of the evaluator.
    record: dict with an int 'global_step' (see `make_record`).
  """
  text = json.dumps(record, sort_keys=True)
  storage.write_whole(record_path(eval_dir, record['global_step']), text)
  lines = [json.dumps(r, sort_keys=True) + '\n' for r in read_records(eval_dir)]
  storage.write_whole(os.path.join(eval_dir, METRICS_FILE), ''.join(lines))


def _parse(text, source):
  """The JSON record in `text`, or None (with a warning) when it is cut short."""
  try:
    return json.loads(text)
  except json.JSONDecodeError:
    tf.compat.v1.logging.warning('Skipping incomplete record %s.', source)
    return None


def _view_records(eval_dir):
  """The records of the `metrics.jsonl` view; the only ones in older dirs."""
  path = os.path.join(eval_dir, METRICS_FILE)
  if not tf.io.gfile.exists(path):
    return []
  with tf.io.gfile.GFile(path) as f:
    lines = f.read().splitlines()
  return [_parse(line, f'line {number} of {path}')
          for number, line in enumerate(lines, start=1) if line.strip()]


def read_records(eval_dir):
  """Returns the records of `eval_dir`, one per step, in step order.

  A record file cut short is skipped with a warning, never an error. Lines
  of a `metrics.jsonl` without record files (written by earlier versions,
  which appended to it) are read too; a record file wins over a line.

  Args:
    eval_dir: str, local or `scheme://` folder of the evaluator.

  Returns:
    list of dicts sorted by 'global_step'.
  """
  by_step = {r['global_step']: r for r in _view_records(eval_dir) if r}
  folder = os.path.join(eval_dir, RECORDS_DIR)
  names = (tf.io.gfile.listdir(folder) if tf.io.gfile.isdir(folder) else [])
  for name in sorted(n for n in names if n.endswith('.json')):
    path = os.path.join(folder, name)
    with tf.io.gfile.GFile(path) as f:
      record = _parse(f.read(), path)
    if record:
      by_step[record['global_step']] = record
  return [by_step[step] for step in sorted(by_step)]


# The table's columns: title, score; older records hold IoU alone.
_COLUMNS = (('IoU', 'iou'), ('Dice/F1', 'dice'), ('precision', 'precision'),
            ('recall', 'recall'), ('boundary IoU', 'boundary_iou'))


def _cell(value, width):
  return f'{"n/a" if value is None else f"{value:.4f}":>{width}}'


def _scored_rows(record):
  """The header, a row per class and the row of class means."""
  columns = [(title, score, max(10, len(title) + 2))
             for title, score in _COLUMNS if f'per_class_{score}' in record]
  rows = [f'{"class":<24}' + ''.join(f'{title:>{width}}'
                                     for title, _, width in columns)]
  for name in record['per_class_iou']:
    rows.append(f'{name:<24}' + ''.join(
        _cell(record[f'per_class_{score}'][name], width)
        for _, score, width in columns))
  if len(columns) > 1:
    rows.append(f'{"mean over classes":<24}' + ''.join(
        _cell(record[f'mean_{score}'], width) for _, score, width in columns))
  return rows


def format_table(record):
  """The per-class scores with their means, pixel accuracy and the step.

  Records of earlier versions (IoU alone) print their IoU column.
  """
  rows = [f'Evaluation at step {record["global_step"]} '
          f'({record["num_images"]} images)']
  rows += _scored_rows(record)
  rows.append(f'{"mean IoU":<24}{record["mean_iou"]:>10.4f}')
  if 'frequency_weighted_iou' in record:
    rows.append(f'{"frequency-weighted IoU":<24}'
                f'{record["frequency_weighted_iou"]:>10.4f}')
  rows.append(f'{"pixel accuracy":<24}{record["pixel_accuracy"]:>10.4f}')
  if record.get('boundary_tolerance'):
    rows.append(f'Boundary IoU over the pixels at most '
                f'{record["boundary_tolerance"]} px from a contour.')
  if record.get(metrics.EXPECTED_CALIBRATION_ERROR) is not None:
    rows.append(_calibration_row(record))
  return '\n'.join(rows)


def _calibration_row(record):
  """The ECE line: of 15 confidence bins, after the record's temperature."""
  scaled = (f', temperature {record["temperature"]:.4f}'
            if record.get('temperature') else '')
  return (f'expected calibration error '
          f'{record[metrics.EXPECTED_CALIBRATION_ERROR]:.4f} (15 confidence '
          f'bins{scaled})')


def warn_never_predicted(record):
  """Logs one warning naming the labelled classes the model never predicted.

  Args:
    record: a record of `make_record` or `record_from_confusion`; earlier
      records, without 'never_predicted', log nothing.
  """
  names = record.get('never_predicted')
  if not names:
    return
  tf.compat.v1.logging.warning(
      'Never predicted in the %d images evaluated at step %s, though '
      'labelled there: %s. Try class weights (segmentation_loss.'
      'class_weights; dataset_stats suggests them), a region loss '
      '(--gin_file=gin/losses/ce_dice.gin), and training crops that hold '
      'these classes (CropSampling, docs/your_own_data.md).',
      record['num_images'], record['global_step'], ', '.join(names))


def write_confusion_matrix(eval_dir, step, confusion, class_names):
  """Writes `<eval_dir>/confusion_matrix-<step>.json` (rows: true class)."""
  path = os.path.join(eval_dir, f'confusion_matrix-{step}.json')
  payload = {'global_step': step, 'class_names': list(class_names),
             'matrix': np.asarray(confusion).astype(np.int64).tolist()}
  return storage.write_whole(path, json.dumps(payload))


def report(eval_dir, eval_result, checkpoint_path, class_names, seconds=None,
           append=True):
  """Records one evaluation: metrics.jsonl line, confusion matrix, logged table.

  Args:
    eval_dir: str, the evaluator's own folder.
    eval_result: dict from `Estimator.evaluate`.
    checkpoint_path: str, the evaluated checkpoint.
    class_names: list of class names, the confusion matrix's row order.
    seconds: optional float, wall time of the evaluation loop, for the
      throughput log line.
    append: bool; False only logs, writing nothing (a step recorded before).
      True writes the record with `write_record`.

  Returns:
    The metrics.jsonl record.
  """
  record = make_record(eval_result, checkpoint_path, class_names)
  if seconds:
    record['images_per_second'] = record['num_images'] / seconds
  if append:
    write_record(eval_dir, record)
  if append and metrics.CONFUSION_MATRIX in eval_result:
    write_confusion_matrix(
        eval_dir, record['global_step'],
        metrics.confusion_from_summary(eval_result[metrics.CONFUSION_MATRIX]),
        class_names)
  tf.compat.v1.logging.info('\n%s', format_table(record))
  warn_never_predicted(record)
  if seconds:
    tf.compat.v1.logging.info(
        'Evaluated %d images in %.1f s: %.2f images/s.', record['num_images'],
        seconds, record['images_per_second'])
  return record


class EvalTimer(tf.estimator.SessionRunHook):
  """Times an evaluation loop from its first step to its end."""

  def __init__(self):
    self.seconds = None
    self._start = None

  def begin(self):
    self.seconds = None
    self._start = None

  def before_run(self, run_context):
    if self._start is None:
      self._start = time.time()

  def end(self, session):
    if self._start is not None:
      self.seconds = time.time() - self._start


class MetricsExporter(tf.estimator.Exporter):
  """Hands each evaluation of `train_and_evaluate` to `report_fn`.

  `train_and_evaluate` gives every evaluation result to its exporters: it is
  the one hook it offers after each evaluation. This one records metrics,
  it exports no model.
  """

  def __init__(self, report_fn):
    """`report_fn(eval_result, checkpoint_path)` records one evaluation."""
    self._report_fn = report_fn

  @property
  def name(self):
    return 'metrics'

  def export(self, estimator, export_path, checkpoint_path, eval_result,
             is_the_final_export):
    del estimator, export_path, is_the_final_export  # Unused.
    self._report_fn(eval_result, checkpoint_path)
    return None
