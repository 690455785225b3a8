"""qat_int8: a quantization-aware checkpoint, rebuilt eagerly, as a full-integer .tflite."""

import tensorflow as tf

from official_seg.export import tflite_runner
from official_seg.modeling import inference
from official_seg.modeling import quantized

# Why not the session route of the other kinds: from a TF1 session of the
# quantized graph the converter keeps batch norm in float32, and full-integer
# conversion fails on the quantized ASPP's resize ("same scale constraint").
# A concrete function of the same Keras model, executing eagerly, is what
# Model Garden converts its QAT models from.


def restored_model(num_classes, input_size, checkpoint_path):
  """The quantized model with a checkpoint's weights, executing eagerly.

  Args:
    num_classes: int.
    input_size: (height, width) of the model input.
    checkpoint_path: a checkpoint of a quantization-aware training run.

  Returns:
    The Keras model; call returns {'logits': [B, h, w, C]}.
  """
  # Names first: Keras invalidates the layers made outside a graph before
  # a model is built in one.
  names = quantized.checkpoint_names(num_classes, input_size)
  model = quantized.from_template(
      quantized.template(num_classes, input_size), input_size)
  reader = tf.train.load_checkpoint(checkpoint_path)
  model.set_weights([reader.get_tensor(name) for name in names])
  return model


def convert(model, serving_inputs, input_size, probabilities,
            representative_dataset):
  """The full-integer .tflite of a restored quantized model.

  Args:
    model: from `restored_model`.
    serving_inputs: function (uint8 image [1, H, W, 3], int32 size [2]) ->
      float32 [1, H, W, 3]: the normalized, masked batch the export feeds
      every kind (`tflite.serving_inputs`).
    input_size: (H, W).
    probabilities: bool, also output the class probabilities.
    representative_dataset: the eval images; they calibrate what lies
      outside the fake-quant ranges (the normalization, the logits' resize).

  Returns:
    The .tflite's bytes, with the inputs and outputs `tflite_runner` reads.
  """
  height, width = input_size

  @tf.function(input_signature=[
      tf.TensorSpec([1, height, width, 3], tf.uint8,
                    name=tflite_runner.IMAGE_INPUT),
      tf.TensorSpec([2], tf.int32, name=tflite_runner.SIZE_INPUT)])
  def serve(image, size):
    images = serving_inputs(image, size)
    # The PREDICT spec's outputs (model_fn._predict_spec), eagerly.
    logits = model(images, training=False)['logits']
    scores = inference.predict_probabilities(model, images,
                                             base_logits=logits)
    outputs = {tflite_runner.SEMANTIC_OUTPUT: tf.argmax(
        scores, axis=-1, output_type=tf.int32)}
    if probabilities:
      outputs[tflite_runner.PROBABILITIES_OUTPUT] = scores
    return outputs

  converter = tf.lite.TFLiteConverter.from_concrete_functions(
      [serve.get_concrete_function()], model)
  converter.optimizations = [tf.lite.Optimize.DEFAULT]
  # By input name: the converter may order a function's inputs otherwise.
  converter.representative_dataset = lambda: (
      {tflite_runner.IMAGE_INPUT: image, tflite_runner.SIZE_INPUT: size}
      for image, size in representative_dataset())
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
  return converter.convert()
