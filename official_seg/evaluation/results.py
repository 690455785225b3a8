"""Evaluation records (a file per step, the metrics.jsonl view) and the IoU table."""

import json
import math
import os
import time

import numpy as np
import tensorflow as tf

from official_seg.data import storage
from official_seg.evaluation import metrics

METRICS_FILE = 'metrics.jsonl'
RECORDS_DIR = 'records'
_IOU_PREFIX = 'iou/'


def _number(value):
  """A JSON-safe float: NaN (a class absent from labels and predictions) is None."""
  value = float(np.asarray(value))
  return None if math.isnan(value) else value


def _record(global_step, per_class_iou, mean_iou, pixel_accuracy,
            num_images, **fields):
  """The one shape of a metrics record; `fields` adds keys of its source."""
  return dict(
      global_step=None if global_step is None else int(global_step),
      mean_iou=_number(mean_iou),
      pixel_accuracy=_number(pixel_accuracy),
      per_class_iou={name: _number(iou)
                     for name, iou in per_class_iou.items()},
      num_images=int(num_images),
      **fields)


def make_record(eval_result, checkpoint_path, class_names=None):
  """Turns an Estimator eval result dict into one metrics.jsonl record.

  Args:
    eval_result: dict from `Estimator.evaluate`, with 'global_step', 'loss',
      'mean_iou', 'pixel_accuracy', 'num_images' and 'iou/<class>' keys,
      and optionally 'weights': which weights were scored, 'raw' (the
      default) or 'moving_average'.
    checkpoint_path: str, the checkpoint that was evaluated.
    class_names: optional list fixing the order of 'per_class_iou'; default
      the order of `eval_result`.

  Returns:
    A JSON-serializable dict.
  """
  names = class_names or [key[len(_IOU_PREFIX):] for key in eval_result
                          if key.startswith(_IOU_PREFIX)]
  return _record(
      eval_result['global_step'],
      {name: eval_result[_IOU_PREFIX + name] for name in names},
      eval_result['mean_iou'], eval_result['pixel_accuracy'],
      eval_result['num_images'], checkpoint=checkpoint_path,
      loss=_number(eval_result['loss']),
      weights=eval_result.get('weights', 'raw'))


def record_from_confusion(confusion, class_names, num_images,
                          global_step=None):
  """A metrics record of a summed confusion matrix, e.g. of scored images.

  Args:
    confusion: int [C, C] over all scored images, rows true class.
    class_names: C names.
    num_images: int, the images scored.
    global_step: optional int, the step of the model's checkpoint.

  Returns:
    A JSON-serializable dict shaped like `make_record`'s, without
    'checkpoint', 'loss' and 'weights'; `format_table` prints it.
  """
  per_class, mean_iou, accuracy = metrics.iou_from_confusion(
      tf.constant(confusion, tf.float64))
  return _record(global_step, dict(zip(class_names, per_class.numpy())),
                 mean_iou, accuracy, num_images)


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


def format_table(record):
  """A per-class IoU table with mean IoU, pixel accuracy and the step."""
  rows = [f'Evaluation at step {record["global_step"]} '
          f'({record["num_images"]} images)',
          f'{"class":<24}{"IoU":>10}']
  for name, iou in record['per_class_iou'].items():
    rows.append(f'{name:<24}{"n/a" if iou is None else f"{iou:.4f}":>10}')
  rows.append(f'{"mean IoU":<24}{record["mean_iou"]:>10.4f}')
  rows.append(f'{"pixel accuracy":<24}{record["pixel_accuracy"]:>10.4f}')
  return '\n'.join(rows)


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
