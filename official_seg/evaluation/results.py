"""Evaluation results: metrics.jsonl records, the per-class IoU table, an exporter."""

import json
import math
import os
import time

import numpy as np
import tensorflow as tf

from official_seg.evaluation import metrics

METRICS_FILE = 'metrics.jsonl'
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


def _ends_mid_line(fd):
  """True when the file's last byte is not a newline (a crash cut a write)."""
  size = os.fstat(fd).st_size
  return size > 0 and os.pread(fd, 1, size - 1) != b'\n'


def append_record(eval_dir, record):
  """Appends one record as a single line with one write, then syncs it.

  One `os.write` of a whole line in append mode keeps lines whole even when
  two writers share the file. Should an earlier write have been cut short
  (a crash, a full disk), the new record starts on a line of its own.
  """
  tf.io.gfile.makedirs(eval_dir)
  line = (json.dumps(record, sort_keys=True) + '\n').encode('utf-8')
  fd = os.open(os.path.join(eval_dir, METRICS_FILE),
               os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
  try:
    os.write(fd, b'\n' + line if _ends_mid_line(fd) else line)
    os.fsync(fd)
  finally:
    os.close(fd)


def read_records(eval_dir):
  """Returns the records of `<eval_dir>/metrics.jsonl`, oldest first.

  A line cut short by a crash is skipped with a warning, never an error.
  """
  path = os.path.join(eval_dir, METRICS_FILE)
  if not os.path.exists(path):
    return []
  records = []
  with open(path, encoding='utf-8') as f:
    for number, line in enumerate(f, start=1):
      if not line.strip():
        continue
      try:
        records.append(json.loads(line))
      except json.JSONDecodeError:
        tf.compat.v1.logging.warning('Skipping incomplete line %d of %s.',
                                     number, path)
  return records


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
  with tf.io.gfile.GFile(path + '.tmp', 'w') as f:
    json.dump(payload, f)
  tf.io.gfile.rename(path + '.tmp', path, overwrite=True)
  return path


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

  Returns:
    The metrics.jsonl record.
  """
  record = make_record(eval_result, checkpoint_path, class_names)
  if seconds:
    record['images_per_second'] = record['num_images'] / seconds
  if append:
    append_record(eval_dir, record)
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
