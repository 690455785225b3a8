"""Unlabeled examples: pixel-aligned weak and strong views, cutout; the unlabeled stream."""

import dataclasses
import functools

import gin
import tensorflow as tf
from official.vision.ops import preprocess_ops

from official_seg import validation
from official_seg.data import image_ops
from official_seg.data import preprocess
from official_seg.semi_supervised import cutmix as cutmix_lib

# The unlabeled stream's ground truth, for monitors only: no loss may read a
# feature under this prefix (tests/semi_supervised/step_test.py poisons
# them and checks every gradient). Training features are under UNLABELED.
MONITOR = 'monitor/'
UNLABELED = 'unlabeled/'
@gin.configurable(denylist=['image', 'seed'])
def color_jitter(image, seed, brightness=0.5, contrast=(0.5, 1.5),
                 saturation=(0.5, 1.5), hue=0.25):
  """PseudoSeg's colour jitter: four ops in a random order, clipped after each.

  Not preprocess_ops.color_jitter: the Model Garden's has no hue, a fixed
  order and no stateless seed, which keeps the views reproducible.

  Args:
    image: float32 [h, w, 3] in [0, 1].
    seed: int32 or int64 [2], a stateless seed: it draws the order and each
      op's factor.
    brightness: float, largest added delta; 0 skips the op.
    contrast: (lower, upper) contrast factor, or None to skip the op.
    saturation: (lower, upper) saturation factor, or None to skip the op.
    hue: float, largest hue delta (a share of the colour circle); 0 skips.

  Returns:
    float32 [h, w, 3] in [0, 1].
  """
  order_seed, *seeds = image_ops.split_seed(seed, 5)
  settings = (brightness, contrast, saturation, hue)
  order = tf.random.experimental.stateless_shuffle(tf.range(4), order_seed)
  for position in range(4):
    image = tf.switch_case(order[position], [
        functools.partial(_jitter_op, index, image, settings, seeds[index])
        for index in range(4)])
  return image


def _jitter_op(index, image, settings, seed):
  """Op `index` of `color_jitter` (brightness, contrast, saturation, hue)."""
  setting = settings[index]
  if not setting:
    return image
  if index == 0:
    image = tf.image.stateless_random_brightness(image, setting, seed)
  elif index == 1:
    image = tf.image.stateless_random_contrast(image, *setting, seed)
  elif index == 2:
    image = tf.image.stateless_random_saturation(image, *setting, seed)
  else:
    image = tf.image.stateless_random_hue(image, setting, seed)
  return tf.clip_by_value(image, 0.0, 1.0)


def cutout_mask(size, cutout_size, seed):
  """One cutout square, as PseudoSeg's cutout_with_mask draws it.

  Not augment.cutout: the Model Garden's draws statefully and returns no
  mask, which the label and the validity need too.

  Args:
    size: (H, W) ints or int32 [2].
    cutout_size: int, the square's largest side; its centre is uniform over
      the image and it spans cutout_size // 2 pixels each way, clipped at the
      borders. 0 cuts nothing.
    seed: int32 or int64 [2], a stateless seed.

  Returns:
    float32 [H, W, 1]: 0 inside the square, 1 elsewhere.
  """
  size = tf.convert_to_tensor(size, tf.int32)
  centre = tf.random.stateless_uniform(
      [2], seed, maxval=tf.int32.max, dtype=tf.int32) % size
  half = cutout_size // 2
  rows = tf.range(size[0])[:, None]
  cols = tf.range(size[1])[None, :]
  inside = ((rows >= centre[0] - half) & (rows < centre[0] + half) &
            (cols >= centre[1] - half) & (cols < centre[1] + half))
  return 1.0 - tf.cast(inside, tf.float32)[..., None]


@gin.configurable(denylist=['ignore_label', 'num_classes'])
class UnlabeledParser(preprocess.Parser):
  """Maps an unlabeled example to a weak and a strong view of one crop."""

  label_optional = True

  def __init__(self,
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
               strong_jitter=True,
               cutout_fraction=0.2):
    """Initializes the parser; built in the gin scope `unlabeled/`.

    Args:
      ignore_label: int, the dataset's; fills padding, cutout and missing
        label maps.
      num_classes: optional int, the dataset's; see `preprocess.Parser`.
      crop_size: (height, width) of both views.
      min_scale_factor ... stddev_rgb: as `preprocess.Parser`'s, the
        geometry and normalization that both views share.
      strong_jitter: bool, colour-jitter the strong view (`color_jitter`,
        whose strengths gin binds as `unlabeled/color_jitter.*`).
      cutout_fraction: float, the cutout square's largest side as a share
        of the crop's shorter side (PseudoSeg: 100 pixels at crop 513); 0
        turns cutout off.
    """
    super().__init__(
        True, ignore_label, num_classes, crop_size=crop_size,
        min_scale_factor=min_scale_factor, max_scale_factor=max_scale_factor,
        scale_factor_step_size=scale_factor_step_size,
        random_flip=random_flip, min_resize_value=min_resize_value,
        max_resize_value=max_resize_value, resize_factor=resize_factor,
        mean_rgb=mean_rgb, stddev_rgb=stddev_rgb)
    self._strong_jitter = strong_jitter
    self._cutout_size = int(round(cutout_fraction * min(self._crop_size)))

  @property
  def num_classes(self):
    """The dataset's class count, or None when not given."""
    return self._num_classes

  @property
  def ignore_label(self):
    """The dataset's ignore label."""
    return self._ignore_label

  def __call__(self, decoded, seed=None):
    """Maps a decoded example (`tfexample.Decoder`) to (features, label).

    Args:
      decoded: dict from `Decoder.decode`; 'has_label' False (a record
        without a label map) makes the label all `ignore_label`.
      seed: optional int32 or int64 [2]: the same seed gives the geometry
        of `preprocess.Parser` with that seed, and the same jitter and
        cutout. None draws a fresh one.

    Returns:
      features: dict with, at the crop size [H, W]: 'image' float32
        [H, W, 3] (the weak view, the training Parser's image), and
        'strong_image' float32 [H, W, 3] (the same pixels, jittered,
        normalized, padded, 0 in the cutout); 'weak_valid' float32
        [H, W, 1] (1 on image pixels, 0 on padding); 'strong_valid' (that
        times the cutout mask); 'strong_label' int32 [H, W, 1] (ignore in
        the cutout); 'mix_index' int32 scalar 0 and 'mix_mask' float32
        [H, W, 1] zeros (see `cutmix.cutmix`); 'height', 'width', 'valid' as the
        Parser's.
      label: int32 [H, W, 1], the weak view's label, for monitoring only.
    """
    if seed is None:
      seed = tf.random.uniform([2], maxval=tf.int32.max, dtype=tf.int32)
    label = self._checked_label(decoded['label'], decoded['filename'])
    if 'has_label' in decoded:
      label = tf.where(decoded['has_label'], label, self._ignore_label)
    image = decoded['image']
    if self._resize[0] is not None:
      image, label = image_ops.resize_to_range(image, label, *self._resize)
    height, width = tf.unstack(tf.shape(image)[:2])
    crop, label, paddings = self._crop(image, label, seed)
    image, label = self._pad(self.normalize(crop), label, paddings)
    jitter_seed, cutout_seed = image_ops.split_seed(
        tf.random.experimental.stateless_fold_in(seed, 1), 2)
    if self._strong_jitter:
      crop = color_jitter(crop / 255.0, jitter_seed) * 255.0
    strong = tf.pad(self.normalize(crop), paddings)
    weak_valid = tf.pad(tf.ones_like(crop[..., :1]), paddings)
    cut = cutout_mask(self._crop_size, self._cutout_size, cutout_seed)
    kept = cut > 0
    features = {
        'image': image,
        'strong_image': tf.where(kept, strong, 0.0),
        'weak_valid': weak_valid,
        'strong_valid': weak_valid * cut,
        'strong_label': tf.where(kept, label, self._ignore_label),
        'mix_index': tf.constant(0, tf.int32),
        'mix_mask': tf.zeros_like(cut),
        'height': height,
        'width': width,
        'valid': tf.constant(1.0),
    }
    for tensor in [label] + [v for v in features.values() if v.shape.rank]:
      tensor.set_shape(self._crop_size + (tensor.shape[-1],))
    return features, label


@dataclasses.dataclass(frozen=True)
class UnlabeledStream:
  """The unlabeled training stream that `input_fn.make_input_fn` zips in.

  Attributes:
    split: str, the unlabeled split (UNLABELED_SPLIT).
    batch_size: int, the global unlabeled batch.
    parser: an `UnlabeledParser`.
    cutmix_probability: float, `cutmix`'s probability; 0 turns it off.
    labeled_batch_size: int, the global labeled batch, whose split across
      replicas the unlabeled one follows.
  """
  split: str
  batch_size: int
  parser: UnlabeledParser
  cutmix_probability: float
  labeled_batch_size: int

  def per_call_batch_size(self, labeled_per_call):
    """The unlabeled batch of a call whose labeled batch is given.

    Raises:
      ValueError: when the replicas cannot split the unlabeled batch.
    """
    replicas = max(self.labeled_batch_size // labeled_per_call, 1)
    if self.batch_size % replicas:
      raise validation.ConfigurationError(
          f'unlabeled_stream.batch_size ({self.batch_size}, macro '
          f'UNLABELED_BATCH_SIZE) does not split evenly over {replicas} replicas (input pipelines); '
          f'set it to a multiple of {replicas}.')
    return self.batch_size // replicas

  def zip_into(self, labeled, batch_size, build):
    """`zip_unlabeled(labeled, self, batch_size, build)`, for `make_input_fn`.

    The input pipeline receives the stream as an argument and zips it in
    through this method, so that `data/` needs no import of this package.
    """
    return zip_unlabeled(labeled, self, batch_size, build)


def class_lists(labels, num_classes, ignore_label):
  """Which foreground classes occur in each label map (image-level labels).

  Args:
    labels: int [B, H, W, 1].
    num_classes: int C, background 0 included.
    ignore_label: int; its pixels count for no class.

  Returns:
    float32 [B, C-1]: entry c-1 is 1 where class c occurs.
  """
  flat = tf.reshape(tf.cast(labels, tf.int32), [tf.shape(labels)[0], -1])
  # Ignore pixels become class C, which the counts leave out.
  flat = tf.where(tf.equal(flat, ignore_label), num_classes, flat)
  counts = tf.math.bincount(flat, minlength=num_classes,
                            maxlength=num_classes, binary_output=True,
                            axis=-1, dtype=tf.float32)
  return counts[:, 1:]


def _merge(labeled, unlabeled, parser):
  """The labeled batch's features plus the unlabeled batch's, namespaced.

  The unlabeled label maps go under `MONITOR` only; what weakly supervised
  training may read of them, their class lists (as PseudoSeg simulates
  image-level labels), goes under `UNLABELED` when the class count is known.
  """
  (features, labels), (more, label) = labeled, unlabeled
  features = dict(features)
  strong_label = more.pop('strong_label')
  features.update({UNLABELED + key: value for key, value in more.items()})
  features[MONITOR + 'unlabeled_label'] = label
  features[MONITOR + 'unlabeled_strong_label'] = strong_label
  if parser.num_classes is not None:
    for key, value in (('class_labels', label),
                       ('strong_class_labels', strong_label)):
      features[UNLABELED + key] = class_lists(value, parser.num_classes,
                                              parser.ignore_label)
  return features, labels


def zip_unlabeled(labeled, stream, batch_size, build):
  """Zips an unlabeled stream's batches into the labeled ones, after CutMix.

  Args:
    labeled: dataset of labeled (features, labels) batches.
    stream: an `UnlabeledStream`.
    batch_size: int, the labeled batch of this input_fn call.
    build: function of the unlabeled batch size that returns the dataset of
      `stream.split` parsed by `stream.parser` (`input_fn.build_dataset`).

  Returns:
    A dataset of (features, labels): the labeled ones, plus each unlabeled
    feature under 'unlabeled/<key>' but the label maps, which go under
    'monitor/unlabeled_label' and 'monitor/unlabeled_strong_label'; with
    the parser's class count, 'unlabeled/class_labels' and
    'unlabeled/strong_class_labels' (`class_lists` of the two).

  Raises:
    ValueError: the replicas cannot split the unlabeled batch.
    validation.MissingFileError: the unlabeled split has no shards.
  """
  size = stream.per_call_batch_size(batch_size)
  try:
    unlabeled = build(size)
  except validation.MissingFileError as error:
    raise validation.MissingFileError(
        f'The unlabeled split (UNLABELED_SPLIT = {stream.split!r}) has no '
        f'shards. {error}') from error
  unlabeled = unlabeled.map(
      lambda f, l: cutmix_lib.cutmix(f, l, stream.cutmix_probability))
  return tf.data.Dataset.zip((labeled, unlabeled)).map(
      lambda both, more: _merge(both, more, stream.parser))
