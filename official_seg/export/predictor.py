"""Runs an exported SavedModel on image files: finds it, loads it, predicts."""

import glob
import json
import os

import tensorflow as tf

from official_seg import validation
from official_seg.data import layouts
from official_seg.export import saved_model
from official_seg.export import signatures


def find_saved_model(model_dir):
  """The newest SavedModel under `<model_dir>/export/`.

  Looks at `export/<timestamp>/` (--mode=export) and `export/<name>/
  <timestamp>/` (train_and_eval's exporters); the largest timestamp wins.

  Raises:
    validation.MissingFileError: there is none; the message says how to
      export.
  """
  base = os.path.join(model_dir, saved_model.EXPORT_DIR)
  found = [os.path.dirname(path) for pattern in ('*', os.path.join('*', '*'))
           for path in tf.io.gfile.glob(
               os.path.join(base, pattern, 'saved_model.pb'))
           if os.path.basename(os.path.dirname(path)).isdigit()]
  if not found:
    raise validation.MissingFileError(
        f'No SavedModel under {base}; export one with train_and_eval '
        f'--mode=export --model_dir={model_dir} and the gin files of the run.')
  return max(found, key=lambda path: int(os.path.basename(path)))


def read_metadata(saved_model_dir):
  """The export's assets.extra/segmentation.json, or None when missing."""
  path = os.path.join(saved_model_dir, 'assets.extra',
                      saved_model.METADATA_FILE)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
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

  @property
  def resize_range(self):
    """The eval parser's (min, max, factor) the export recorded, or None.

    None for exports that predate the record (or carry no metadata).
    """
    recorded = (self.metadata or {}).get('resize_range')
    return None if recorded is None else tuple(recorded)

  def probabilities(self, encoded):
    """The `probabilities` signature's output for one encoded image.

    Args:
      encoded: bytes, a JPEG or PNG image.

    Returns:
      float32 [H, W, C] of the padded model input; the image sits in its
      top-left corner, at the size the eval parser gives it.
    """
    serve = self._model.signatures[signatures.PROBABILITIES]
    outputs = serve(**{signatures.INPUT_KEY: tf.constant([encoded])})
    return outputs['probabilities'][0].numpy()

  def __call__(self, encoded, name='input'):
    """Predicts one image.

    Args:
      encoded: bytes, a JPEG or PNG image.
      name: str, the image's name for error messages, e.g. its path.

    Returns:
      int32 [H, W] class ids at the image's size.

    Raises:
      validation.ConfigurationError: the exported model's own check refuses
        the image (not a JPEG or PNG image, larger than a quantized model
        serves); names `name`. Any other failure keeps its traceback.
    """
    try:
      outputs = self._serve(**{signatures.INPUT_KEY: tf.constant([encoded])})
    except tf.errors.InvalidArgumentError as error:
      # The receiver's check says what is wrong inside TF's graph trace.
      detail = validation.failed_check(error.message)
      if detail is None:
        raise
      raise validation.ConfigurationError(f'{name}: {detail}') from error
    height, width = int(outputs['height'][0]), int(outputs['width'][0])
    return outputs['semantic'][0, :height, :width].numpy()


def list_images(pattern):
  """The JPEG and PNG files of a folder, or matching a glob, sorted.

  Raises:
    validation.MissingFileError: nothing matches; names `pattern`.
  """
  paths = (glob.glob(os.path.join(pattern, '*')) if os.path.isdir(pattern)
           else glob.glob(pattern))
  paths = sorted(path for path in paths
                 if path.lower().endswith(layouts.IMAGE_EXTENSIONS))
  if not paths:
    raise validation.MissingFileError(
        f'--input {pattern!r} names no {"/".join(layouts.IMAGE_EXTENSIONS)} '
        'file; give a folder of images or a glob such as "images/*.jpg".')
  return paths
