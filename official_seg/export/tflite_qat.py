"""qat_int8: a quantization-aware checkpoint, rebuilt eagerly, as a full-integer .tflite."""

import dataclasses
from typing import Callable, Optional

import tensorflow as tf

from official_seg.export import tflite_runner
from official_seg.modeling import inference
from official_seg.modeling import quantized
from official_seg.training import averaging

# Why not the session route of the other kinds: from a TF1 session of the
# quantized graph the converter keeps batch norm in float32, and full-integer
# conversion fails on the quantized ASPP's resize ("same scale constraint").
# A concrete function of the same Keras model, executing eagerly, is what
# Model Garden converts its QAT models from.


@dataclasses.dataclass(frozen=True)
class QatSource:
  """What the qat_int8 kind rebuilds a quantization-aware run's model with.

  Attributes:
    build_model: the float model's builder (`Components.model`).
    inference: the run's `inference.InferenceOptions`.
    moving_average_decay: the run's `ModelFnOptions.moving_average_decay`;
      when set, the trainable weights are their moving averages, as in
      evaluation and the SavedModel.
  """

  build_model: Callable
  inference: inference.InferenceOptions
  moving_average_decay: Optional[float] = None


def _restored_weights(source, num_classes, input_size, checkpoint_path):
  """The quantized model's weight values, restored as evaluation restores them.

  The model is built in a graph of its own, as Estimator builds each mode's,
  so its variables carry the checkpoint's names; the Saver is the model_fn's
  (`averaging.restore_scaffold_fn`), which loads the moving averages in
  place of the trainable weights when training kept them.
  """
  with tf.Graph().as_default():
    model = quantized.build_quantized_model(source.build_model, num_classes,
                                            input_size)
    scaffold_fn = averaging.restore_scaffold_fn(model.trainable_variables,
                                                source.moving_average_decay)
    saver = (scaffold_fn().saver if scaffold_fn
             else tf.compat.v1.train.Saver(model.weights))
    with tf.compat.v1.Session() as session:
      saver.restore(session, checkpoint_path)
      return session.run(model.weights)


def restored_model(source, num_classes, input_size, checkpoint_path):
  """The quantized model with the weights evaluation ran, executing eagerly.

  Args:
    source: a `QatSource`.
    num_classes: int.
    input_size: (height, width) of the model input.
    checkpoint_path: a checkpoint of a quantization-aware training run.

  Returns:
    The Keras model; call returns {'logits': [B, h, w, C]}.
  """
  # The graph first: Keras invalidates the layers made outside a graph
  # before a model is built in one.
  values = _restored_weights(source, num_classes, input_size,
                             checkpoint_path)
  model = quantized.from_template(
      quantized.template(source.build_model, num_classes, input_size),
      input_size)
  model.set_weights(values)
  return model


def convert(model, options, serving_inputs, input_size, probabilities,
            representative_dataset, image_dtype=tf.uint8, channels=3):
  """The full-integer .tflite of a restored quantized model.

  Args:
    model: from `restored_model`.
    options: the run's `inference.InferenceOptions`.
    serving_inputs: function (image [1, H, W, C], int32 size [2]) ->
      float32 [1, H, W, C]: the normalized, masked batch the export feeds
      every kind (`tflite.serving_inputs`).
    input_size: (H, W).
    probabilities: bool, also output the class probabilities.
    representative_dataset: the eval images; they calibrate what lies
      outside the fake-quant ranges (the normalization, the logits' resize).
    image_dtype: the image input's type (`tflite_runner.input_dtype`).
    channels: int, its channels.

  Returns:
    The .tflite's bytes, with the inputs and outputs `tflite_runner` reads.
  """
  height, width = input_size

  @tf.function(input_signature=[
      tf.TensorSpec([1, height, width, channels], image_dtype,
                    name=tflite_runner.IMAGE_INPUT),
      tf.TensorSpec([2], tf.int32, name=tflite_runner.SIZE_INPUT)])
  def serve(image, size):
    images = serving_inputs(image, size)
    # The PREDICT spec's outputs (model_fn._predict_spec), eagerly.
    logits = model(images, training=False)['logits']
    scores = inference.predict_probabilities(model, images, options,
                                             base_logits=logits)
    outputs = {tflite_runner.SEMANTIC_OUTPUT: tf.argmax(
        scores, axis=-1, output_type=tf.int32)}
    if probabilities:
      outputs[tflite_runner.PROBABILITIES_OUTPUT] = scores
    return outputs

  # The converter saves the functions with the object it is given as a
  # SavedModel: a module of the variables alone, not the Keras model, whose
  # own serialization would trace the call of each of its layers.
  variables = tf.Module()
  variables.weights = model.weights
  converter = tf.lite.TFLiteConverter.from_concrete_functions(
      [serve.get_concrete_function()], variables)
  converter.optimizations = [tf.lite.Optimize.DEFAULT]
  # By input name: the converter may order a function's inputs otherwise.
  converter.representative_dataset = lambda: (
      {tflite_runner.IMAGE_INPUT: image, tflite_runner.SIZE_INPUT: size}
      for image, size in representative_dataset())
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
  return converter.convert()
