"""Parser: turns decoded examples into model inputs, with DeepLab's augmentation."""

import gin
import tensorflow as tf
from official.vision.ops import preprocess_ops


def random_scale_factor(min_scale, max_scale, step_size, seed=None):
  """Draws a scale factor the way DeepLab does.

  Args:
    min_scale: float, smallest factor.
    max_scale: float, largest factor.
    step_size: float; 0 draws uniformly from [min_scale, max_scale], otherwise
      from the discrete set min_scale, min_scale + step_size, ..., max_scale.
    seed: optional int, op seed.

  Returns:
    A scalar float32 tensor.
  """
  if min_scale == max_scale:
    return tf.constant(float(min_scale))
  if step_size == 0:
    return tf.random.uniform([], min_scale, max_scale, seed=seed)
  num_steps = int(round((max_scale - min_scale) / step_size)) + 1
  index = tf.random.uniform([], 0, num_steps, dtype=tf.int32, seed=seed)
  return min_scale + tf.cast(index, tf.float32) * step_size


def scale_image_and_label(image, label, scale):
  """Resizes image (bilinear) and label (nearest) by `scale`.

  Args:
    image: float32 [H, W, 3].
    label: int32 [H, W, 1].
    scale: scalar float32.

  Returns:
    (image float32 [H', W', 3], label int32 [H', W', 1]).
  """
  size = tf.cast(tf.shape(image)[:2], tf.float32) * scale
  size = tf.cast(tf.round(size), tf.int32)
  image = tf.image.resize(image, size, method='bilinear')
  label = tf.image.resize(label, size, method='nearest')
  return image, label


def pad_to_size(image, label, height, width, ignore_label):
  """Pads at the bottom and right up to (height, width).

  The image is already normalized, so padding it with 0 is padding with the
  mean pixel, as DeepLab does; the label is padded with `ignore_label` so that
  padding never counts in the loss or in any metric.

  Args:
    image: float32 [h, w, 3], normalized.
    label: int32 [h, w, 1].
    height: scalar int, target height, at least h.
    width: scalar int, target width, at least w.
    ignore_label: int.

  Returns:
    (image float32 [height, width, 3], label int32 [height, width, 1]).
  """
  shape = tf.shape(image)
  paddings = [[0, height - shape[0]], [0, width - shape[1]], [0, 0]]
  image = tf.pad(image, paddings)
  label = tf.pad(label, paddings, constant_values=ignore_label)
  return image, label


def random_crop_and_flip(image, label, crop_height, crop_width, flip):
  """Crops image and label at one random offset, then maybe flips both.

  Args:
    image: float32 [H, W, 3] with H >= crop_height and W >= crop_width.
    label: int32 [H, W, 1].
    crop_height: int.
    crop_width: int.
    flip: bool, flip left-right with probability 0.5.

  Returns:
    (image float32 [crop_height, crop_width, 3],
     label int32 [crop_height, crop_width, 1]).
  """
  # Cropping and flipping one stacked tensor keeps image and label aligned;
  # label values (< 2**24) are exact in float32.
  stacked = tf.concat([image, tf.cast(label, tf.float32)], axis=-1)
  stacked = tf.image.random_crop(stacked, [crop_height, crop_width, 4])
  if flip:
    stacked, _, _ = preprocess_ops.random_horizontal_flip(stacked, seed=None)
  return stacked[..., :3], tf.cast(stacked[..., 3:], tf.int32)


@gin.configurable(denylist=['is_training'])
class Parser:
  """Parses decoded examples into (features, labels) for training or eval."""

  def __init__(self,
               is_training,
               crop_size=gin.REQUIRED,
               ignore_label=gin.REQUIRED,
               min_scale_factor=1.0,
               max_scale_factor=1.0,
               scale_factor_step_size=0.0,
               random_flip=True,
               mean_rgb=preprocess_ops.MEAN_RGB,
               stddev_rgb=preprocess_ops.STDDEV_RGB):
    """Initializes the parser.

    Args:
      is_training: bool, whether to augment and crop (train) or pad (eval).
      crop_size: (height, width) of the model input. For evaluation it must be
        at least as large as every image of the split.
      ignore_label: int, the label value that counts nowhere.
      min_scale_factor: float, smallest random scale (training only).
      max_scale_factor: float, largest random scale (training only).
      scale_factor_step_size: float, step between scales; 0 is continuous.
      random_flip: bool, random left-right flip (training only).
      mean_rgb: per-channel mean subtracted from the image, in [0, 255].
      stddev_rgb: per-channel scale the image is divided by, in [0, 255].

    Raises:
      ValueError: when the scale range is empty.
    """
    if min_scale_factor > max_scale_factor:
      raise ValueError(
          f'Parser.min_scale_factor ({min_scale_factor}) is larger than '
          f'Parser.max_scale_factor ({max_scale_factor}).')
    self._is_training = is_training
    self._crop_size = tuple(int(s) for s in crop_size)
    self._ignore_label = ignore_label
    self._scales = (min_scale_factor, max_scale_factor, scale_factor_step_size)
    self._random_flip = random_flip
    self._mean_rgb = mean_rgb
    self._stddev_rgb = stddev_rgb

  def __call__(self, decoded):
    """Maps a decoded example (see `tfexample.Decoder`) to (features, labels).

    Args:
      decoded: dict from `Decoder.decode`.

    Returns:
      features: dict with 'image' float32 [crop_h, crop_w, 3], 'height' and
        'width' int32 scalars (the size before padding), 'valid' float32
        scalar (1 for a real example; batch padding uses 0).
      labels: int32 [crop_h, crop_w, 1].
    """
    image = preprocess_ops.normalize_scaled_float_image(
        tf.cast(decoded['image'], tf.float32), self._mean_rgb, self._stddev_rgb)
    label = tf.cast(decoded['label'], tf.int32)
    if self._is_training:
      image, label = self._augment(image, label)
    else:
      image, label = self._pad_for_eval(image, label, decoded['filename'])
    image.set_shape(self._crop_size + (3,))
    label.set_shape(self._crop_size + (1,))
    features = {
        'image': image,
        'height': decoded['height'],
        'width': decoded['width'],
        'valid': tf.constant(1.0),
    }
    return features, label

  def _augment(self, image, label):
    crop_height, crop_width = self._crop_size
    scale = random_scale_factor(*self._scales)
    image, label = scale_image_and_label(image, label, scale)
    shape = tf.shape(image)
    image, label = pad_to_size(
        image, label, tf.maximum(crop_height, shape[0]),
        tf.maximum(crop_width, shape[1]), self._ignore_label)
    return random_crop_and_flip(image, label, crop_height, crop_width,
                                self._random_flip)

  def _pad_for_eval(self, image, label, filename):
    crop_height, crop_width = self._crop_size
    shape = tf.shape(image)
    fits = tf.logical_and(shape[0] <= crop_height, shape[1] <= crop_width)
    check = tf.debugging.Assert(fits, [
        'Image', filename, 'of size', shape[:2],
        'is larger than the eval crop size', self._crop_size,
        '; set eval/Parser.crop_size (EVAL_CROP_SIZE) to at least its size.'])
    with tf.control_dependencies([check]):
      return pad_to_size(image, label, crop_height, crop_width,
                         self._ignore_label)
