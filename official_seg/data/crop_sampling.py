"""Training crops that find rare classes: cat_max_ratio redraws, foreground-centred crops."""

import numbers

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.data import image_ops

# Labels are 8-bit PNGs: every label value is below this.
_LABEL_VALUES = 256
# Streams folded into the crop seed (`stateless_fold_in`) for the draws made
# here, so that the plain crop's own draws stay as they are.
_RETRY, _COIN, _CLASS, _PIXEL = 1, 2, 3, 4


def _number_in(low, high, low_included):
  def test(value):
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
      return False
    return (low <= value if low_included else low < value) and value <= high
  return test


def _class_ids(value):
  return isinstance(value, (list, tuple)) and all(
      validation.WHOLE_AT_LEAST_0.test(v) and v < _LABEL_VALUES for v in value)


@gin.configurable
@validation.checked(
    cat_max_ratio=validation.Expect(_number_in(0, 1, False),
                                    'a number in (0, 1]; 1 is off'),
    crop_tries=validation.POSITIVE_WHOLE,
    foreground_share=validation.Expect(_number_in(0, 1, True),
                                       'a number in [0, 1]; 0 is off'),
    foreground_classes=validation.Expect(
        _class_ids, 'a list of class ids (0 to 255); [] is every class '
        'but 0 and the ignore label'))
class CropSampling:
  """Where a training crop lies: drawn again off one class, or on a rare one.

  The runtime builds it in the `train/` gin scope and hands it to the
  training `Parser`; both settings are off by default, which leaves the
  crop DeepLab's uniform one. Every draw is stateless from the crop's own
  seed, so a run's seed fixes every crop.
  """

  def __init__(self, cat_max_ratio=1.0, crop_tries=10, foreground_share=0.0,
               foreground_classes=()):
    """Initializes the settings.

    Args:
      cat_max_ratio: float in (0, 1], mmsegmentation's RandomCrop setting: a
        crop is drawn again while one class covers `cat_max_ratio` or more
        of its labelled pixels (the ignore label and padding count in no
        class), or it holds a single class. 1.0 is off.
      crop_tries: int, the crops checked, as mmsegmentation's 10; when all
        fail, the next draw is kept unchecked, as there.
      foreground_share: float in [0, 1], nnU-Net's
        `oversample_foreground_percent` (0.33) drawn per crop: the
        probability that a crop is centred on a pixel of a foreground class
        of the image. 0 is off.
      foreground_classes: list of class ids that count as foreground. Empty
        (the default) is every class but 0 (background) and the ignore
        label. A class is drawn uniformly among those the image holds, then
        a pixel uniformly among that class's pixels; an image without any
        gets an ordinary crop.

    Raises:
      validation.ConfigurationError: a value out of its range.
    """
    validation.check(
        CropSampling, cat_max_ratio=cat_max_ratio, crop_tries=crop_tries,
        foreground_share=foreground_share,
        foreground_classes=foreground_classes)
    self._cat_max_ratio = float(cat_max_ratio)
    self._crop_tries = int(crop_tries)
    self._foreground_share = float(foreground_share)
    self._foreground_classes = tuple(int(c) for c in foreground_classes)

  @property
  def is_active(self):
    """Whether any crop may differ from DeepLab's uniform one."""
    return self._cat_max_ratio < 1.0 or self._foreground_share > 0.0

  def offset(self, label, scaled_size, crop_size, plain_offset, seed,
             ignore_label):
    """The crop window's top-left pixel in the scaled image padded to the crop.

    Args:
      label: int32 [H, W, 1], the label before scaling.
      scaled_size: int32 [2], the scaled image's (height, width).
      crop_size: (height, width) ints, the static crop size.
      plain_offset: int32 [2], DeepLab's uniform draw
        (`image_ops.random_crop_window`), the first crop tried.
      seed: int32 or int64 [2], the crop's stateless seed.
      ignore_label: int.

    Returns:
      int32 [2] in [0, max(scaled_size, crop_size) - crop_size], so the
      window keeps the static crop size.
    """
    def not_centred():
      if self._cat_max_ratio >= 1.0:
        return plain_offset
      return self._balanced_offset(label, scaled_size, crop_size,
                                   plain_offset, seed, ignore_label)

    if self._foreground_share <= 0.0:
      return not_centred()
    coin = tf.random.stateless_uniform(
        [], tf.random.experimental.stateless_fold_in(seed, _COIN))
    found, centred = tf.cond(
        coin < self._foreground_share,
        lambda: self._centred_offset(label, scaled_size, crop_size, seed,
                                     ignore_label),
        lambda: (tf.constant(False), plain_offset))
    return tf.cond(found, lambda: centred, not_centred)

  def _balanced_offset(self, label, scaled_size, crop_size, first, seed,
                       ignore_label):
    """mmsegmentation's retries: the first crop no class dominates."""
    window = tf.minimum(scaled_size, crop_size)

    def dominated(attempt, offset):
      counts = window_label_counts(label, scaled_size, offset, window,
                                   ignore_label)
      return tf.logical_and(attempt < self._crop_tries,
                            tf.logical_not(balanced(counts,
                                                    self._cat_max_ratio)))

    def redraw(attempt, offset):
      del offset  # Replaced by the next draw.
      return attempt + 1, redrawn_offset(scaled_size, crop_size, seed,
                                         attempt + 1)

    _, offset = tf.while_loop(dominated, redraw, (tf.constant(0), first))
    return offset

  def _centred_offset(self, label, scaled_size, crop_size, seed,
                      ignore_label):
    """(found, offset): a window centred on a foreground pixel, if any."""
    label = label[..., 0]
    counts = tf.math.bincount(label, minlength=_LABEL_VALUES,
                              maxlength=_LABEL_VALUES)
    present = tf.logical_and(counts > 0, self._eligible(ignore_label))
    classes = tf.cast(tf.where(present)[:, 0], tf.int32)
    found = tf.size(classes) > 0

    def centre():
      chosen = classes[_uniform_index(tf.size(classes), seed, _CLASS)]
      pixels = tf.cast(tf.where(tf.equal(label, chosen)), tf.int32)
      pixel = pixels[_uniform_index(tf.shape(pixels)[0], seed, _PIXEL)]
      return centred_window(pixel, tf.shape(label), scaled_size, crop_size)

    return found, tf.cond(found, centre, lambda: tf.zeros([2], tf.int32))

  def _eligible(self, ignore_label):
    """bool [256]: the label values that count as foreground."""
    if self._foreground_classes:
      values = tf.constant(self._foreground_classes, tf.int32)
      return tf.reduce_any(
          tf.equal(tf.range(_LABEL_VALUES)[:, None], values[None]), axis=1)
    values = tf.range(_LABEL_VALUES)
    return tf.logical_and(values > 0, tf.not_equal(values, ignore_label))


def _uniform_index(count, seed, stream):
  """A stateless uniform int32 in [0, count); count is positive."""
  return tf.random.stateless_uniform(
      [], tf.random.experimental.stateless_fold_in(seed, stream),
      maxval=count, dtype=tf.int32)


def redrawn_offset(scaled_size, crop_size, seed, attempt):
  """The offset of crop `attempt` (1, 2, ...) after the first, uniform.

  Args:
    scaled_size: int32 [2], the scaled size.
    crop_size: (height, width) ints.
    seed: int32 or int64 [2], the crop's stateless seed (the first crop's).
    attempt: int32 scalar, at least 1.

  Returns:
    int32 [2], uniform as `image_ops.random_crop_window`'s offset.
  """
  retry_seed = tf.random.experimental.stateless_fold_in(seed, _RETRY)
  offset, _ = image_ops.random_crop_window(
      scaled_size, crop_size, False,
      tf.random.experimental.stateless_fold_in(retry_seed, attempt))
  return offset


def window_label_counts(label, scaled_size, offset, window, ignore_label):
  """int32 [256], the pixels of each label value in a crop of the scaled label.

  The crop's pixels are sampled as the `Parser` samples them (nearest, with
  `image_ops.crop_box`), without scaling the whole label; the ignore label's
  count is 0.

  Args:
    label: int32 [H, W, 1], the label before scaling.
    scaled_size: int32 [2], the scaled size.
    offset: int32 [2], the crop's top-left pixel in the scaled image padded
      to the crop size.
    window: int32 [2], the crop's pixels inside the scaled image:
      min(scaled_size, crop_size).
    ignore_label: int.
  """
  box = image_ops.crop_box(scaled_size, offset, window, False)[None]
  pixels = tf.image.crop_and_resize(label[None], box, [0], window, 'nearest')
  counts = tf.math.bincount(tf.cast(pixels, tf.int32),
                            minlength=_LABEL_VALUES, maxlength=_LABEL_VALUES)
  return tf.tensor_scatter_nd_update(counts, [[ignore_label]], [0])


def balanced(counts, cat_max_ratio):
  """mmsegmentation's test: two classes or more, none `cat_max_ratio` or more.

  Args:
    counts: int32 [256], pixels of each class (the ignore label's 0).
    cat_max_ratio: float.

  Returns:
    bool scalar: more than one class has pixels and the largest count over
    their sum (float64) is below `cat_max_ratio`.
  """
  counts = tf.cast(counts, tf.float64)
  share = tf.reduce_max(counts) / tf.maximum(tf.reduce_sum(counts), 1.0)
  return tf.logical_and(tf.math.count_nonzero(counts) > 1,
                        share < cat_max_ratio)


def centred_window(pixel, size, scaled_size, crop_size):
  """The offset of the crop centred on a pixel, clamped to the padded image.

  Args:
    pixel: int32 [2], (row, column) in the label before scaling.
    size: int32 [2], that label's (height, width).
    scaled_size: int32 [2], the scaled size.
    crop_size: (height, width) ints.

  Returns:
    int32 [2]: the pixel maps to scaled row round(row (Hs - 1) / (H - 1)),
    as the aligned-corner sampling of `image_ops.crop_box` places it (and
    columns alike); the window puts it at row crop_height // 2 of the crop,
    then moves as little as keeps it inside max(scaled_size, crop_size).
  """
  stretch = (tf.cast(tf.maximum(scaled_size - 1, 0), tf.float32) /
             tf.cast(tf.maximum(size - 1, 1), tf.float32))
  scaled = tf.cast(tf.round(tf.cast(pixel, tf.float32) * stretch), tf.int32)
  crop = tf.constant(crop_size, tf.int32)
  limit = tf.maximum(scaled_size, crop) - crop
  return tf.clip_by_value(scaled - crop // 2, 0, limit)
