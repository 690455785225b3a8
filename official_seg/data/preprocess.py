"""Parser: turns decoded examples into model inputs, with DeepLab's augmentation."""

import gin
import tensorflow as tf
from official.vision.ops import preprocess_ops


def _random_uniform(minval, maxval, dtype, seed):
  """A scalar uniform draw: stateless with a seed, else from the op's state."""
  if seed is None:
    return tf.random.uniform([], minval, maxval, dtype=dtype)
  return tf.random.stateless_uniform([], seed, minval, maxval, dtype=dtype)


def _split_seed(seed, num):
  """Splits a stateless seed (a fresh one when None) into `num` seeds [2]."""
  if seed is None:
    seed = tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)
  return tf.unstack(tf.random.experimental.stateless_split(seed, num))


def random_scale_factor(min_scale, max_scale, step_size, seed=None):
  """Draws a scale factor the way DeepLab does.

  Args:
    min_scale: float, smallest factor.
    max_scale: float, largest factor.
    step_size: float; 0 draws uniformly from [min_scale, max_scale], otherwise
      from the discrete set min_scale, min_scale + step_size, ..., max_scale.
    seed: optional int32 or int64 [2], a stateless seed: the same seed draws
      the same factor. None draws a fresh one each time.

  Returns:
    A scalar float32 tensor.
  """
  if min_scale == max_scale:
    return tf.constant(float(min_scale))
  if step_size == 0:
    return _random_uniform(min_scale, max_scale, tf.float32, seed)
  num_steps = int(round((max_scale - min_scale) / step_size)) + 1
  index = _random_uniform(0, num_steps, tf.int32, seed)
  return min_scale + tf.cast(index, tf.float32) * step_size


def resize_to_range_size(height, width, min_size, max_size=None, factor=None):
  """The output size of DeepLab's `preprocess_utils.resize_to_range`.

  Written out because neither TensorFlow nor the Model Garden has this rule:
  scale so the shorter side is `min_size`, unless that makes the longer side
  exceed `max_size` (then the longer side is `max_size`, made
  `factor * k + 1`); finally round each side up to `factor * k + 1`.

  Args:
    height: scalar int, input height.
    width: scalar int, input width.
    min_size: int, target of the shorter side.
    max_size: optional int, bound of the longer side.
    factor: optional int; both output sides become `factor * k + 1`.

  Returns:
    int32 [2], the output (height, width).
  """
  size = tf.cast(tf.stack([height, width]), tf.float32)
  if max_size is not None and factor:
    max_size -= (max_size - 1) % factor
  # Scale factor first, then the product, in float32, as DeepLab computes it.
  new_size = tf.cast(tf.floor(size * (min_size / tf.reduce_min(size))),
                     tf.int32)
  if max_size is not None:
    small_size = tf.cast(tf.floor(size * (max_size / tf.reduce_max(size))),
                         tf.int32)
    new_size = tf.where(tf.reduce_max(new_size) > max_size, small_size,
                        new_size)
  if factor:
    new_size += (factor - (new_size - 1) % factor) % factor
  return new_size


def resize_to_range(image, label, min_size, max_size=None, factor=None):
  """Resizes image and label as DeepLab's `resize_to_range` does.

  Args:
    image: uint8 or float32 [H, W, 3].
    label: int32 [H, W, 1].
    min_size: int; see `resize_to_range_size`.
    max_size: optional int.
    factor: optional int.

  Returns:
    (image float32 [H', W', 3] bilinear, label int32 [H', W', 1] nearest),
    both with DeepLab's align_corners=True sampling.
  """
  shape = tf.shape(image)
  size = resize_to_range_size(shape[0], shape[1], min_size, max_size, factor)
  image = tf.compat.v1.image.resize_bilinear(image[None], size,
                                             align_corners=True)[0]
  label = tf.compat.v1.image.resize_nearest_neighbor(label[None], size,
                                                     align_corners=True)[0]
  return image, label


_BOX_MARGIN = 2.0**-14  # crop_box shrinks sampled spans by this fraction.


def random_crop_window(image_size, crop_size, flip, seed=None):
  """Draws DeepLab's random crop and flip of an image padded to crop_size.

  Args:
    image_size: int32 [2], (height, width) before padding (bottom, right).
    crop_size: (crop_height, crop_width) ints.
    flip: bool, flip left-right with probability 0.5.
    seed: optional int32 or int64 [2], a stateless seed: the same seed draws
      the same window. None draws a fresh one.

  Returns:
    (offset int32 [2], the crop's top-left pixel in the padded image, uniform
     over all valid offsets; flipped, bool scalar).
  """
  crop_seed, flip_seed = _split_seed(seed, 2)
  limit = tf.maximum(image_size, crop_size) - crop_size + 1
  # tf.image.stateless_random_crop's and stateless_random_flip_*'s draws.
  offset = tf.random.stateless_uniform(
      [2], crop_seed, maxval=tf.int32.max, dtype=tf.int32) % limit
  coin = _random_uniform(0.0, 1.0, tf.float32, flip_seed)
  return offset, tf.logical_and(flip, coin < 0.5)


def crop_box(image_size, offset, window_size, flipped):
  """The `tf.image.crop_and_resize` box of a window of a scaled image.

  crop_and_resize samples row i of an h-row crop of a source of height H at
  y1 (H - 1) + i (y2 - y1) (H - 1) / (h - 1). Scaling to height Hs with
  aligned corners puts scaled row p at source row p (H - 1) / (Hs - 1);
  window row i is scaled row offset + i. Equating both for all i:
  y1 = offset / (Hs - 1) and y2 = (offset + h - 1) / (Hs - 1), so box
  coordinates [0, 1] span the scaled image (Hs = 1 takes 1 / (Hs - 1) as 1).
  Columns alike; a flip swaps x1 and x2.

  Why aligned corners: DeepLab scales so (align_corners=True); half-pixel
  centres (tf.image.resize: (p + 0.5) H / Hs - 0.5) differ by at most
  |1 - H / Hs| / 2 source pixels and clamp at borders, which crop_and_resize
  cannot. Spans shrink by _BOX_MARGIN about their centre ((H - 1) / 32768
  pixels an end; exact nearest ties may round the other way) lest float32
  rounding put the first or last row outside [0, H - 1], into extrapolation.

  Args:
    image_size: int32 [2], (Hs, Ws), the scaled image size.
    offset: int32 [2], the window's top-left pixel in the scaled image.
    window_size: int32 [2], (h, w); the window lies inside the scaled image.
    flipped: bool scalar, mirror the window left-right.

  Returns:
    float32 [4], (y1, x1, y2, x2).
  """
  start = tf.cast(offset, tf.float32)
  end = start + tf.cast(window_size, tf.float32) - 1.0
  extent = tf.maximum(tf.cast(image_size, tf.float32) - 1.0, 1.0)
  start, end = [_BOX_MARGIN / 2 + t / extent * (1.0 - _BOX_MARGIN)
                for t in (start, end)]
  box = tf.stack([start[0], start[1], end[0], end[1]])
  return tf.gather(box, tf.where(flipped, [0, 3, 2, 1], [0, 1, 2, 3]))


def _normalize_rows(image, mean_rgb, stddev_rgb):
  """(image - mean_rgb) / stddev_rgb of a float32 [h, w, 3] image."""
  # Not preprocess_ops.normalize_scaled_float_image: TF's CPU kernels
  # broadcast its [1, 1, 3] operands about ten times slower than a [w * 3]
  # row over [h, w * 3] rows (2.3 and 0.2 ms at 513x513).
  shape = tf.shape(image)
  scale = tf.tile(1.0 / tf.constant(stddev_rgb, tf.float32), shape[1:2])
  shift = tf.tile(-tf.constant(mean_rgb, tf.float32), shape[1:2]) * scale
  rows = tf.reshape(image, [shape[0], -1]) * scale + shift
  return tf.reshape(rows, shape)


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


@gin.configurable(denylist=['is_training'])
class Parser:
  """Parses decoded examples into (features, labels) for training or eval."""

  def __init__(self,
               is_training,
               crop_size=gin.REQUIRED,
               ignore_label=gin.REQUIRED,
               num_classes=None,
               min_scale_factor=1.0,
               max_scale_factor=1.0,
               scale_factor_step_size=0.0,
               random_flip=True,
               min_resize_value=None,
               max_resize_value=None,
               resize_factor=None,
               mean_rgb=preprocess_ops.MEAN_RGB,
               stddev_rgb=preprocess_ops.STDDEV_RGB):
    """Initializes the parser.

    Args:
      is_training: bool, whether to augment and crop (train) or pad (eval).
      crop_size: (height, width) of the model input. For evaluation it must be
        at least as large as every image of the split.
      ignore_label: int, the label value that counts nowhere.
      num_classes: optional int; a label value that is neither below it nor
        `ignore_label` is an error naming the example. None skips the check.
      min_scale_factor: float, smallest random scale (training only).
      max_scale_factor: float, largest random scale (training only).
      scale_factor_step_size: float, step between scales; 0 is continuous.
      random_flip: bool, random left-right flip (training only).
      min_resize_value: optional int; resizes image and label, for training
        and evaluation alike, as DeepLab's `resize_to_range` does (see
        `resize_to_range_size`), so evaluation then measures at the resized
        resolution. None keeps the decoded size.
      max_resize_value: optional int, bound of the longer side after resize.
      resize_factor: optional int; resized sides become `factor * k + 1`.
      mean_rgb: per-channel mean subtracted from the image, in [0, 255].
      stddev_rgb: per-channel scale the image is divided by, in [0, 255].

    Raises:
      ValueError: when the scale range is empty, or a resize bound or factor
        is set without min_resize_value.
    """
    if min_scale_factor > max_scale_factor:
      raise ValueError(
          f'Parser.min_scale_factor ({min_scale_factor}) is larger than '
          f'Parser.max_scale_factor ({max_scale_factor}).')
    if min_resize_value is None and (max_resize_value or resize_factor):
      raise ValueError(
          'Parser.max_resize_value and Parser.resize_factor need '
          'Parser.min_resize_value; set it too (DeepLab sets both bounds).')
    self._resize = (min_resize_value, max_resize_value, resize_factor)
    self._is_training = is_training
    self._crop_size = tuple(int(s) for s in crop_size)
    self._ignore_label = ignore_label
    self._num_classes = num_classes
    self._scales = (min_scale_factor, max_scale_factor, scale_factor_step_size)
    self._random_flip = random_flip
    self._mean_rgb = mean_rgb
    self._stddev_rgb = stddev_rgb

  def __call__(self, decoded, seed=None):
    """Maps a decoded example (see `tfexample.Decoder`) to (features, labels).

    Args:
      decoded: dict from `Decoder.decode`.
      seed: optional int32 or int64 [2], a stateless seed of this example's
        augmentation: the same seed gives the same scale, crop and flip.
        None draws a fresh one. Evaluation ignores it.

    Returns:
      features: dict with 'image' float32 [crop_h, crop_w, 3], 'height' and
        'width' int32 scalars (the size after any resize and before
        padding), 'valid' float32 scalar (1 for a real example; batch
        padding uses 0).
      labels: int32 [crop_h, crop_w, 1].
    """
    image = decoded['image']
    if not self._is_training:
      # Training normalizes only the pixels of its crop (see _augment).
      image = preprocess_ops.normalize_scaled_float_image(
          tf.cast(image, tf.float32), self._mean_rgb, self._stddev_rgb)
    label = self._checked_label(decoded['label'], decoded['filename'])
    height, width = decoded['height'], decoded['width']
    if self._resize[0] is not None:
      image, label = resize_to_range(image, label, *self._resize)
      height, width = tf.unstack(tf.shape(image)[:2])
    if self._is_training:
      image, label = self._augment(image, label, seed)
    else:
      image, label = self._pad_for_eval(image, label, decoded['filename'])
    image.set_shape(self._crop_size + (3,))
    label.set_shape(self._crop_size + (1,))
    features = {
        'image': image,
        'height': height,
        'width': width,
        'valid': tf.constant(1.0),
    }
    return features, label

  def _checked_label(self, label, filename):
    """int32 label map, checked against the dataset's classes."""
    label = tf.cast(label, tf.int32)
    if self._num_classes is None:
      return label
    bad = tf.logical_and(label >= self._num_classes,
                         tf.not_equal(label, self._ignore_label))
    check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [
        'Label map of example', filename, 'has values',
        tf.unique(tf.boolean_mask(label, bad))[0],
        'that are neither a class (0 to', self._num_classes - 1,
        ') nor the ignore label', self._ignore_label,
        '; check NUM_CLASSES and IGNORE_LABEL of the dataset.'], summarize=20)
    with tf.control_dependencies([check]):
      return tf.identity(label)

  def _augment(self, image, label, seed):
    """DeepLab's scale, pad, crop and flip, computing only the crop's pixels."""
    scale_seed, crop_seed = _split_seed(seed, 2)
    scale = random_scale_factor(*self._scales, seed=scale_seed)
    size = tf.cast(tf.round(tf.cast(tf.shape(image)[:2], tf.float32) * scale),
                   tf.int32)
    offset, flipped = random_crop_window(size, self._crop_size,
                                         self._random_flip, crop_seed)
    pad = tf.maximum(offset + self._crop_size - size, 0)
    inside = tf.constant(self._crop_size) - pad
    box = crop_box(size, offset, inside, flipped)[None]
    image = tf.image.crop_and_resize(image[None], box, [0], inside)[0]
    label = tf.image.crop_and_resize(label[None], box, [0], inside, 'nearest')
    # As DeepLab: the normalized image padded with 0 (the mean pixel), the
    # label with the ignore label, at the bottom and right before the flip.
    left = tf.where(flipped, pad[1], 0)
    paddings = [[0, pad[0]], [left, pad[1] - left], [0, 0]]
    image = _normalize_rows(image, self._mean_rgb, self._stddev_rgb)
    label = tf.cast(label[0], tf.int32)
    return (tf.pad(image, paddings),
            tf.pad(label, paddings, constant_values=self._ignore_label))

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
