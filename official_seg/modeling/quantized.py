"""Quantization-aware DeepLab: Model Garden's QAT model, built eagerly once, rebuilt in each graph."""

import concurrent.futures
import copy
import dataclasses
import functools
import json
import warnings

import numpy as np
import tensorflow as tf
from official.vision.modeling import backbones
from official.vision.modeling import decoders
# The public API cannot execute eagerly with a graph of one's own as the
# default graph (see _build_template).
from tensorflow.python.eager import context  # pylint: disable=g-direct-tensorflow-import

from official_seg import validation
from official_seg.modeling import model as model_lib

# The custom objects Model Garden's factory quantizes under.
_SCOPE = {'L2': tf.keras.regularizers.l2}
# Each float weight is filled with its own tag before quantization, so the
# quantized weight that holds a tag is the one the factory copied it into.
# Far from every quantizer's initial value (0, 1, -1, +-6, ...); exact in
# float32.
_TAG_BASE = 10000.25
_UNQUANTIZABLE_FUSIONS = ('pyramid_fusion', 'panoptic_fpn_fusion')
# MobileNet variants whose depthwise separable blocks the QAT factory has no
# quantized form of.
_UNQUANTIZABLE_MOBILENETS = ('MobileNetV1',)
# Template per float model configuration, for the process's lifetime.
_TEMPLATES = {}


@functools.cache
def _model_optimization():
  """tensorflow-model-optimization and Model Garden's QAT project, once.

  Imported when the first quantized model is built, so that float runs and
  exports never load them. The import sets TF_USE_LEGACY_KERAS=1 for the
  rest of the process (and the processes it starts), and TensorFlow then
  resolves each Keras loader not yet used to tf_keras (the import itself
  uses `tf.compat.v1.keras`), while Model Garden's layers are Keras
  2.15's: a model mixing the two cannot be cloned by the QAT transforms.
  So the loaders are resolved, and checked to be one Keras, before it.

  Returns:
    (the `tensorflow_model_optimization` module, and Model Garden's
    `official.projects.qat.vision` `configs.common` and `modeling.factory`
    modules).

  Raises:
    ImportError: the loaders are already different Kerases.
  """
  layer = tf.keras.layers.Layer
  for loader in (tf.compat.v1.keras, tf.compat.v2.keras):
    if not issubclass(loader.layers.Layer, layer):
      raise ImportError(
          f'tf.compat Keras is {loader.layers.Layer.__module__}, tf.keras '
          f'{layer.__module__}: TF_USE_LEGACY_KERAS was set after this '
          'process first used Keras; quantization-aware models need one.')
  # pylint: disable=g-import-not-at-top
  import tensorflow_model_optimization as tfmot
  from official.projects.qat.vision.configs import common
  from official.projects.qat.vision.modeling import factory
  # pylint: enable=g-import-not-at-top
  return tfmot, common, factory


class QuantizationError(validation.ConfigurationError):
  """The model cannot be quantized; the message names the gin binding."""


@dataclasses.dataclass(frozen=True)
class Template:
  """The quantized model as Keras config, and where its weights come from.

  Attributes:
    config: the Keras functional config of the quantized model.
    sources: per quantized weight (in `model.weights` order), the index of
      the float model's weight the factory copied into it, or -1 for a
      weight quantization adds (ranges, step counters).
    float_names: the float model's weight names in its training graph
      (`float_variable_names`), which `sources` index.
  """

  config: dict
  sources: tuple
  float_names: tuple = ()


def check_quantizable(float_model):
  """Raises QuantizationError, naming the binding, for what QAT cannot take.

  Model Garden's QAT project quantizes MobileNet backbones, an ASPP decoder
  that outputs one tensor, and heads without pyramid fusions.
  """
  if not isinstance(float_model.backbone, backbones.MobileNet):
    raise QuantizationError(
        f'build_model.backbone builds a {type(float_model.backbone).__name__}'
        '; quantization-aware training (ModelFnOptions.quantize_delay_step) '
        "supports Model Garden's QAT backbones only: @backbones.MobileNet.")
  model_id = float_model.backbone.get_config()['model_id']
  if model_id in _UNQUANTIZABLE_MOBILENETS:
    raise QuantizationError(
        f'backbones.MobileNet.model_id = {model_id!r}: its blocks have no '
        'quantized form in tensorflow-model-optimization; use e.g. '
        "'MobileNetV2' or 'MobileNetV3Small'.")
  decoder = float_model.decoder
  if decoder is not None and not (
      isinstance(decoder, decoders.ASPP)
      and decoder.get_config()['output_tensor']):
    raise QuantizationError(
        'quantization-aware training needs build_model.decoder = '
        '@decoders.ASPP with decoders.ASPP.output_tensor = True (as '
        'gin/deployment/qat.gin sets).')
  fusion = float_model.head.get_config().get('feature_fusion')
  if fusion in _UNQUANTIZABLE_FUSIONS:
    raise QuantizationError(
        f'heads.SegmentationHead.feature_fusion = {fusion!r} is not '
        "supported by Model Garden's QAT head; use None or 'deeplabv3plus'.")


def _config_key(num_classes, float_model):
  parts = [num_classes] + [layer.get_config() for layer in
                           (float_model.backbone, float_model.decoder,
                            float_model.head) if layer is not None]
  # Regularizers and initializers are keyed by their own configs.
  return json.dumps(parts, sort_keys=True, default=lambda obj: [
      type(obj).__name__, getattr(obj, 'get_config', dict)()])


def _sources(float_weights, quantized_weights):
  """Index of the float weight each quantized weight holds, or -1."""
  shapes = [tuple(w.shape) for w in float_weights]
  sources = []
  for weight in quantized_weights:
    value = weight.numpy()
    index = int(round(float(value.flat[0]) - _TAG_BASE)) if value.size else -1
    if not (0 <= index < len(shapes) and shapes[index] == value.shape
            and np.all(value == _TAG_BASE + index)):
      index = -1
    sources.append(index)
  missing = sorted(set(range(len(shapes))) - set(sources))
  if missing:
    raise QuantizationError(
        'The quantized model does not carry over float weights '
        f'{[float_weights[i].name for i in missing[:3]]}; check the '
        'build_model bindings against gin/deployment/qat.gin.')
  return tuple(sources)


def _with_model_garden_aspp(float_model):
  """The model, its decoder rebuilt as the Model Garden's own ASPP class.

  The QAT factory's transforms find the ASPP by its registered Keras name;
  `modeling.aspp.ASPP` (bound as `decoders.ASPP`) is a subclass with the
  same variables and function, which they do not recognise.
  """
  decoder = float_model.decoder
  if decoder is None or type(decoder) is decoders.ASPP:  # pylint: disable=unidiomatic-typecheck
    return float_model
  config = decoder.get_config()
  config.pop('drop_padding_taps', None)
  return model_lib.SegmentationModel(float_model.backbone,
                                     decoders.ASPP.from_config(config),
                                     float_model.head)


# Model Garden's QAT factory and Keras's from_config call tfmot's layers many
# times over: AutoGraph would convert each call, and their code needs none of
# its conversions (the same graph ops are built without it).
@tf.autograph.experimental.do_not_convert
def _build_template(build_model, num_classes, input_size):
  """Runs eagerly: the float model, quantized by Model Garden's factory.

  Keras names each layer made without a name by counting those made before
  in the default graph, which for eager layers is the process's own: so
  the factory runs with a fresh graph as default (still eagerly), and the
  names, which the graphs built from the template give their variables,
  are the same whatever the process built before.

  Returns:
    (key, `Template` or None when `key` is already cached).
  """
  with tf.Graph().as_default(), context.eager_mode():
    float_model = build_model(num_classes=num_classes)
    check_quantizable(float_model)
    key = _config_key(num_classes, float_model)
    if key in _TEMPLATES:
      return key, None
    return key, _quantized(_with_model_garden_aspp(float_model), input_size)


def _quantized(float_model, input_size):
  """The `Template` of a float model, from Model Garden's factory."""
  float_model(tf.zeros([1, *input_size, 3]))
  for index, weight in enumerate(float_model.weights):
    weight.assign(tf.fill(weight.shape, _TAG_BASE + index))
  spec = tf.keras.layers.InputSpec(shape=[None, *input_size, 3])
  _, common, factory = _model_optimization()
  # What `check_quantizable` lets through, the factory is expected to take:
  # an error of its own here is a bug and keeps its traceback.
  quantized = factory.build_qat_segmentation_model(
      float_model, common.Quantization(), spec)
  return Template(quantized.get_config(),
                  _sources(float_model.weights, quantized.weights))


def template(build_model, num_classes, input_size):
  """The `Template` of a model builder's model, built once per process.

  Model Garden's QAT transforms call `compute_output_shape`, which Keras
  layers built in a graph (Estimator's model_fn) implement only when
  executing eagerly, and `tf.init_scope` under Estimator's graph stays in
  graph mode. A thread of its own starts eager (graph and execution mode
  are per thread), so the factory runs there, wherever this is called.

  Args:
    build_model: build_model(num_classes=...) -> the float model
      (`Components.model`).
    num_classes: int.
    input_size: (height, width) to build at; the template serves any size.

  Returns:
    A `Template`.

  Raises:
    QuantizationError: the model cannot be quantized.
  """
  with concurrent.futures.ThreadPoolExecutor(1) as pool:
    key, built = pool.submit(_build_template, build_model, num_classes,
                             tuple(input_size)).result()
  if built is not None:
    # Named here, in the caller's thread, once per model: each name costs a
    # float model's build.
    _TEMPLATES[key] = dataclasses.replace(
        built, float_names=tuple(float_variable_names(build_model,
                                                      num_classes)))
  return _TEMPLATES[key]


def float_variable_names(build_model, num_classes):
  """The float model's weight names, as its own training graph names them.

  Built in a graph of its own, as Estimator builds the float model_fn's.
  """
  with tf.Graph().as_default():
    float_model = build_model(num_classes=num_classes)
    float_model(tf.compat.v1.placeholder(tf.float32, [1, None, None, 3]))
    return [weight.name.split(':')[0] for weight in float_model.weights]


def _without_build_configs(config):
  """A copy without the layers' recorded input shapes.

  Keras records each layer's build input shape in its config; the quantized
  head's and ASPP's fixed resizes would keep the template's size. Without
  them each layer builds at the shapes it is called on.
  """
  if isinstance(config, dict):
    return {key: _without_build_configs(value)
            for key, value in config.items() if key != 'build_config'}
  if isinstance(config, list):
    return [_without_build_configs(value) for value in config]
  return copy.deepcopy(config)


def from_template(built, input_size):
  """The quantized model of a `Template` at a static (height, width).

  Built in the current graph, or as eager variables when executing eagerly
  (the TFLite export of qat_int8); the weights keep the template's order.
  """
  config = _without_build_configs(built.config)
  config['layers'][0]['config']['batch_input_shape'] = [None, *input_size, 3]
  tfmot, _, _ = _model_optimization()
  # Keras calls every layer once to rebuild the functional graph, with the
  # learning phase as `training`: left a placeholder, each quantizer and
  # batch norm builds both branches of a tf.cond, most of the rebuild's
  # time and ops. That graph is never run (the model_fn and the exports
  # call the model with `training` given), so it is built in inference
  # mode; Keras keeps no learning phase it passed in the layers' nodes.
  # As model.py's `_construct_backbone` does for the float backbones.
  with warnings.catch_warnings(), \
      tfmot.quantization.keras.quantize_scope(_SCOPE):
    warnings.filterwarnings('ignore', message='.*learning_phase_scope')
    with tf.keras.backend.learning_phase_scope(0):
      return tf.autograph.experimental.do_not_convert(
          tf.keras.Model.from_config)(config)


def build_quantized_model(build_model, num_classes, input_size):
  """The quantized model, built in the current graph at a static size.

  Args:
    build_model: build_model(num_classes=...) -> the float model
      (`Components.model`).
    num_classes: int.
    input_size: (height, width) ints: the images' static size (the QAT
      ASPP and head resize to shapes fixed when they are built).

  Returns:
    A Keras functional model whose call returns {'logits': [B, h, w, C]};
    attributes `checkpoint_items` (backbone, decoder, head layers, for the
    warm start) and `checkpoint_names` (quantized weight name to the float
    checkpoint's name of the weight it starts from).

  Raises:
    QuantizationError: the model cannot be quantized, or a size is unknown.
  """
  if None in tuple(input_size):
    raise QuantizationError(
        f'quantization-aware models need images of a static size, got '
        f'{tuple(input_size)}: set tflite_export.input_size or the crop '
        'sizes (CROP_SIZE, EVAL_CROP_SIZE).')
  built = template(build_model, num_classes, input_size)
  model = from_template(built, input_size)
  quantized_names = [weight.name.split(':')[0] for weight in model.weights]
  names = built.float_names
  model.checkpoint_names = {
      name: names[source]
      for name, source in zip(quantized_names, built.sources) if source >= 0}
  # Input, backbone, then the quantized ASPP (if any) and head, in the
  # factory's order.
  modules = model.layers[1:]
  model.checkpoint_items = dict(zip(
      ('backbone', 'decoder', 'head') if len(modules) == 3
      else ('backbone', 'head'), modules))
  return model

