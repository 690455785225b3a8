"""SavedModel export: the serving receiver, --mode=export, and exporters."""

import collections
import json
import os
import tempfile

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.data import storage
from official_seg.data import tfexample
from official_seg.evaluation import best_checkpoint
from official_seg.export import signatures

EXPORT_DIR = 'export'
# Written into each SavedModel's assets.extra/: what a client needs to read
# its label maps (class names, ignore label, palette).
METADATA_FILE = 'segmentation.json'

# What every export needs: `estimator` restores checkpoints into the serving
# graph (a plain Estimator, also for a TPUEstimator run), `receiver_fn` is
# `serving_input_receiver_fn(parser)`, `dataset` a `DatasetInfo`; optional
# `preprocessing`, `preprocessing_metadata(parser)`, joins the metadata.
Serving = collections.namedtuple(
    'Serving', 'estimator receiver_fn dataset preprocessing', defaults=(None,))


def preprocessing_metadata(parser):
  """The eval parser's facts an export records: {'resize_range': [3]}."""
  return {'resize_range': list(parser.resize_range)}


def _decode_one(encoded, index, parser):
  """Decodes input `index` of a batch and preprocesses it as evaluation does.

  Args:
    encoded: scalar string, the input's bytes.
    index: scalar int32, its index in the batch, for the error message.
    parser: the eval `preprocess.Parser`.

  Returns:
    (image float32 ragged [h, (w), 3], normalized as the eval parser does;
     size int32 [2] of that image; original size int32 [2] as decoded).
  """
  # decode_image's own error does not say which input of the batch failed.
  check = tf.debugging.Assert(
      tf.logical_or(tf.io.is_jpeg(encoded), tfexample.is_png(encoded)),
      [validation.CHECK_MARK, tf.strings.format(
          'input {} of the batch ({} bytes) is not a JPEG or PNG image; '
          'send encoded JPEG or PNG bytes, or use the image_tensor signature '
          'for decoded pixels.', [index, tf.strings.length(encoded)])])
  with tf.control_dependencies([check]):
    decoded = tfexample.decode_rgb(encoded)
  image = parser.serving_image(decoded)
  return (tf.RaggedTensor.from_tensor(image, ragged_rank=1),
          tf.shape(image)[:2], tf.shape(decoded)[:2])


def decode_images(encoded, parser):
  """Decodes a batch of encoded images into one padded, normalized batch.

  Each image is preprocessed by the eval parser's own `serving_image` and
  sits in the top-left corner, padded with 0 (the mean pixel once
  normalized): exactly the eval parser's output for that image.

  Args:
    encoded: string [B], JPEG or PNG bytes.
    parser: the eval `preprocess.Parser`; its crop size is the least padded
      size, and a batch with a larger image is padded to its largest height
      and width.

  Returns:
    (images float32 [B, H, W, 3] normalized, sizes int32 [B, 2] of each
    image in `images`, original_sizes int32 [B, 2] as decoded).

  Raises:
    tf.errors.InvalidArgumentError: at run time, an input is not a JPEG or
      PNG image; the message names its index in the batch.
  """
  index = tf.range(tf.shape(encoded)[0])
  images, sizes, original_sizes = tf.map_fn(
      lambda args: _decode_one(*args, parser), (encoded, index),
      fn_output_signature=(
          tf.RaggedTensorSpec([None, None, 3], tf.float32, ragged_rank=1),
          tf.TensorSpec([2], tf.int32), tf.TensorSpec([2], tf.int32)))
  padded = tf.maximum(tf.constant(parser.crop_size, tf.int32),
                      tf.reduce_max(sizes, axis=0))
  images = images.to_tensor(
      default_value=0.0,
      shape=tf.stack([tf.shape(encoded)[0], padded[0], padded[1], 3]))
  return images, sizes, original_sizes


def _pixels_features(pixels, parser):
  """The image_tensor alternative: float pixels normalized, sizes as given."""
  shape = tf.shape(pixels)
  rows = tf.reshape(pixels, [shape[0] * shape[1], shape[2], 3])
  images = tf.reshape(parser.normalize(rows), shape)
  sizes = tf.tile(shape[None, 1:3], [shape[0], 1])
  return images, sizes, sizes


def _padded_to_crop(images, sizes, crop_size):
  """The batch padded with 0 to exactly the crop size, a static shape.

  Raises:
    tf.errors.InvalidArgumentError: at run time, an image (after the eval
      parser's resize) is larger than the crop.
  """
  height, width = crop_size
  check = tf.debugging.Assert(
      tf.reduce_all(tf.shape(images)[1:3] <= crop_size),
      [validation.CHECK_MARK, tf.strings.format(
          'a quantization-aware model serves images of at most '
          'EVAL_CROP_SIZE = {} (after the eval parser\'s resize); got sizes '
          '{}.', [tf.constant(crop_size), sizes])])
  with tf.control_dependencies([check]):
    padded = tf.image.pad_to_bounding_box(images, 0, 0, height, width)
  return tf.ensure_shape(padded, [None, height, width, 3])


def serving_input_receiver_fn(parser, static_size=False):
  """The serving input receiver fn; it preprocesses with the eval parser.

  Signatures (see `signatures`): `serving_default` and `probabilities` take
  'images' string [B] of encoded JPEG or PNG, preprocessed by the eval
  parser itself; `image_tensor:probabilities` takes 'images' float32
  [B, H, W, 3], RGB pixels in [0, 255], normalized by the eval parser and
  run as they are (no padding or resize).

  Args:
    parser: the eval `preprocess.Parser` (the one evaluation reads with).
    static_size: bool; the images of either signature are padded to exactly
      the parser's crop size, a static shape, and a larger one is a run-time
      error naming EVAL_CROP_SIZE. For quantization-aware models, whose
      layers are built at one static size (modeling/quantized.py).

  Returns:
    A function of no arguments returning a `ServingInputReceiver`.
  """
  def receiver_fn():
    # Both inputs default to empty, so each signature feeds only its own;
    # the cond then runs the decoding only for encoded images.
    encoded = tf.compat.v1.placeholder_with_default(
        tf.zeros([0], tf.string), [None], name='encoded_images')
    pixels = tf.compat.v1.placeholder_with_default(
        tf.zeros([0, 0, 0, 3]), [None, None, None, 3],
        name=signatures.IMAGE_TENSOR)
    images, sizes, original_sizes = tf.cond(
        tf.shape(pixels)[0] > 0, lambda: _pixels_features(pixels, parser),
        lambda: decode_images(encoded, parser))
    images.set_shape([None, None, None, 3])
    if static_size:
      images = _padded_to_crop(images, sizes, parser.crop_size)
    features = {
        'image': images,
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


def write_metadata(path, dataset, extra=None):
  """Writes the dataset facts a client of the SavedModel needs, as JSON.

  Args:
    path: str, the file to write (whole).
    dataset: the `DatasetInfo` of the run.
    extra: optional dict of more JSON fields.

  Returns:
    `path`, holding 'class_names', 'num_classes', 'ignore_label' and
    'palette' (`DatasetInfo.palette`: null, a palette name or colours).
  """
  payload = {'class_names': list(dataset.class_names),
             'num_classes': dataset.num_classes,
             'ignore_label': dataset.ignore_label,
             'palette': dataset.palette, **(extra or {})}
  # Evaluator and chief may write it at once: `write_whole` never shows a
  # reader half a file, on a local disk or an object store.
  storage.write_whole(path, json.dumps(payload, indent=2))
  return path


def _metadata_path(model_dir):
  return os.path.join(model_dir, EXPORT_DIR, METADATA_FILE)


class _ExportsWrittenWhole:
  """The Estimator, but its `export_saved_model` renames no folder on a store.

  The Estimator writes each SavedModel to a temporary folder and renames it
  into place; on an object store that is a copy and a delete per object
  (tensorflow-io-gcs-filesystem's gs:// rename of a folder fails outright:
  docs/evaluation.md). There the SavedModel is written to a local temporary
  folder and copied up file by file, `saved_model.pb` last.
  """

  def __init__(self, estimator):
    self._estimator = estimator

  def __getattr__(self, name):
    return getattr(self._estimator, name)

  def export_saved_model(self, export_dir_base, *args, **kwargs):
    if not storage.is_object_store(export_dir_base):
      return self._estimator.export_saved_model(export_dir_base, *args,
                                                **kwargs)
    with tempfile.TemporaryDirectory() as local:
      local_dir = self._estimator.export_saved_model(local, *args, **kwargs)
      target = os.path.join(export_dir_base,
                            os.path.basename(local_dir.decode('utf-8')))
      storage.copy_folder_whole(local_dir.decode('utf-8'), target,
                                last='saved_model.pb')
    return target.encode('utf-8')


def checkpoint_to_export(estimator, checkpoint_path=None):
  """`checkpoint_path`, or the latest checkpoint of the estimator's model dir.

  Raises:
    validation.MissingFileError: model_dir holds no checkpoint and none was
      given.
  """
  checkpoint_path = checkpoint_path or estimator.latest_checkpoint()
  if not checkpoint_path:
    raise validation.MissingFileError(
        f'No checkpoint to export in {estimator.model_dir}; train first or '
        'pass --checkpoint.')
  return checkpoint_path


def export_checkpoint(serving, checkpoint_path=None):
  """Exports a checkpoint to `<model_dir>/export/<timestamp>/` (--mode=export).

  Args:
    serving: a `Serving`.
    checkpoint_path: optional checkpoint; default the latest in model_dir.

  Returns:
    str, the SavedModel directory.

  Raises:
    validation.MissingFileError: model_dir holds no checkpoint and none was
      given.
  """
  estimator = _ExportsWrittenWhole(serving.estimator)
  checkpoint_path = checkpoint_to_export(estimator, checkpoint_path)
  metadata = write_metadata(_metadata_path(estimator.model_dir),
                            serving.dataset, serving.preprocessing)
  export_dir = estimator.export_saved_model(
      os.path.join(estimator.model_dir, EXPORT_DIR), serving.receiver_fn,
      assets_extra={METADATA_FILE: metadata},
      checkpoint_path=checkpoint_path).decode('utf-8')
  tf.compat.v1.logging.info('Exported %s to %s.', checkpoint_path, export_dir)
  return export_dir


class SavedModelExporter(tf.estimator.Exporter):
  """`LatestExporter` with this package's receiver, metadata and estimator.

  Writes `<model_dir>/export/<name>/<timestamp>/` and keeps the newest
  `exports_to_keep` there.
  """

  def __init__(self, name, serving, exports_to_keep):
    """Initializes the exporter.

    Args:
      name: str, the export folder's name.
      serving: a `Serving`.
      exports_to_keep: int, newest exports kept in the folder.
    """
    self._serving = serving
    self._metadata = _metadata_path(serving.estimator.model_dir)
    self._exporter = tf.estimator.LatestExporter(
        name, serving.receiver_fn,
        assets_extra={METADATA_FILE: self._metadata},
        exports_to_keep=exports_to_keep)

  @property
  def name(self):
    return self._exporter.name

  def export(self, estimator, export_path, checkpoint_path, eval_result,
             is_the_final_export):
    # Written here, not at construction: the evaluator that exports may run
    # on another machine than the one that built the EvalSpec.
    del estimator  # The training one; the serving estimator exports.
    write_metadata(self._metadata, self._serving.dataset,
                   self._serving.preprocessing)
    return self._exporter.export(
        _ExportsWrittenWhole(self._serving.estimator), export_path,
        checkpoint_path, eval_result, is_the_final_export)


@gin.configurable(denylist=['serving'])
def make_exporters(serving, latest=True, exports_to_keep=2):
  """The EvalSpec exporters of train_and_eval.

  Args:
    serving: a `Serving`.
    latest: bool, export after every evaluation to export/latest/.
    exports_to_keep: int, newest exports kept in export/latest/.

  Returns:
    A list of `tf.estimator.Exporter`.
  """
  if not latest:
    return []
  return [SavedModelExporter('latest', serving, exports_to_keep)]


@gin.configurable(denylist=['serving'])
def export_best(serving, enabled=True, exports_to_keep=2):
  """Exports the checkpoint best/ keeps to `<model_dir>/export/best/`.

  The experiment calls it each time best/ takes a new checkpoint, in every
  mode that evaluates, so the newest export there is always the checkpoint
  best/best.json names (exported from best/'s copy).

  Args:
    serving: a `Serving`.
    enabled: bool; False exports nothing.
    exports_to_keep: int, newest exports kept in export/best/.

  Returns:
    str, the SavedModel directory, or None when disabled or before any best.
  """
  if not enabled:
    return None
  model_dir = serving.estimator.model_dir
  best = best_checkpoint.read_best(model_dir)
  if not best:
    return None
  exporter = SavedModelExporter('best', serving, exports_to_keep)
  export_dir = exporter.export(
      serving.estimator, os.path.join(model_dir, EXPORT_DIR, exporter.name),
      best['checkpoint'], eval_result=None, is_the_final_export=False)
  return export_dir.decode('utf-8')
