"""SavedModel signatures: their names and the PREDICT spec's export outputs."""

import tensorflow as tf

from official_seg.evaluation import calibration

# The one input of every signature.
INPUT_KEY = 'images'
# Estimator names a signature after its export output key, and the
# signatures of a receiver alternative '<alternative>:<export output key>'
# (export_lib.build_all_signature_defs). Encoded images in, label maps out:
SERVING_DEFAULT = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY
# Encoded images in, logits and probabilities of the padded batch out:
PROBABILITIES = 'probabilities'
# The receiver alternative that takes float pixels instead of encoded images,
# and its signature (float pixels in, logits and probabilities out):
IMAGE_TENSOR = 'image_tensor'
IMAGE_TENSOR_PROBABILITIES = f'{IMAGE_TENSOR}:{PROBABILITIES}'
# Features only the serving receiver gives: each image's decoded size.
ORIGINAL_HEIGHT = 'original_height'
ORIGINAL_WIDTH = 'original_width'
# The `PROBABILITIES` outputs that place each image in the batch: its decoded
# size, and its size inside the model input (the same unless the eval Parser
# resizes); with them the label maps of `SERVING_DEFAULT` can be cut from
# probabilities computed elsewhere (an ensemble's mean).
SIZE_OUTPUTS = ('height', 'width', 'input_height', 'input_width')
# The label of pixels beyond an image in the batch's label maps.
PAD_LABEL = -1


def labels_at_original_size(semantic, sizes, original_sizes):
  """Cuts each image's labels out of the padded batch, at its decoded size.

  Args:
    semantic: int32 [B, H, W], class ids of the padded model input.
    sizes: int32 [B, 2], (height, width) of each image inside the model
      input: its decoded size, or the size the eval Parser resized it to.
    original_sizes: int32 [B, 2], (height, width) of each decoded image.

  Returns:
    int32 [B, max height, max width] over `original_sizes`: image i's class
    ids at its decoded size in the top-left corner, `PAD_LABEL` beyond it.
  """
  return _at_original_size(semantic, sizes, original_sizes, PAD_LABEL)


def maps_at_original_size(maps, sizes, original_sizes):
  """`labels_at_original_size` of float maps (confidence), padded with 0."""
  return _at_original_size(maps, sizes, original_sizes, 0.0)


def _at_original_size(maps, sizes, original_sizes, pad_value):
  """Per-pixel maps [B, H, W] cut and resized back, padded with `pad_value`."""
  max_size = tf.reduce_max(original_sizes, axis=0)

  def one_image(args):
    values, size, original = args
    values = values[:size[0], :size[1], None]
    # DeepLab's export resizes labels back with nearest neighbours and
    # aligned corners; at the same size this is the identity.
    values = tf.compat.v1.image.resize_nearest_neighbor(
        values[None], original, align_corners=True)[0, :, :, 0]
    padding = tf.stack([[0, max_size[0] - original[0]],
                        [0, max_size[1] - original[1]]])
    return tf.pad(values, padding, constant_values=pad_value)

  return tf.map_fn(one_image, (maps, sizes, original_sizes),
                   fn_output_signature=maps.dtype)


def export_outputs(predictions, logits, features):
  """The export outputs of the PREDICT spec, when the serving receiver built it.

  Outputs (B images, model input [B, H, W, 3], C classes):
  - `SERVING_DEFAULT`: 'semantic' int32 [B, max height, max width] (see
    `labels_at_original_size`), 'height' and 'width' int32 [B], each image's
    decoded size; 'confidence' (the top probability) and 'entropy' (of the
    probabilities, in nats) float32 [B, max height, max width], 0 beyond
    each image (`uncertainty_outputs`).
    The sigmoid output kind (`OutputKind`) serves, instead of 'confidence'
    and 'entropy', 'masks' int32 [B, max height, max width, C], 1 where a
    class's probability exceeds its threshold, and 'class_probabilities'
    float32 of that shape, each class's sigmoid; 0 beyond each image; its
    'semantic' is the masks' bit mask, sum of 2**c over the classes c.
  - `PROBABILITIES`: 'logits' float32 [B, H, W, C] of the single-scale pass,
    bilinearly resized to the input (with sliding windows, the log of the
    blended probabilities), 'probabilities' float32 [B, H, W, C],
    averaged over the gin-bound scales and flips (and blended windows), and
    `SIZE_OUTPUTS`, int32 [B]: 'height' and 'width' as above,
    'input_height' and 'input_width' each image's size inside the input.

  Args:
    predictions: the PREDICT spec's dict with 'semantic' int32 [B, H, W] and
      'probabilities' float32 [B, H, W, C]; the sigmoid kind's also 'masks'
      int32 [B, H, W, C].
    logits: float32 [B, H, W, C], `inference.predict_probabilities`'s
      logits at the input size.
    features: the model_fn features; the serving receiver adds
      `ORIGINAL_HEIGHT` and `ORIGINAL_WIDTH` (int32 [B]).

  Returns:
    A dict of signature key to `tf.estimator.export.PredictOutput`, or None
    for features of an input_fn (Estimator.predict), which export nothing.
  """
  if ORIGINAL_HEIGHT not in features:
    return None
  sizes = tf.stack([features['height'], features['width']], axis=1)
  original_sizes = tf.stack(
      [features[ORIGINAL_HEIGHT], features[ORIGINAL_WIDTH]], axis=1)
  labels = labels_at_original_size(predictions['semantic'], sizes,
                                   original_sizes)
  if 'masks' in predictions:
    maps = class_outputs(predictions, sizes, original_sizes)
  else:
    maps = uncertainty_outputs(predictions['probabilities'], sizes,
                               original_sizes)
  return {
      SERVING_DEFAULT: tf.estimator.export.PredictOutput(dict({
          'semantic': labels,
          'height': features[ORIGINAL_HEIGHT],
          'width': features[ORIGINAL_WIDTH],
      }, **maps)),
      PROBABILITIES: tf.estimator.export.PredictOutput({
          'logits': logits,
          'probabilities': predictions['probabilities'],
          'height': features[ORIGINAL_HEIGHT],
          'width': features[ORIGINAL_WIDTH],
          'input_height': features['height'],
          'input_width': features['width'],
      }),
  }


def uncertainty_outputs(probabilities, sizes, original_sizes):
  """'confidence' and 'entropy' (nats) of each pixel, at each decoded size.

  Args:
    probabilities: float32 [B, H, W, C] of the padded model input.
    sizes: int32 [B, 2], each image's size inside the model input.
    original_sizes: int32 [B, 2], each decoded image's size.

  Returns:
    dict of float32 [B, max height, max width] (`maps_at_original_size`).
  """
  return {name: maps_at_original_size(fn(probabilities), sizes,
                                      original_sizes)
          for name, fn in (('confidence', calibration.confidence),
                           ('entropy', calibration.entropy))}


def class_outputs(predictions, sizes, original_sizes):
  """The sigmoid kind's 'masks' and 'class_probabilities' at each decoded size.

  Args:
    predictions: dict with 'masks' int32 and 'probabilities' float32, each
      [B, H, W, C] of the padded model input.
    sizes: int32 [B, 2], each image's size inside the model input.
    original_sizes: int32 [B, 2], each decoded image's size.

  Returns:
    dict of [B, max height, max width, C], 0 beyond each image.
  """
  def per_class(maps):
    zero = tf.zeros([], maps.dtype)
    return tf.stack([_at_original_size(maps[..., c], sizes, original_sizes,
                                       zero)
                     for c in range(maps.shape[-1])], -1)

  return {'masks': per_class(predictions['masks']),
          'class_probabilities': per_class(predictions['probabilities'])}
