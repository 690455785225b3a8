"""TFLite export (--mode=export_tflite): the eval preprocessing and model, in five kinds."""

import os

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.data import storage
from official_seg.export import saved_model
from official_seg.export import tflite_qat
from official_seg.export import tflite_runner
from official_seg.export import tflite_scoring

TFLITE_DIR = 'tflite'
# float32: as trained. float16: weights stored in float16. dynamic_range:
# int8 weights, float activations. int8: full integer, calibrated on eval
# images. int8_per_tensor: int8 with one weight scale per kernel instead of
# per output channel. qat_int8: full integer, a quantization-aware trained
# model's own ranges (export/tflite_qat.py).
KINDS = ('float32', 'float16', 'dynamic_range', 'int8', 'int8_per_tensor',
         'qat_int8')
_CALIBRATED = ('int8', 'int8_per_tensor', 'qat_int8')


def tflite_path(model_dir, kind):
  """`<model_dir>/export/tflite/model_<kind>.tflite`."""
  return os.path.join(model_dir, saved_model.EXPORT_DIR, TFLITE_DIR,
                      f'model_{kind}.tflite')


class KindError(validation.ConfigurationError):
  """`tflite_export.kinds` asks for what cannot be exported; names it."""


def check_kinds(kinds, quantized):
  """Raises KindError, naming the binding, for kinds that cannot export.

  Args:
    kinds: the kinds asked for.
    quantized: bool, whether the checkpoint is of a quantization-aware
      trained graph.
  """
  if isinstance(kinds, str) or not kinds:
    raise KindError(f'tflite_export.kinds={kinds!r} must be a non-empty '
                     f'list of {KINDS}.')
  unknown = [kind for kind in kinds if kind not in KINDS]
  if unknown:
    raise KindError(f'tflite_export.kinds has unknown kinds {unknown}; '
                     f'expected some of {KINDS}.')
  if 'qat_int8' in kinds and not quantized:
    raise KindError(
        "tflite_export.kinds asks for 'qat_int8', but the model is not "
        'quantization-aware trained (ModelFnOptions.quantize_delay_step is '
        "None); use 'int8' for a float model.")


def serving_inputs(parser, image, size):
  """The model's batch of one: pixels [1, H, W, C] and (h, w) int32 [2].

  The eval parser normalizes the pixels (the same function evaluation and
  the SavedModel use) and those beyond (h, w) become 0, the normalized mean
  pixel that the eval parser pads with. Returns float32 [1, H, W, C].
  """
  height, width = image.shape[1:3]
  normalized = parser.normalize(tf.cast(image[0], tf.float32))
  inside = tf.logical_and(tf.range(height)[:, None] < size[0],
                          tf.range(width)[None, :] < size[1])
  return (normalized * tf.cast(inside, tf.float32)[:, :, None])[None]


def _serving_graph(estimator, parser, input_size, probabilities):
  """Builds the graph: image and size in (`serving_inputs`), class ids out.

  The image input has the eval parser's channels and the type of its depth
  (`tflite_runner.input_dtype`).

  Returns:
    (inputs [image, size], outputs [semantic (, probabilities)], saver).
  """
  # TFLite wants one static input shape; the 'size' input says where the
  # image lies in it, as the eval parser's padding does for a batch.
  height, width = input_size
  image = tf.compat.v1.placeholder(
      tflite_runner.input_dtype(parser.image_bit_depth),
      [1, height, width, parser.image_channels],
      name=tflite_runner.IMAGE_INPUT)
  size = tf.compat.v1.placeholder(tf.int32, [2],
                                  name=tflite_runner.SIZE_INPUT)
  features = {'image': serving_inputs(parser, image, size),
              'height': size[None, 0],
              'width': size[None, 1], 'valid': tf.ones([1])}
  spec = estimator.model_fn(features, None, tf.estimator.ModeKeys.PREDICT,
                            estimator.config)
  outputs = [tf.identity(spec.predictions['semantic'],
                         name=tflite_runner.SEMANTIC_OUTPUT)]
  if probabilities:
    outputs.append(tf.identity(spec.predictions['probabilities'],
                               name=tflite_runner.PROBABILITIES_OUTPUT))
  # The model_fn's own saver when it has one (it may restore other values
  # than the variables' own names say).
  saver = spec.scaffold.saver if spec.scaffold else None
  return [image, size], outputs, saver or tf.compat.v1.train.Saver()


def calibration_inputs(dataset, input_size, resize_range, limit):
  """The representative dataset of int8: eval-split images, as served.

  Each image goes through `tflite_runner.fit_image` and then the model's
  own eval preprocessing, never the training augmentation.

  Returns:
    A function of no arguments yielding [image [1, H, W, C] of the input's
    type, int32 [2]].
  """
  dtype = tflite_runner.input_dtype(dataset.image_bit_depth)
  # Read now, eagerly: the converter calls it inside the export's graph.
  samples = [list(tflite_runner.fit_image(image, input_size, resize_range,
                                          dtype))
             for _, image, _ in tflite_scoring.eval_examples(dataset, limit)]
  return lambda: iter(samples)


def _configure(converter, kind, representative_dataset):
  """Sets the converter's optimizations for `kind`."""
  if kind == 'float32':
    return
  converter.optimizations = [tf.lite.Optimize.DEFAULT]
  if kind == 'float16':
    converter.target_spec.supported_types = [tf.float16]
  elif kind in _CALIBRATED:
    converter.representative_dataset = representative_dataset
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    # TensorFlow 2.15's converter has no public switch for per-tensor
    # weights; this attribute is the one its quantizer reads.
    converter._experimental_disable_per_channel = kind == 'int8_per_tensor'  # pylint: disable=protected-access
  # dynamic_range: DEFAULT alone. qat_int8: see _convert_qat.


def _convert(session, inputs, outputs, kind, representative_dataset):
  converter = tf.compat.v1.lite.TFLiteConverter.from_session(
      session, inputs, outputs)
  _configure(converter, kind, representative_dataset)
  return converter.convert()


def _write(path, content):
  storage.write_whole(path, content)


def _write_kind(estimator, checkpoint_path, kind, convert):
  tf.compat.v1.logging.info('Converting %s to TFLite %s.', checkpoint_path,
                            kind)
  path = tflite_path(estimator.model_dir, kind)
  _write(path, convert(kind))
  tf.compat.v1.logging.info('Wrote %s.', path)
  return path


def _convert_qat(qat, num_classes, parser, input_size, checkpoint_path,
                 probabilities, representative):
  """qat_int8, converted eagerly (export/tflite_qat.py says why)."""
  model = tflite_qat.restored_model(qat, num_classes, input_size,
                                    checkpoint_path)
  return tflite_qat.convert(
      model, qat.inference,
      lambda image, size: serving_inputs(parser, image, size),
      input_size, probabilities, representative,
      image_dtype=tflite_runner.input_dtype(parser.image_bit_depth),
      channels=parser.image_channels)


@gin.configurable(denylist=['serving', 'parser', 'qat', 'checkpoint_path'])
def tflite_export(serving, parser, qat, checkpoint_path=None,
                  kinds=('float32',), input_size=None, probabilities=False,
                  calibration_images=100):
  """Writes `<model_dir>/export/tflite/model_<kind>.tflite` for each kind.

  Args:
    serving: a `saved_model.Serving`; its estimator's model_fn builds the
      model and its dataset gives the eval split and the metadata.
    parser: the eval `preprocess.Parser`: the model's input preprocessing.
    qat: a `tflite_qat.QatSource` when the checkpoint is of a
      quantization-aware trained graph, else None.
    checkpoint_path: optional checkpoint; default the latest in model_dir.
    kinds: some of `KINDS`.
    input_size: (height, width) of the model input; default the eval crop.
    probabilities: bool, also output the class probabilities.
    calibration_images: int, eval-split images that calibrate int8.

  Returns:
    A dict of kind to the path written.

  Raises:
    KindError: an unknown kind, or 'qat_int8' of a float model.
    validation.MissingFileError: model_dir holds no checkpoint and none was
      given.
  """
  check_kinds(kinds, qat is not None)
  estimator = serving.estimator
  checkpoint_path = saved_model.checkpoint_to_export(estimator,
                                                    checkpoint_path)
  input_size = tuple(int(v) for v in (input_size or parser.crop_size))
  representative = (calibration_inputs(serving.dataset, input_size,
                                       parser.resize_range, calibration_images)
                    if set(_CALIBRATED) & set(kinds) else None)
  written = {}
  session_kinds = [kind for kind in kinds if kind != 'qat_int8']
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    if session_kinds:
      inputs, outputs, saver = _serving_graph(estimator, parser, input_size,
                                              probabilities)
      saver.restore(session, checkpoint_path)
    for kind in session_kinds:
      written[kind] = _write_kind(estimator, checkpoint_path, kind, lambda k: (
          _convert(session, inputs, outputs, k, representative)))
  if 'qat_int8' in kinds:
    written['qat_int8'] = _write_kind(
        estimator, checkpoint_path, 'qat_int8', lambda _: _convert_qat(
            qat, serving.dataset.num_classes, parser, input_size,
            checkpoint_path, probabilities, representative))
  _write_metadata(estimator.model_dir, serving.dataset, checkpoint_path,
                  saved_model.preprocessing_metadata(parser))
  return written


def _write_metadata(model_dir, dataset, checkpoint_path, preprocessing):
  """segmentation.json beside the models: the dataset, step and resize."""
  path = os.path.join(os.path.dirname(tflite_path(model_dir, 'float32')),
                      tflite_runner.METADATA_FILE)
  reader = tf.train.load_checkpoint(checkpoint_path)
  step = (int(reader.get_tensor('global_step'))
          if reader.has_tensor('global_step') else None)
  return saved_model.write_metadata(
      path, dataset, {'checkpoint': checkpoint_path, 'global_step': step,
                      **preprocessing})


def frozen_serving_graph(estimator, parser, input_size, checkpoint_path):
  """The TFLite serving graph of a checkpoint, its variables as constants.

  The graph of `tflite_export`'s session kinds, with the 'probabilities'
  output: inputs `tflite_runner.IMAGE_INPUT` and `SIZE_INPUT`, outputs
  `SEMANTIC_OUTPUT` and `PROBABILITIES_OUTPUT`, so several can be imported
  into one graph (`tflite_ensemble`).

  Returns:
    A `tf.compat.v1.GraphDef`.
  """
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    _, outputs, saver = _serving_graph(estimator, parser, input_size,
                                       probabilities=True)
    saver.restore(session, checkpoint_path)
    return tf.compat.v1.graph_util.convert_variables_to_constants(
        session, session.graph.as_graph_def(),
        [output.op.name for output in outputs])


def configure_converter(converter, kind):
  """Sets a converter's optimizations for an uncalibrated kind (float32,
  float16, dynamic_range), as `tflite_export` does."""
  if kind in _CALIBRATED:
    raise ValueError(f'{kind} needs calibration images.')
  _configure(converter, kind, None)
