"""Runs an exported .tflite: fits an image to its input, maps labels back.

The model's layout (written by `tflite.tflite_export`):
- input 'image' [1, H, W, C] of the dataset's channels (RGB: 3), uint8 for
  8-bit images and int32 holding the stored values for 16-bit ones (the
  TFLite interpreter's Python API sets no uint16 tensor); the image sits in
  the top-left corner, anything may fill the rest;
- input 'size' int32 [2], (h, w) of the image inside 'image';
- output 'semantic' int32 [1, H, W], class ids; only the top-left (h, w) are
  the image's; optionally 'probabilities' float32 [1, H, W, C].
Inside, pixels are normalized by the eval `Parser` and those beyond (h, w)
set to 0 (the mean pixel), exactly the eval parser's padding.

`fit_image` puts an image of any size into that input and
`labels_at_original_size` maps the labels back; `TfliteModel` does both, so
every tool treats an image the same way.
"""

import json
import os
import time

import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import image_files
from official_seg.data import image_ops
from official_seg.export import signatures
from official_seg.modeling import inference
from official_seg.modeling import tiling

IMAGE_INPUT = 'image'
SIZE_INPUT = 'size'
SEMANTIC_OUTPUT = 'semantic'
PROBABILITIES_OUTPUT = 'probabilities'
# Beside the .tflite files: what a client needs to read their label maps
# (see `saved_model.write_metadata`).
METADATA_FILE = 'segmentation.json'
# The 'image' input's type by the dataset's bits a channel.
_INPUT_DTYPES = {8: np.uint8, 16: np.int32}


def input_dtype(bit_depth):
  """The NumPy type of the 'image' input for images of `bit_depth` bits."""
  return _INPUT_DTYPES[bit_depth]


def fitted_size(size, input_size, resize_range=(None, None, None)):
  """The size an image takes inside the model input.

  First the eval `Parser`'s DeepLab resize when it has one (see
  `image_ops.resize_to_range_size`); then, if the result is larger than the
  input, it is scaled down, keeping its aspect ratio, to fit.

  Args:
    size: (height, width) of the decoded image.
    input_size: (H, W) of the model input.
    resize_range: the parser's (min_resize_value, max_resize_value,
      resize_factor); None values when it does not resize.

  Returns:
    (h, w) ints, at most (H, W).
  """
  height, width = size
  if resize_range[0] is not None:
    height, width = (int(v) for v in image_ops.resize_to_range_size(
        height, width, *resize_range).numpy())
  scale = min(1.0, input_size[0] / height, input_size[1] / width)
  if scale < 1.0:
    height = max(1, min(input_size[0], int(height * scale)))
    width = max(1, min(input_size[1], int(width * scale)))
  return height, width


def _resized(image, size):
  """An image resized bilinearly with aligned corners, as DeepLab, rounded
  to its own type."""
  resized = tf.compat.v1.image.resize_bilinear(
      image[None].astype(np.float32), size, align_corners=True)[0]
  top = np.iinfo(image.dtype).max
  return np.clip(np.round(resized.numpy()), 0, top).astype(image.dtype)


def fit_image(image, input_size, resize_range=(None, None, None),
              dtype=np.uint8):
  """Puts a decoded image into the model input.

  An image that keeps its size is copied unchanged into the top-left
  corner, the rest left 0: then the model sees exactly the eval parser's
  input. Otherwise (see `fitted_size`) it is resized first, bilinearly with
  aligned corners as DeepLab resizes, and rounded to the image's type.

  Args:
    image: uint8 or uint16 [h, w, C], of the model's channels.
    input_size: (H, W) of the model input.
    resize_range: see `fitted_size`.
    dtype: the input's type (`input_dtype`).

  Returns:
    (`dtype` [1, H, W, C], int32 [2] the size of the image inside it).
  """
  image = np.asarray(image)
  size = fitted_size(image.shape[:2], input_size, resize_range)
  if size != image.shape[:2]:
    image = _resized(image, size)
  canvas = np.zeros((1,) + tuple(input_size) + image.shape[2:], dtype)
  canvas[0, :size[0], :size[1]] = image
  return canvas, np.array(size, np.int32)


def labels_at_original_size(semantic, size, original_size):
  """The image's labels cut from the model output, at its decoded size.

  The SavedModel's own `signatures.labels_at_original_size`: the (h, w)
  top-left labels, resized back with nearest neighbours and aligned corners
  when the image was resized.

  Args:
    semantic: int [1, H, W] or [H, W], the model's 'semantic' output.
    size: (h, w) of the image inside the input, from `fit_image`.
    original_size: (height, width) of the decoded image.

  Returns:
    int32 [height, width] NumPy array.
  """
  semantic = np.asarray(semantic, np.int32).reshape(np.shape(semantic)[-2:])
  labels = signatures.labels_at_original_size(
      semantic[None], np.asarray(size, np.int32)[None],
      np.asarray(original_size, np.int32)[None])
  return labels.numpy()[0]


def read_metadata(tflite_path):
  """segmentation.json beside the model, or None when missing."""
  path = os.path.join(os.path.dirname(tflite_path), METADATA_FILE)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


def _inputs_and_outputs(interpreter):
  """Input and output details by name.

  The session-converted kinds name their tensors; qat_int8, converted from
  a concrete function, names them in its signature.
  """
  inputs = {d['name']: d for d in interpreter.get_input_details()}
  outputs = {d['name']: d for d in interpreter.get_output_details()}
  if SEMANTIC_OUTPUT not in outputs and interpreter.get_signature_list():
    runner = interpreter.get_signature_runner()
    inputs = runner.get_input_details()
    outputs = runner.get_output_details()
  return inputs, outputs


class TfliteModel:
  """Label maps of decoded images from a .tflite of `tflite.tflite_export`."""

  def __init__(self, path, num_threads=None, window_stride=None,
               window_blending=None):
    """Loads the model into the TFLite interpreter.

    The eval parser's resize (see `fitted_size`) is read from the metadata
    beside the model, which the export writes.

    Args:
      path: str, the .tflite file.
      num_threads: int, interpreter threads; default the CPU cores.
      window_stride: optional (height, width); with it or `window_blending`
        an image larger than the model input is run in sliding windows of
        the input's size (see `predict_windowed`) instead of scaled down.
      window_blending: optional 'uniform' or 'gaussian' (default uniform).

    Raises:
      validation.MissingFileError: `path` is not a file.
      ValueError: the model lacks the 'image' and 'size' inputs, or windows
        are asked of a model without the 'probabilities' output.
    """
    if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
      raise validation.MissingFileError(
          f'No TFLite model {path}; write one with train_and_eval '
          '--mode=export_tflite.')
    self.path = path
    self.metadata = read_metadata(path)
    self.resize_range = tuple(
        (self.metadata or {}).get('resize_range') or (None, None, None))
    # Read through gfile: the model may sit in a model dir on an object store.
    with tf.io.gfile.GFile(path, 'rb') as f:
      content = f.read()
    self._interpreter = tf.lite.Interpreter(
        model_content=content, num_threads=num_threads or os.cpu_count())
    self._interpreter.allocate_tensors()
    inputs, outputs = _inputs_and_outputs(self._interpreter)
    if set(inputs) != {IMAGE_INPUT, SIZE_INPUT}:
      raise ValueError(f'{path} has inputs {sorted(inputs)}, not '
                       f'{[IMAGE_INPUT, SIZE_INPUT]}; it is not a model of '
                       'train_and_eval --mode=export_tflite.')
    self._image = inputs[IMAGE_INPUT]['index']
    self.channels = int(inputs[IMAGE_INPUT]['shape'][3])
    self._dtype = inputs[IMAGE_INPUT]['dtype']
    self.bit_depth = 16 if self._dtype == np.int32 else 8
    self._size = inputs[SIZE_INPUT]['index']
    self.input_size = tuple(int(v) for v in inputs[IMAGE_INPUT]['shape'][1:3])
    self._semantic = outputs[SEMANTIC_OUTPUT]['index']
    self._probabilities = outputs.get(PROBABILITIES_OUTPUT, {}).get('index')
    self.seconds = []  # Interpreter time of each call.
    self.windows = None
    if window_stride is not None or window_blending is not None:
      if self._probabilities is None:
        raise ValueError(
            f'{path} has no {PROBABILITIES_OUTPUT!r} output to blend windows '
            'with; export it with tflite_export.probabilities = True.')
      size = list(self.input_size)
      stride = window_stride and list(window_stride)
      blending = window_blending or 'uniform'
      validation.check(inference.InferenceOptions, window_size=size,
                       window_stride=stride, window_blending=blending)
      self.windows = tiling.make_windows(size, stride, blending, 1)

  @property
  def size_bytes(self):
    return tf.io.gfile.stat(self.path).length

  @property
  def global_step(self):
    """The exported checkpoint's step, from the metadata; None if unknown."""
    return (self.metadata or {}).get('global_step')

  def run(self, image, size):
    """The 'semantic' output of a fitted input (see `fit_image`)."""
    self._interpreter.set_tensor(self._image, image)
    self._interpreter.set_tensor(self._size, size)
    start = time.perf_counter()
    self._interpreter.invoke()
    self.seconds.append(time.perf_counter() - start)
    return self._interpreter.get_tensor(self._semantic)

  def run_probabilities(self, image, size):
    """The 'probabilities' output of a fitted input, float32 [H, W, C].

    Raises:
      ValueError: the model was exported without it.
    """
    if self._probabilities is None:
      raise ValueError(f'{self.path} has no {PROBABILITIES_OUTPUT!r} output; '
                       'export it with tflite_export.probabilities = True.')
    self.run(image, size)
    return self._interpreter.get_tensor(self._probabilities)[0]

  def predict_windowed(self, image):
    """int32 [h, w] class ids of an image of the model's kind, in windows.

    As evaluation with InferenceOptions.window_size = the model's input
    size (and EVAL_CROP_SIZE the same, batch 1): the image, after the eval
    parser's resize, lies in the top-left corner of a canvas of at least the
    input size; windows of the input size (`tiling.axis_weights`, the same
    positions and weights) each run once, the image's part of a window in
    its corner and the rest padding, and their probabilities are blended.
    """
    original = np.shape(image)[:2]
    size = fitted_size(original, (np.inf, np.inf), self.resize_range)
    if size != original:
      image = _resized(np.asarray(image), size)
    canvas = tuple(max(a, b) for a, b in zip(size, self.input_size))
    axes = [[t.numpy() for t in tiling.axis_weights(
        length, window, stride, self.windows.blending)]
            for length, window, stride in zip(canvas, self.windows.size,
                                              self.windows.stride)]
    (rows, height, row_weights), (cols, width, col_weights) = axes
    blended = None
    for y, row_weight in zip(rows, row_weights):
      for x, col_weight in zip(cols, col_weights):
        inside = image[y:y + height, x:x + width]
        fitted = np.zeros((1,) + self.input_size + (self.channels,),
                          self._dtype)
        fitted[0, :inside.shape[0], :inside.shape[1]] = inside
        probabilities = self.run_probabilities(
            fitted, np.array(inside.shape[:2], np.int32))[:height, :width]
        weighted = probabilities * np.outer(row_weight, col_weight)[..., None]
        if blended is None:
          blended = np.zeros(canvas + weighted.shape[-1:], np.float32)
        blended[y:y + height, x:x + width] += weighted
    labels = np.argmax(blended, axis=-1).astype(np.int32)
    return labels_at_original_size(labels, size, original)

  def predict(self, image):
    """int32 [h, w] class ids of a decoded image of the model's channels
    (uint8, or uint16 for a 16-bit model)."""
    if self.windows is not None:
      return self.predict_windowed(image)
    fitted, size = fit_image(image, self.input_size, self.resize_range,
                             self._dtype)
    return labels_at_original_size(self.run(fitted, size), size,
                                   np.shape(image)[:2])

  def __call__(self, encoded, name='input'):
    """Predicts encoded JPEG or PNG bytes, as `predictor.Predictor` does.

    Raises:
      ValueError: the bytes are not a JPEG or PNG image; names `name`.
      validation.ConfigurationError: an image of other channels or depth
        than the model's (`image_files.check_kind`); names `name`.
    """
    found = image_files.encoded_file(encoded)
    if found is None:
      raise ValueError(f'{name}: not a JPEG or PNG image.')
    return self.predict(image_files.decode(found, name, self.channels,
                                           self.bit_depth))
