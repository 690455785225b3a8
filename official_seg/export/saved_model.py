"""SavedModel export: the serving receiver, --mode=export, and exporters."""

import inspect
import json
import os
import uuid

import gin
import tensorflow as tf
from official.vision.ops import preprocess_ops

from official_seg.data import preprocess
from official_seg.evaluation import best_checkpoint
from official_seg.export import signatures
from official_seg.runtime import run_config
from official_seg.training import model_fn as model_fn_lib

EXPORT_DIR = 'export'
# Written into each SavedModel's assets.extra/: what a client needs to read
# its label maps (class names, ignore label, palette).
METADATA_FILE = 'segmentation.json'
_PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


def eval_parser_arguments():
  """The eval Parser's constructor arguments, as the eval pipeline gets them.

  Serving must preprocess exactly like evaluation, and the Parser keeps its
  settings private, so this resolves the same gin bindings (`eval/Parser`,
  inheriting unscoped `Parser` ones) over the constructor's defaults.

  Returns:
    dict of argument name to value (crop_size, mean_rgb, stddev_rgb,
    min_resize_value, ...).

  Raises:
    ValueError: eval/Parser.crop_size is not bound.
  """
  arguments = {name: parameter.default for name, parameter
               in inspect.signature(preprocess.Parser).parameters.items()}
  arguments.update(gin.get_bindings('eval/Parser'))
  if arguments['crop_size'] is gin.REQUIRED:
    raise ValueError('eval/Parser.crop_size is not bound; export pads images '
                     'to it. Set EVAL_CROP_SIZE in the dataset gin file.')
  return arguments


def _decode_one(encoded, index, resize):
  """Decodes input `index` of a batch to float32 pixels, resized like eval.

  Args:
    encoded: scalar string, the input's bytes.
    index: scalar int32, its index in the batch, for the error message.
    resize: the eval Parser's (min_resize_value, max_resize_value,
      resize_factor).

  Returns:
    (pixels float32 ragged [h, (w), 3], size int32 [2] of the pixels,
     original size int32 [2] of the decoded image).
  """
  is_png = tf.equal(tf.strings.substr(encoded, 0, len(_PNG_SIGNATURE)),
                    _PNG_SIGNATURE)
  # decode_image's own error does not say which input of the batch failed.
  check = tf.debugging.Assert(
      tf.logical_or(tf.io.is_jpeg(encoded), is_png),
      [tf.strings.format(
          'input {} of the batch ({} bytes) is not a JPEG or PNG image; '
          'send encoded JPEG or PNG bytes, or use the image_tensor signature '
          'for decoded pixels.', [index, tf.strings.length(encoded)])])
  with tf.control_dependencies([check]):
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
  original = tf.shape(image)[:2]
  pixels = tf.cast(image, tf.float32)
  if resize[0] is not None:
    # The eval Parser's resize_to_range, on pixels instead of normalized
    # values: equal up to float rounding, as resizing is linear.
    size = preprocess.resize_to_range_size(original[0], original[1], *resize)
    pixels = tf.compat.v1.image.resize_bilinear(pixels[None], size,
                                                align_corners=True)[0]
  return (tf.RaggedTensor.from_tensor(pixels, ragged_rank=1),
          tf.shape(pixels)[:2], original)


def decode_images(encoded, crop_size, mean_rgb, resize=(None, None, None)):
  """Decodes a batch of encoded images into one padded batch of pixels.

  Each image sits in the top-left corner and is padded with `mean_rgb`, which
  normalizes to 0: exactly the eval Parser's padding.

  Args:
    encoded: string [B], JPEG or PNG bytes.
    crop_size: (height, width), the least padded size (EVAL_CROP_SIZE); a
      batch with a larger image is padded to its largest height and width.
    mean_rgb: 3 floats, the eval Parser's mean pixel.
    resize: the eval Parser's (min_resize_value, max_resize_value,
      resize_factor); (None, ...) keeps decoded sizes.

  Returns:
    (pixels float32 [B, H, W, 3] in [0, 255], sizes int32 [B, 2] of each
    image in `pixels`, original_sizes int32 [B, 2] as decoded).

  Raises:
    tf.errors.InvalidArgumentError: at run time, an input is not a JPEG or
      PNG image; the message names its index in the batch.
  """
  index = tf.range(tf.shape(encoded)[0])
  images, sizes, original_sizes = tf.map_fn(
      lambda args: _decode_one(*args, resize), (encoded, index),
      fn_output_signature=(
          tf.RaggedTensorSpec([None, None, 3], tf.float32, ragged_rank=1),
          tf.TensorSpec([2], tf.int32), tf.TensorSpec([2], tf.int32)))
  padded = tf.maximum(tf.constant(crop_size, tf.int32),
                      tf.reduce_max(sizes, axis=0))
  pixels = images.to_tensor(
      default_value=tf.constant(mean_rgb, tf.float32),
      shape=tf.stack([tf.shape(encoded)[0], padded[0], padded[1], 3]))
  return pixels, sizes, original_sizes


def serving_input_receiver_fn():
  """The serving input receiver fn; it preprocesses like the eval Parser.

  Signatures (see `signatures`): `serving_default` and `probabilities` take
  'images' string [B] of encoded JPEG or PNG; `image_tensor:probabilities`
  takes 'images' float32 [B, H, W, 3], RGB pixels in [0, 255], run as they
  are (no padding or resize).

  Returns:
    A function of no arguments returning a `ServingInputReceiver`.
  """
  arguments = eval_parser_arguments()
  resize = (arguments['min_resize_value'], arguments['max_resize_value'],
            arguments['resize_factor'])

  def receiver_fn():
    encoded = tf.compat.v1.placeholder(tf.string, [None], 'encoded_images')
    pixels, sizes, original_sizes = decode_images(
        encoded, arguments['crop_size'], arguments['mean_rgb'], resize)
    # Feeding this tensor skips decoding: the image_tensor alternative.
    pixels = tf.compat.v1.placeholder_with_default(
        pixels, [None, None, None, 3], name=signatures.IMAGE_TENSOR)
    features = {
        'image': preprocess_ops.normalize_scaled_float_image(
            pixels, arguments['mean_rgb'], arguments['stddev_rgb']),
        'height': sizes[:, 0],
        'width': sizes[:, 1],
        signatures.ORIGINAL_HEIGHT: original_sizes[:, 0],
        signatures.ORIGINAL_WIDTH: original_sizes[:, 1],
    }
    return tf.estimator.export.ServingInputReceiver(
        features, {signatures.INPUT_KEY: encoded},
        receiver_tensors_alternatives={
            signatures.IMAGE_TENSOR: {signatures.INPUT_KEY: pixels}})

  return receiver_fn


def _palette_macro():
  """The PALETTE macro when the dataset gin file binds it, else None."""
  try:
    return gin.query_parameter('%PALETTE')
  except ValueError:
    return None


def write_metadata(path):
  """Writes the dataset facts a client of the SavedModel needs, as JSON.

  Args:
    path: str, the file to write (atomically).

  Returns:
    `path`, holding 'class_names', 'num_classes', 'ignore_label' and
    'palette' (the PALETTE macro, or null).
  """
  task = model_fn_lib.segmentation_task()
  payload = {'class_names': task.class_names, 'num_classes': task.num_classes,
             'ignore_label': task.ignore_label, 'palette': _palette_macro()}
  tf.io.gfile.makedirs(os.path.dirname(path))
  # A unique temporary name: evaluator and chief may write at once.
  temporary = f'{path}.tmp-{uuid.uuid4().hex}'
  with tf.io.gfile.GFile(temporary, 'w') as f:
    json.dump(payload, f, indent=2)
  tf.io.gfile.rename(temporary, path, overwrite=True)
  return path


def serving_estimator(estimator):
  """The estimator that exports: a plain Estimator in place of a TPUEstimator.

  TPUEstimator's export adds a TPU graph, whose rewrite cannot pass the size
  features through; the SavedModel is for CPU and GPU serving, and an
  Estimator with the same model_fn restores the same checkpoint.
  """
  if not isinstance(estimator, tf.compat.v1.estimator.tpu.TPUEstimator):
    return estimator
  return tf.estimator.Estimator(run_config.estimator_model_fn,
                                config=estimator.config,
                                params={'use_tpu': False})


def _metadata_path(model_dir):
  return os.path.join(model_dir, EXPORT_DIR, METADATA_FILE)


def export_checkpoint(estimator, checkpoint_path=None):
  """Exports a checkpoint to `<model_dir>/export/<timestamp>/` (--mode=export).

  Args:
    estimator: the experiment's estimator.
    checkpoint_path: optional checkpoint; default the latest in model_dir.

  Returns:
    str, the SavedModel directory.

  Raises:
    FileNotFoundError: model_dir holds no checkpoint and none was given.
  """
  checkpoint_path = checkpoint_path or estimator.latest_checkpoint()
  if not checkpoint_path:
    raise FileNotFoundError(
        f'No checkpoint to export in {estimator.model_dir}; train first or '
        'pass --checkpoint.')
  metadata = write_metadata(_metadata_path(estimator.model_dir))
  export_dir = serving_estimator(estimator).export_saved_model(
      os.path.join(estimator.model_dir, EXPORT_DIR),
      serving_input_receiver_fn(), assets_extra={METADATA_FILE: metadata},
      checkpoint_path=checkpoint_path).decode('utf-8')
  tf.compat.v1.logging.info('Exported %s to %s.', checkpoint_path, export_dir)
  return export_dir


class SavedModelExporter(tf.estimator.Exporter):
  """`LatestExporter` with this package's receiver, metadata and estimator.

  Writes `<model_dir>/export/<name>/<timestamp>/` and keeps the newest
  `exports_to_keep` there.
  """

  def __init__(self, name, model_dir, exports_to_keep):
    """Initializes the exporter.

    Args:
      name: str, the export folder's name.
      model_dir: str, the estimator's model dir.
      exports_to_keep: int, newest exports kept in the folder.
    """
    self._metadata = _metadata_path(model_dir)
    self._exporter = tf.estimator.LatestExporter(
        name, serving_input_receiver_fn(),
        assets_extra={METADATA_FILE: self._metadata},
        exports_to_keep=exports_to_keep)

  @property
  def name(self):
    return self._exporter.name

  def export(self, estimator, export_path, checkpoint_path, eval_result,
             is_the_final_export):
    # Written here, not at construction: the evaluator that exports may run
    # on another machine than the one that built the EvalSpec.
    write_metadata(self._metadata)
    return self._exporter.export(serving_estimator(estimator), export_path,
                                 checkpoint_path, eval_result,
                                 is_the_final_export)


@gin.configurable(denylist=['model_dir'])
def make_exporters(model_dir, latest=True, exports_to_keep=2):
  """The EvalSpec exporters of train_and_eval.

  Args:
    model_dir: str, the estimator's model dir.
    latest: bool, export after every evaluation to export/latest/.
    exports_to_keep: int, newest exports kept in export/latest/.

  Returns:
    A list of `tf.estimator.Exporter`.
  """
  if not latest:
    return []
  return [SavedModelExporter('latest', model_dir, exports_to_keep)]


@gin.configurable(denylist=['estimator'])
def export_best(estimator, enabled=True, exports_to_keep=2):
  """Exports the checkpoint best/ keeps to `<model_dir>/export/best/`.

  The experiment calls it each time best/ takes a new checkpoint, in every
  mode that evaluates, so the newest export there is always the checkpoint
  best/best.json names (exported from best/'s copy).

  Args:
    estimator: the experiment's estimator.
    enabled: bool; False exports nothing.
    exports_to_keep: int, newest exports kept in export/best/.

  Returns:
    str, the SavedModel directory, or None when disabled or before any best.
  """
  best = best_checkpoint.read_best(estimator.model_dir)
  if not enabled or not best:
    return None
  exporter = SavedModelExporter('best', estimator.model_dir, exports_to_keep)
  export_dir = exporter.export(
      estimator, os.path.join(estimator.model_dir, EXPORT_DIR, exporter.name),
      best['checkpoint'], eval_result=None, is_the_final_export=False)
  return export_dir.decode('utf-8')
