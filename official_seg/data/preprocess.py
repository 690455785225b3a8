"""Parser: turns decoded examples into model inputs, with DeepLab's augmentation."""

import gin
import tensorflow as tf
from official.vision.ops import preprocess_ops

from official_seg import validation
from official_seg.data import image_ops


def _per_channel(values, channels, name):
  """`values` as a list of one float per channel.

  Raises:
    validation.ConfigurationError: neither one value per channel nor values
      that are all equal.
  """
  values = [float(v) for v in values]
  if len(values) == channels:
    return values
  if values and len(set(values)) == 1:
    return values[:1] * channels
  raise validation.ConfigurationError(
      f'Parser.{name} = {values} has {len(values)} values but the images have '
      f'{channels} channels (IMAGE_CHANNELS); give one value per channel '
      '(dataset_stats --normalization_gin writes the dataset\'s).')


@gin.configurable(denylist=['is_training', 'ignore_label', 'num_classes',
                            'window_size', 'crop_sampling', 'image_channels',
                            'image_bit_depth'])
@validation.checked(
    crop_size=validation.SIZE,
    min_scale_factor=validation.POSITIVE_NUMBER,
    max_scale_factor=validation.POSITIVE_NUMBER,
    scale_factor_step_size=validation.NUMBER_AT_LEAST_0,
    relations=(
        validation.Relation(('min_scale_factor', 'max_scale_factor'),
                            lambda low, high: low <= high, 'min <= max'),
        validation.Relation(
            ('min_resize_value', 'max_resize_value', 'resize_factor'),
            lambda low, high, factor: low is not None or not (high or factor),
            'min_resize_value set as well (DeepLab sets both bounds)')))
class Parser:
  """Parses decoded examples into (features, labels) for training or eval."""

  # Whether examples without a label map are read (tfexample.Decoder).
  label_optional = False

  def __init__(self,
               is_training,
               ignore_label,
               num_classes=None,
               crop_size=gin.REQUIRED,
               min_scale_factor=1.0,
               max_scale_factor=1.0,
               scale_factor_step_size=0.0,
               random_flip=True,
               min_resize_value=None,
               max_resize_value=None,
               resize_factor=None,
               mean_rgb=preprocess_ops.MEAN_RGB,
               stddev_rgb=preprocess_ops.STDDEV_RGB,
               window_size=None,
               crop_sampling=None,
               image_channels=3,
               image_bit_depth=8):
    """Initializes the parser.

    Args:
      is_training: bool, whether to augment and crop (train) or pad (eval).
      ignore_label: int, the label value that counts nowhere (the dataset's;
        passed by the code that builds the parser, never bound in gin).
      num_classes: optional int, likewise the dataset's; a label value that
        is neither below it nor `ignore_label` is an error naming the
        example. None skips the check.
      crop_size: (height, width) of the model input. For evaluation it must be
        at least as large as every image of the split, unless `window_size`
        is set.
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
      mean_rgb: per-channel mean subtracted from the image, in [0, 255]
        (of 8-bit values, whatever the images' depth), one value per image
        channel; values that are all equal serve any number of channels.
      stddev_rgb: per-channel scale the image is divided by, likewise.
      window_size: optional [height, width] of sliding-window inference,
        passed by the runtime from `InferenceOptions.window_size` (macro
        WINDOW_SIZE), never bound here. Evaluation then pads an image larger than `crop_size` to its own
        size instead of failing, and a batch to its largest image, so the
        eval images have no static height and width.
      crop_sampling: optional `crop_sampling.CropSampling` of the training
        crop, passed by the runtime (built in the `train/` scope), never
        bound here. None keeps DeepLab's uniform crop.
      image_channels: int, the images' channels (the dataset's, passed by
        the code that builds the parser).
      image_bit_depth: 8 or 16, likewise their bits a channel: 16-bit
        values are scaled by 255 / 65535 to the range of `mean_rgb`.

    Raises:
      validation.ConfigurationError: a value of the wrong form, an empty
        scale range, a resize bound or factor without min_resize_value, or
        `mean_rgb` or `stddev_rgb` of other than one value per channel.
    """
    validation.check(
        Parser, crop_size=crop_size, min_scale_factor=min_scale_factor,
        max_scale_factor=max_scale_factor,
        scale_factor_step_size=scale_factor_step_size,
        min_resize_value=min_resize_value, max_resize_value=max_resize_value,
        resize_factor=resize_factor)
    self._resize = (min_resize_value, max_resize_value, resize_factor)
    self._is_training = is_training
    self._crop_size = tuple(int(s) for s in crop_size)
    self._ignore_label = ignore_label
    self._num_classes = num_classes
    self._scales = (min_scale_factor, max_scale_factor, scale_factor_step_size)
    self._random_flip = random_flip
    self._channels = image_channels
    self._bit_depth = image_bit_depth
    # Normalizing the stored values at once: (v k - mean) / std with
    # k = 255 / (2^depth - 1) is (v - mean / k) / (std / k).
    scale = (2**image_bit_depth - 1) / 255
    self._mean_rgb = [v * scale for v in _per_channel(
        mean_rgb, image_channels, 'mean_rgb')]
    self._stddev_rgb = [v * scale for v in _per_channel(
        stddev_rgb, image_channels, 'stddev_rgb')]
    self._pads_larger_images = window_size is not None and not is_training
    self._crop_sampling = (crop_sampling if is_training and crop_sampling
                           and crop_sampling.is_active else None)

  def largest_size(self, height, width):
    """The largest (height, width) it resizes images within height x width to.

    Returns:
      (int, int), or None when it resizes without a bound on the longer
      side, so that the size depends on each image's aspect.
    """
    min_size, max_size, factor = self._resize
    if min_size is None:
      return (height, width)
    if max_size is None:
      return None
    bound = image_ops.resized_side_bound(max_size, factor)
    return (bound, bound)

  def __call__(self, decoded, seed=None):
    """Maps a decoded example (see `tfexample.Decoder`) to (features, labels).

    Args:
      decoded: dict from `Decoder.decode`.
      seed: optional int32 or int64 [2], a stateless seed of this example's
        augmentation: the same seed gives the same scale, crop and flip.
        None draws a fresh one. Evaluation ignores it.

    Returns:
      features: dict with 'image' float32 [crop_h, crop_w, channels], 'height' and
        'width' int32 scalars (the size after any resize and before
        padding), 'valid' float32 scalar (1 for a real example; batch
        padding uses 0).
      labels: int32 [crop_h, crop_w, 1].
    """
    label = self._checked_label(decoded['label'], decoded['filename'])
    if self._is_training:
      image, label = decoded['image'], label
      if self._resize[0] is not None:
        image, label = image_ops.resize_to_range(image, label, *self._resize)
      height, width = tf.unstack(tf.shape(image)[:2])
      image, label = self._augment(image, label, seed)
    else:
      image, label = self._eval_transform(decoded['image'], label)
      height, width = tf.unstack(tf.shape(image)[:2])
      image, label = self._pad_for_eval(image, label, decoded['filename'])
    size = (None, None) if self._pads_larger_images else self._crop_size
    image.set_shape(size + (self._channels,))
    label.set_shape(size + (1,))
    features = {
        'image': image,
        'height': height,
        'width': width,
        'valid': tf.constant(1.0),
    }
    return features, label

  @property
  def crop_size(self):
    """(height, width) of the model input."""
    return self._crop_size

  @property
  def pads_larger_images(self):
    """Whether eval images larger than the crop are padded, not rejected."""
    return self._pads_larger_images

  @property
  def is_training(self):
    return self._is_training

  @property
  def image_channels(self):
    """The channels of the images it parses (the dataset's)."""
    return self._channels

  @property
  def image_bit_depth(self):
    """Their bits a channel: 8 or 16."""
    return self._bit_depth

  @property
  def ignore_label(self):
    return self._ignore_label

  @property
  def label_values(self):
    """The label values below which a label is valid, or None (unchecked)."""
    return self._num_classes

  @property
  def resize_range(self):
    """(min_resize_value, max_resize_value, resize_factor); None when unset."""
    return self._resize

  def normalize(self, image):
    """float32 [h, w, channels] stored values -> (image - mean) / stddev."""
    return image_ops.normalize_image(image, self._mean_rgb, self._stddev_rgb)

  def _eval_transform(self, image, label):
    """Normalizes, then resizes as DeepLab's resize_to_range when it is set."""
    image = self.normalize(tf.cast(image, tf.float32))
    if self._resize[0] is not None:
      image, label = image_ops.resize_to_range(image, label, *self._resize)
    return image, label

  def serving_image(self, image):
    """Preprocesses one decoded image for serving exactly as for evaluation.

    The SavedModel's receiver calls this, so a served label map equals the
    evaluated one: the same ops on the same decoded pixels.

    Args:
      image: uint8 [h, w, 3], a decoded image.

    Returns:
      float32 [h', w', 3], normalized (0 is the mean pixel, the padding
      value), resized when the parser resizes; not padded.
    """
    return self._eval_transform(image, None)[0]

  def _checked_label(self, label, filename):
    """int32 label map, checked against the dataset's classes."""
    label = tf.cast(label, tf.int32)
    if self._num_classes is None:
      return label
    bad = tf.logical_and(label >= self._num_classes,
                         tf.not_equal(label, self._ignore_label))
    check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [
        validation.CHECK_MARK, 'Label map of example', filename, 'has values',
        tf.unique(tf.boolean_mask(label, bad))[0],
        'that are neither a class (0 to', self._num_classes - 1,
        ') nor the ignore label', self._ignore_label,
        '; check NUM_CLASSES and IGNORE_LABEL of the dataset.'], summarize=20)
    with tf.control_dependencies([check]):
      return tf.identity(label)

  def _augment(self, image, label, seed):
    """DeepLab's scale, pad, crop and flip, computing only the crop's pixels."""
    image, label, paddings = self._crop(image, label, seed)
    return self._pad(self.normalize(image), label, paddings)

  def _crop(self, image, label, seed):
    """The scaled, cropped and flipped pixels inside the image, unpadded.

    Args:
      image: uint8 or float32 [H, W, 3].
      label: int32 [H, W, 1].
      seed: optional int32 or int64 [2], the stateless seed of the geometry.

    Returns:
      (image float32 [h, w, 3] in the input's range, label int32 [h, w, 1],
      paddings int32 [3, 2] that `_pad` applies to reach the crop size).
    """
    scale_seed, crop_seed = image_ops.split_seed(seed, 2)
    scale = image_ops.random_scale_factor(*self._scales, seed=scale_seed)
    size = tf.cast(tf.round(tf.cast(tf.shape(image)[:2], tf.float32) * scale),
                   tf.int32)
    offset, flipped = image_ops.random_crop_window(size, self._crop_size,
                                         self._random_flip, crop_seed)
    if self._crop_sampling:
      offset = self._crop_sampling.offset(label, size, self._crop_size,
                                          offset, crop_seed,
                                          self._ignore_label)
    pad = tf.maximum(offset + self._crop_size - size, 0)
    inside = tf.constant(self._crop_size) - pad
    box = image_ops.crop_box(size, offset, inside, flipped)[None]
    image = tf.image.crop_and_resize(image[None], box, [0], inside)[0]
    label = tf.image.crop_and_resize(label[None], box, [0], inside, 'nearest')
    # As DeepLab: padded at the bottom and right before the flip.
    left = tf.where(flipped, pad[1], 0)
    paddings = tf.stack([[0, pad[0]], [left, pad[1] - left], [0, 0]])
    return image, tf.cast(label[0], tf.int32), paddings

  def _pad(self, image, label, paddings):
    """As DeepLab: the normalized image padded with 0 (the mean pixel), the
    label with the ignore label."""
    return (tf.pad(image, paddings),
            tf.pad(label, paddings, constant_values=self._ignore_label))

  def _pad_for_eval(self, image, label, filename):
    crop_height, crop_width = self._crop_size
    shape = tf.shape(image)
    if self._pads_larger_images:
      return image_ops.pad_to_size(image, label,
                                   tf.maximum(shape[0], crop_height),
                                   tf.maximum(shape[1], crop_width),
                                   self._ignore_label)
    fits = tf.logical_and(shape[0] <= crop_height, shape[1] <= crop_width)
    check = tf.debugging.Assert(fits, [
        'Image', filename, 'of size', shape[:2],
        'is larger than the eval crop size', self._crop_size,
        '; set eval/Parser.crop_size (EVAL_CROP_SIZE) to at least its size.'])
    with tf.control_dependencies([check]):
      return image_ops.pad_to_size(image, label, crop_height, crop_width,
                         self._ignore_label)
