"""Running an exported SavedModel on image files, and scoring its label maps."""

import glob
import json
import os
import re

import numpy as np
import tensorflow as tf

from official_seg.data import layouts
from official_seg.data import tfexample
from official_seg.evaluation import metrics
from official_seg.export import saved_model
from official_seg.export import signatures

IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png')


def find_saved_model(model_dir):
  """The newest SavedModel under `<model_dir>/export/`.

  Looks at `export/<timestamp>/` (--mode=export) and `export/<name>/
  <timestamp>/` (train_and_eval's exporters); the largest timestamp wins.

  Raises:
    FileNotFoundError: there is none; the message says how to export.
  """
  base = os.path.join(model_dir, saved_model.EXPORT_DIR)
  found = [os.path.dirname(path) for pattern in ('*', os.path.join('*', '*'))
           for path in glob.glob(os.path.join(base, pattern, 'saved_model.pb'))
           if os.path.basename(os.path.dirname(path)).isdigit()]
  if not found:
    raise FileNotFoundError(
        f'No SavedModel under {base}; export one with train_and_eval '
        f'--mode=export --model_dir={model_dir} and the gin files of the run.')
  return max(found, key=lambda path: int(os.path.basename(path)))


def read_metadata(saved_model_dir):
  """The export's assets.extra/segmentation.json, or None when missing."""
  path = os.path.join(saved_model_dir, 'assets.extra',
                      saved_model.METADATA_FILE)
  if not os.path.exists(path):
    return None
  with open(path, encoding='utf-8') as f:
    return json.load(f)


class Predictor:
  """Label maps of encoded images from a SavedModel's serving_default."""

  def __init__(self, saved_model_dir):
    """Loads the SavedModel (an export of `saved_model`) and its metadata."""
    self._model = tf.saved_model.load(saved_model_dir)
    self._serve = self._model.signatures[signatures.SERVING_DEFAULT]
    self.metadata = read_metadata(saved_model_dir)

  @property
  def global_step(self):
    """The step of the exported checkpoint, or None if it has none."""
    for variable in self._model.variables:
      if variable.name.split(':')[0] == 'global_step':
        return int(variable.numpy())
    return None

  def __call__(self, encoded, name='input'):
    """Predicts one image.

    Args:
      encoded: bytes, a JPEG or PNG image.
      name: str, the image's name for error messages, e.g. its path.

    Returns:
      int32 [H, W] class ids at the image's size.

    Raises:
      ValueError: the bytes are not a JPEG or PNG image; names `name`.
    """
    try:
      outputs = self._serve(**{signatures.INPUT_KEY: tf.constant([encoded])})
    except tf.errors.InvalidArgumentError as error:
      # The receiver's check says what is wrong inside TF's graph trace.
      found = re.search(r'assertion failed: \[(.*)\]', error.message)
      detail = found.group(1) if found else error.message.strip()
      raise ValueError(f'{name}: {detail}') from None
    height, width = int(outputs['height'][0]), int(outputs['width'][0])
    return outputs['semantic'][0, :height, :width].numpy()


def list_images(pattern):
  """The JPEG and PNG files of a folder, or matching a glob, sorted.

  Raises:
    FileNotFoundError: nothing matches; names `pattern`.
  """
  paths = (glob.glob(os.path.join(pattern, '*')) if os.path.isdir(pattern)
           else glob.glob(pattern))
  paths = sorted(path for path in paths
                 if path.lower().endswith(IMAGE_EXTENSIONS))
  if not paths:
    raise FileNotFoundError(
        f'--input {pattern!r} names no .jpg, .jpeg or .png file; give a '
        'folder of images or a glob such as "images/*.jpg".')
  return paths


# Cityscapes train id -> label id, for the benchmark server's format.
CITYSCAPES_LABEL_IDS = {train_id: label_id for label_id, train_id
                        in layouts.CITYSCAPES_TRAIN_IDS.items()}


def to_cityscapes_label_ids(train_ids):
  """Maps Cityscapes train ids (0-18) back to label ids, as the server wants.

  Args:
    train_ids: int [H, W], predicted train ids.

  Returns:
    uint8 [H, W] label ids.

  Raises:
    ValueError: a value is not a Cityscapes train id.
  """
  lookup = np.full(256, -1, np.int64)
  for train_id, label_id in CITYSCAPES_LABEL_IDS.items():
    lookup[train_id] = label_id
  train_ids = np.asarray(train_ids)
  label_ids = lookup[np.clip(train_ids, 0, 255)]
  bad = (train_ids < 0) | (train_ids > 255) | (label_ids < 0)
  if bad.any():
    raise ValueError(f'{np.unique(train_ids[bad])} are not Cityscapes train '
                     'ids (0-18); was the model trained on Cityscapes?')
  return label_ids.astype(np.uint8)


def confusion_matrix(labels, predictions, num_classes, ignore_label):
  """Confusion matrix of one image: rows true class, columns predicted.

  Args:
    labels: int [H, W] ground truth; `ignore_label` pixels count nowhere.
    predictions: int [H, W] class ids.
    num_classes: int, C.
    ignore_label: int.

  Returns:
    int64 [C, C].

  Raises:
    ValueError: sizes differ, or a label is neither a class nor ignored.
  """
  labels = np.asarray(labels, np.int32)
  if labels.shape != np.shape(predictions):
    raise ValueError(f'Label of size {labels.shape} and prediction of size '
                     f'{np.shape(predictions)} differ.')
  stray = (labels != ignore_label) & ((labels < 0) | (labels >= num_classes))
  if stray.any():
    raise ValueError(f'Label values {np.unique(labels[stray])} are neither a '
                     f'class (0-{num_classes - 1}) nor the ignore label '
                     f'{ignore_label}.')
  confusion = metrics.confusion_matrices(
      labels[None], np.asarray(predictions, np.int32)[None], num_classes,
      ignore_label)
  return confusion.numpy()[0].astype(np.int64)


def metrics_record(confusion, class_names, global_step=None):
  """Mean IoU, pixel accuracy and per-class IoU of a summed confusion matrix.

  Args:
    confusion: int [C, C] over all scored images.
    class_names: C names.
    global_step: optional int, the exported checkpoint's step.

  Returns:
    A dict shaped like a metrics.jsonl record (`results.format_table` prints
    it), without 'num_images', which the caller adds.
  """
  per_class, mean_iou, accuracy = metrics.iou_from_confusion(
      tf.constant(confusion, tf.float64))
  return {
      'global_step': global_step,
      'per_class_iou': {name: None if np.isnan(iou) else float(iou)
                        for name, iou in zip(class_names, per_class.numpy())},
      'mean_iou': float(mean_iou),
      'pixel_accuracy': float(accuracy),
  }


def write_example_files(pattern, output_dir, count):
  """Writes the first `count` examples of TFRecord shards as image files.

  Args:
    pattern: str, a glob of DeepLab-format shards, e.g. 'data/synthetic/val-*'.
    output_dir: str; images go to `images/`, labels to `labels/<stem>.png`.
    count: int, how many examples.

  Returns:
    The number written.

  Raises:
    FileNotFoundError: no shard matches `pattern`.
  """
  files = sorted(glob.glob(pattern))
  if not files:
    raise FileNotFoundError(f'No TFRecord shards match {pattern!r}.')
  for kind in ('images', 'labels'):
    os.makedirs(os.path.join(output_dir, kind), exist_ok=True)
  written = 0
  for record in tf.data.TFRecordDataset(files).take(count):
    feature = tf.train.Example.FromString(record.numpy()).features.feature
    stem = f'example_{written:04d}'
    name = feature[tfexample.IMAGE_FILENAME].bytes_list.value
    if name and name[0]:
      stem = os.path.splitext(os.path.basename(name[0].decode('utf-8')))[0]
    image_format = feature[tfexample.IMAGE_FORMAT].bytes_list.value[0]
    extension = '.png' if image_format == b'png' else '.jpg'
    for kind, key, suffix in (('images', tfexample.IMAGE_ENCODED, extension),
                              ('labels', tfexample.LABEL_ENCODED, '.png')):
      with open(os.path.join(output_dir, kind, stem + suffix), 'wb') as f:
        f.write(feature[key].bytes_list.value[0])
    written += 1
  return written
