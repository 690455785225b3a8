"""Keeps a copy of the best checkpoint by mean IoU under <model_dir>/best/."""

import json
import os

import tensorflow as tf

from official_seg.data import storage

BEST_DIR = 'best'
BEST_FILE = 'best.json'


def read_best(model_dir):
  """Returns the best.json record, or None before the first evaluation."""
  path = os.path.join(model_dir, BEST_DIR, BEST_FILE)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


def _copy_checkpoint(checkpoint_path, best_dir):
  """Copies a checkpoint's files into `best_dir`; returns the new prefix.

  Raises:
    tf.errors.NotFoundError: a file vanished while copying (the trainer's
      `keep_checkpoint_max` deleted the checkpoint).
  """
  prefix = os.path.join(best_dir, os.path.basename(checkpoint_path))
  sources = tf.io.gfile.glob(checkpoint_path + '.*')
  if not sources:
    raise tf.errors.NotFoundError(None, None,
                                  f'Checkpoint {checkpoint_path} is gone.')
  for source in sources:
    target = os.path.join(best_dir, os.path.basename(source))
    storage.copy_whole(source, target)
  return prefix


def _remove_other_checkpoints(best_dir, keep_prefix):
  for path in tf.io.gfile.glob(os.path.join(best_dir, 'model.ckpt-*')):
    if not path.startswith(keep_prefix + '.'):
      tf.io.gfile.remove(path)


def update(model_dir, record):
  """Copies the evaluated checkpoint to best/ when its mean IoU is the best.

  best.json is written last and whole (`storage.write_whole`), so it always
  names a complete copy; a `checkpoint` state file lets
  `tf.train.latest_checkpoint(best_dir)` find it.

  Args:
    model_dir: str, the training model dir.
    record: a metrics.jsonl record (see `results.make_record`).

  Returns:
    True when `record` became the best.
  """
  best = read_best(model_dir)
  if record['mean_iou'] is None or (
      best and best['mean_iou'] >= record['mean_iou']):
    return False
  best_dir = os.path.join(model_dir, BEST_DIR)
  tf.io.gfile.makedirs(best_dir)
  try:
    prefix = _copy_checkpoint(record['checkpoint'], best_dir)
  except tf.errors.NotFoundError:
    tf.compat.v1.logging.warning(
        'Best checkpoint %s was deleted before it could be copied; best/ '
        'keeps step %s.', record['checkpoint'], best and best['global_step'])
    return False
  path = os.path.join(best_dir, BEST_FILE)
  storage.write_whole(path, json.dumps(
      dict(record, checkpoint=prefix, source_checkpoint=record['checkpoint']),
      indent=2, sort_keys=True))
  tf.compat.v1.train.update_checkpoint_state(best_dir, prefix)
  _remove_other_checkpoints(best_dir, prefix)
  tf.compat.v1.logging.info('New best mean IoU %.4f at step %d, copied to %s.',
                            record['mean_iou'], record['global_step'], prefix)
  return True
