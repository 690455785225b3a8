"""SavedModel export: the serving receiver, --mode=export, and exporters."""

import collections
import json
import os
import tempfile

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.data import storage
from official_seg.evaluation import best_checkpoint
from official_seg.export import serving_images
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


def serving_input_receiver_fn(parser, static_size=False):
  """The serving input receiver fn; it preprocesses with the eval parser.

  Signatures (see `signatures`): `serving_default` and `probabilities` take
  'images' string [B] of encoded JPEG or PNG, preprocessed by the eval
  parser itself (of the dataset's bit depth, IMAGE_BIT_DEPTH);
  `image_tensor:probabilities` takes 'images' float32 [B, H, W, C] of the
  dataset's channels (IMAGE_CHANNELS), values as stored ([0, 255], or
  [0, 65535] at 16 bits), normalized by the eval parser and run as they
  are (no padding or resize).

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
    channels = parser.image_channels
    pixels = tf.compat.v1.placeholder_with_default(
        tf.zeros([0, 0, 0, channels]), [None, None, None, channels],
        name=signatures.IMAGE_TENSOR)
    images, sizes, original_sizes = tf.cond(
        tf.shape(pixels)[0] > 0,
        lambda: serving_images.pixels_features(pixels, parser),
        lambda: serving_images.decode_images(encoded, parser))
    images.set_shape([None, None, None, channels])
    if static_size:
      images = serving_images.padded_to_crop(images, sizes, parser.crop_size)
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
    `path`, holding 'class_names', 'num_classes', 'ignore_label',
    'palette' (`DatasetInfo.palette`: null, a palette name or colours),
    'image_channels' and 'image_bit_depth'.
  """
  payload = {'class_names': list(dataset.class_names),
             'num_classes': dataset.num_classes,
             'ignore_label': dataset.ignore_label,
             'palette': dataset.palette,
             'image_channels': dataset.image_channels,
             'image_bit_depth': dataset.image_bit_depth, **(extra or {})}
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
