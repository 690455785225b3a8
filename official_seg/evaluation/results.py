"""Evaluation results: metrics.jsonl records, the per-class IoU table, an exporter."""

import json
import math
import os

import numpy as np
import tensorflow as tf

METRICS_FILE = 'metrics.jsonl'
_IOU_PREFIX = 'iou/'


def _number(value):
  """A JSON-safe float: NaN (a class absent from labels and predictions) is None."""
  value = float(np.asarray(value))
  return None if math.isnan(value) else value


def make_record(eval_result, checkpoint_path):
  """Turns an Estimator eval result dict into one metrics.jsonl record.

  Args:
    eval_result: dict from `Estimator.evaluate`, with 'global_step', 'loss',
      'mean_iou', 'pixel_accuracy', 'num_images' and 'iou/<class>' keys.
    checkpoint_path: str, the checkpoint that was evaluated.

  Returns:
    A JSON-serializable dict.
  """
  per_class = {key[len(_IOU_PREFIX):]: _number(value)
               for key, value in eval_result.items()
               if key.startswith(_IOU_PREFIX)}
  return {
      'global_step': int(eval_result['global_step']),
      'checkpoint': checkpoint_path,
      'mean_iou': _number(eval_result['mean_iou']),
      'pixel_accuracy': _number(eval_result['pixel_accuracy']),
      'per_class_iou': per_class,
      'loss': _number(eval_result['loss']),
      'num_images': int(eval_result['num_images']),
  }


def append_record(eval_dir, record):
  """Appends one record as a single line with one write, then syncs it.

  One `os.write` of a whole line in append mode keeps lines whole even when
  two writers share the file.
  """
  tf.io.gfile.makedirs(eval_dir)
  line = (json.dumps(record, sort_keys=True) + '\n').encode('utf-8')
  fd = os.open(os.path.join(eval_dir, METRICS_FILE),
               os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
  try:
    os.write(fd, line)
    os.fsync(fd)
  finally:
    os.close(fd)


def read_records(eval_dir):
  """Returns the records of `<eval_dir>/metrics.jsonl`, oldest first."""
  path = os.path.join(eval_dir, METRICS_FILE)
  if not os.path.exists(path):
    return []
  with open(path, encoding='utf-8') as f:
    return [json.loads(line) for line in f if line.strip()]


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


def report(eval_dir, eval_result, checkpoint_path):
  """Appends the record of one evaluation and logs its table."""
  record = make_record(eval_result, checkpoint_path)
  append_record(eval_dir, record)
  tf.compat.v1.logging.info('\n%s', format_table(record))
  return record


class MetricsExporter(tf.estimator.Exporter):
  """Writes each evaluation of `train_and_evaluate` to metrics.jsonl.

  `train_and_evaluate` hands every evaluation result to its exporters, which
  is the one hook it offers after each evaluation; this one exports metrics,
  not a model.
  """

  def __init__(self, eval_dir):
    self._eval_dir = eval_dir

  @property
  def name(self):
    return 'metrics'

  def export(self, estimator, export_path, checkpoint_path, eval_result,
             is_the_final_export):
    del estimator, export_path, is_the_final_export  # Unused.
    report(self._eval_dir, eval_result, checkpoint_path)
    return self._eval_dir
