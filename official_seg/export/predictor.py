"""Runs an exported SavedModel on image files: finds it, loads it, predicts."""

import glob
import json
import os

import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import image_files
from official_seg.data import input_fn as input_lib
from official_seg.data import storage
from official_seg.data import tfexample
from official_seg.evaluation import calibration
from official_seg.export import saved_model
from official_seg.export import signatures
from official_seg.export import tflite_runner

# Written beside the SavedModel's metadata by the fit_temperature command.
TEMPERATURE_FILE = 'temperature.json'


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


def check_saved_model(flag, path):
  """Checks that a flag's `path` is a SavedModel folder.

  Raises:
    validation.ConfigurationError: no such folder, a file, or a folder
      without saved_model.pb; the message names the flag and the path.
  """
  storage.check_input(flag, path, folder=True)
  if not tf.saved_model.contains_saved_model(path):
    raise validation.MissingFileError(
        f'{flag}={path} holds no SavedModel (saved_model.pb); give an export '
        'folder, <model_dir>/export/<timestamp>/.')


def read_metadata(saved_model_dir):
  """The export's assets.extra/segmentation.json, or None when missing."""
  path = os.path.join(saved_model_dir, 'assets.extra',
                      saved_model.METADATA_FILE)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


def temperature_path(saved_model_dir):
  """The export's assets.extra/temperature.json (see fit_temperature)."""
  return os.path.join(saved_model_dir, 'assets.extra', TEMPERATURE_FILE)


def read_temperature(saved_model_dir):
  """The export's fitted temperature, or None when it has none."""
  path = temperature_path(saved_model_dir)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return float(json.load(f)['temperature'])


class Predictor:
  """Label maps of encoded images from a SavedModel's serving_default."""

  def __init__(self, saved_model_dir):
    """Loads the SavedModel (an export of `saved_model`) and its metadata."""
    self._model = tf.saved_model.load(saved_model_dir)
    self._serve = self._model.signatures[signatures.SERVING_DEFAULT]
    self.metadata = read_metadata(saved_model_dir)
    self.temperature = read_temperature(saved_model_dir)

  @property
  def global_step(self):
    """The step of the exported checkpoint, or None if it has none.

    An ensemble of exports (`export.ensemble`, saved from a `tf.Module`,
    which lists no variables) has none: its members' steps may differ.
    """
    for variable in getattr(self._model, 'variables', ()):
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
    return self.outputs(encoded, name)['semantic']

  def outputs(self, encoded, name='input'):
    """Predicts one image: its labels and, where known, how sure they are.

    Args:
      encoded: bytes, a JPEG or PNG image.
      name: str, the image's name for error messages, e.g. its path.

    Returns:
      dict of arrays at the image's size: 'semantic' int32 [H, W] class
      ids; 'confidence' (top probability) and 'entropy' (nats) float32
      [H, W] from exports that serve them, of the probabilities divided by
      the export's fitted temperature when it has one (`temperature`); a
      sigmoid export's 'masks' int32 and 'class_probabilities' float32
      [H, W, C] instead.

    Raises:
      validation.ConfigurationError: as `__call__`.
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
    found = {key: outputs[key][0, :height, :width].numpy()
             for key in ('semantic', 'confidence', 'entropy', 'masks',
                         'class_probabilities')
             if key in outputs}
    if self.temperature is not None:
      found.update(self._tempered_maps(encoded, (height, width)))
    return found

  def _tempered_maps(self, encoded, size):
    """Confidence and entropy of softmax(log p / T) at the decoded size."""
    probabilities = calibration.tempered(
        probabilities_at_decoded_size(self.probabilities(encoded), size,
                                      self.resize_range),
        self.temperature)
    return {'confidence': calibration.confidence(probabilities).numpy(),
            'entropy': calibration.entropy(probabilities).numpy()}


def probabilities_at_decoded_size(padded, original_size, resize_range):
  """An image's probabilities cut from the padded output, at its size.

  Args:
    padded: float [H, W, C], the probabilities signature's output.
    original_size: (height, width) of the decoded image.
    resize_range: the eval parser's; the image sits in the top-left corner
      at the size it resizes to (see `tflite_runner.fitted_size`).

  Returns:
    float32 [height, width, C]; resized back with nearest neighbours and
    aligned corners when the parser resized, as the served labels are.
  """
  size = tflite_runner.fitted_size(original_size, (np.inf, np.inf),
                                   resize_range or (None, None, None))
  cut = padded[None, :size[0], :size[1]]
  if size != tuple(original_size):
    cut = tf.compat.v1.image.resize_nearest_neighbor(
        cut, original_size, align_corners=True)
  return np.asarray(cut[0], np.float32)


def split_examples(data_dir, split, limit=None):
  """A split's encoded images and decoded labels, in shard order.

  Yields:
    (encoded image bytes, label uint8 [h, w]).

  Raises:
    validation.MissingFileError: the split has no shards.
  """
  decoder = tfexample.Decoder()
  records = tf.data.TFRecordDataset(input_lib.list_shards(data_dir, split))
  records = records.map(lambda serialized: (
      decoder.encoded(serialized)[0], decoder.decode_label(serialized)))
  for encoded, label in records.take(-1 if limit is None else limit):
    yield encoded.numpy(), label.numpy()[..., 0]


def list_images(pattern):
  """The JPEG, PNG and TIFF files of a folder, or matching a glob, sorted.

  Raises:
    validation.MissingFileError: nothing matches; names `pattern`.
  """
  paths = (glob.glob(os.path.join(pattern, '*')) if os.path.isdir(pattern)
           else glob.glob(pattern))
  paths = sorted(path for path in paths
                 if path.lower().endswith(image_files.EXTENSIONS))
  if not paths:
    raise validation.MissingFileError(
        f'--input {pattern!r} names no {"/".join(image_files.EXTENSIONS)} '
        'file; give a folder of images or a glob such as "images/*.jpg".')
  return paths
