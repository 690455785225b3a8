"""Tests for the Parser: augmentation alignment and evaluation padding."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf
from official.vision.ops import preprocess_ops

from official_seg.data import image_ops
from official_seg import validation
from official_seg.data import preprocess

IGNORE = 255
MEAN = np.array(preprocess_ops.MEAN_RGB, np.float32)
STD = np.array(preprocess_ops.STDDEV_RGB, np.float32)
# crop_box samples within (H - 1) / 32768 pixels of the exact position: in
# images under 40 pixels a bilinear sample moves by at most 0.0012 of its
# neighbour's difference (at most 255 / 57 normalized), so by 0.006; a pixel
# off by one moves by the whole difference.
NORMALIZED_ATOL = 0.01


def _decoded(height=30, width=22, filename='img_1.png'):
  """An example whose image encodes its label: every channel is 10 * label."""
  label = np.zeros((height, width, 1), np.uint8)
  label[5:20, 4:15] = 1
  label[8:25, 12:20] = 2
  label[0:3, :] = IGNORE
  image = np.repeat(np.where(label == IGNORE, 0, label * 10), 3, axis=-1)
  return {'image': tf.constant(image.astype(np.uint8)),
          'label': tf.constant(label),
          'filename': tf.constant(filename),
          'height': tf.constant(height), 'width': tf.constant(width)}


def _unnormalize(image):
  return np.asarray(image) * STD + MEAN


def _random_decoded(height, width, seed=0):
  """An example of random pixels and random labels 1-3 (0 would be filler)."""
  rng = np.random.default_rng(seed)
  return {'image': tf.constant(rng.integers(0, 256, (height, width, 3),
                                            dtype=np.uint8)),
          'label': tf.constant(rng.integers(1, 4, (height, width, 1),
                                            dtype=np.uint8)),
          'filename': tf.constant('random.png'),
          'height': tf.constant(height), 'width': tf.constant(width)}


def _window(parser_seed, scaled_size, crop_size, flip):
  """The (offset, flipped) a Parser draws with `parser_seed` [2] int64."""
  # The Parser splits its seed into a scale seed and a crop seed.
  crop_seed = tf.random.experimental.stateless_split(parser_seed, 2)[1]
  offset, flipped = image_ops.random_crop_window(
      tf.constant(scaled_size), crop_size, flip, crop_seed)
  return offset.numpy(), bool(flipped)


def _slice(array, offset, crop_size, flipped):
  """The NumPy crop at `offset` of `array`, mirrored left-right if flipped."""
  window = np.asarray(array)[offset[0]:offset[0] + crop_size[0],
                             offset[1]:offset[1] + crop_size[1]]
  return window[:, ::-1] if flipped else window


def _assert_aligned(test, image, label, exact):
  """Checks image == 10 * label wherever the label is a class."""
  image = _unnormalize(image)[..., 0]
  label = np.asarray(label)[..., 0]
  valid = label != IGNORE
  if not exact:
    # Bilinear (image) and nearest (label) resizing may place a class border
    # one pixel apart; keep pixels whose 5x5 neighbourhood has one class. A
    # real misalignment (a crop or flip applied to one side only) moves whole
    # regions and still fails. Beyond the crop the label is unknown (-1).
    padded = np.pad(label.astype(np.int32), 2, constant_values=-1)
    for dy in range(-2, 3):
      for dx in range(-2, 3):
        valid &= padded[2 + dy:2 + dy + label.shape[0],
                        2 + dx:2 + dx + label.shape[1]] == label
  test.assertGreater(valid.sum(), 0)
  # Exact up to crop_box's sampling margin: neighbours differ by at most 20
  # grey levels here, so samples move by at most 0.024 (NORMALIZED_ATOL).
  test.assertAllClose(image[valid], 10.0 * label[valid],
                      atol=0.05 if exact else 0.5)


class ParserTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    # Parser is configurable: bindings left by another test file in the same
    # process (e.g. Parser.num_classes) must not reach these Parsers.
    gin.clear_config()

  @parameterized.named_parameters(
      ('no_scaling', 1.0, 1.0, 0.0, True),
      ('deeplab_steps', 0.5, 2.0, 0.25, False),
      ('continuous', 0.75, 1.5, 0.0, False))
  def test_train_augmentation_keeps_image_and_label_aligned(
      self, min_scale, max_scale, step, exact):
    parser = preprocess.Parser(
        is_training=True, crop_size=(17, 19), ignore_label=IGNORE,
        min_scale_factor=min_scale, max_scale_factor=max_scale,
        scale_factor_step_size=step)
    for _ in range(10):
      features, label = parser(_decoded())
      self.assertEqual(features['image'].shape, (17, 19, 3))
      self.assertEqual(label.shape, (17, 19, 1))
      _assert_aligned(self, features['image'], label, exact)

  def test_alignment_inside_tf_data(self):
    parser = preprocess.Parser(
        is_training=True, crop_size=(25, 25), ignore_label=IGNORE,
        min_scale_factor=0.5, max_scale_factor=2.0, scale_factor_step_size=0.25)
    decoded = _decoded()
    dataset = tf.data.Dataset.from_tensors(decoded).repeat(12).map(
        parser, num_parallel_calls=4).batch(4)
    batches = list(dataset)
    self.assertLen(batches, 3)
    for features, labels in batches:
      self.assertEqual(features['image'].shape, (4, 25, 25, 3))
      for image, label in zip(features['image'], labels):
        _assert_aligned(self, image, label, exact=False)

  @parameterized.named_parameters(('not_flipped', False), ('flipped', True))
  def test_crop_at_scale_one_is_the_numpy_slice(self, flip):
    decoded, crop_size = _random_decoded(30, 22), (17, 19)
    parser = preprocess.Parser(is_training=True, crop_size=crop_size,
                               ignore_label=IGNORE, random_flip=flip)
    normalized = (np.asarray(decoded['image'], np.float32) - MEAN) / STD
    flips = set()
    for seed in range(6):
      seed = tf.constant([seed, 1], tf.int64)
      offset, flipped = _window(seed, (30, 22), crop_size, flip)
      flips.add(flipped)
      features, label = parser(decoded, seed)
      self.assertAllEqual(label, _slice(decoded['label'], offset, crop_size,
                                        flipped))
      self.assertAllClose(features['image'], _slice(
          normalized, offset, crop_size, flipped), atol=NORMALIZED_ATOL)
    self.assertEqual(flips, {False, True} if flip else {False})

  def test_label_at_scale_two_is_nearest_upsampling(self):
    # 6x8 blocks of one class each, and an image that is 10 * label.
    label = (np.arange(24)[:, None] // 6 * 4 + np.arange(32)[None] // 8) % 7
    decoded = {'image': tf.constant(np.repeat(label[..., None] * 10, 3, -1),
                                    tf.uint8),
               'label': tf.constant(label[..., None], tf.uint8),
               'filename': tf.constant('blocks.png'),
               'height': tf.constant(24), 'width': tf.constant(32)}
    crop_size = (33, 41)
    parser = preprocess.Parser(is_training=True, crop_size=crop_size,
                               ignore_label=IGNORE, min_scale_factor=2.0,
                               max_scale_factor=2.0, random_flip=False)
    # Nearest upsampling to 48x64 with aligned corners (DeepLab's sampling):
    # scaled pixel p takes source pixel round(p * (24 - 1) / (48 - 1)).
    rows = np.floor(np.arange(48) * 23 / 47 + 0.5).astype(int)
    cols = np.floor(np.arange(64) * 31 / 63 + 0.5).astype(int)
    upsampled = label[rows][:, cols]
    for seed in range(4):
      seed = tf.constant([seed, 2], tf.int64)
      offset, _ = _window(seed, (48, 64), crop_size, False)
      expected = _slice(upsampled, offset, crop_size, False)
      features, got = parser(decoded, seed)
      got = np.asarray(got)[..., 0]
      # Other sub-pixel conventions move block borders by at most one output
      # pixel: compare pixels whose 3x3 neighbourhood is one block.
      padded = np.pad(expected, 1, mode='edge')
      interior = np.ones_like(expected, bool)
      for dy in range(3):
        for dx in range(3):
          interior &= padded[dy:dy + 33, dx:dx + 41] == expected
      self.assertGreater(interior.sum(), 0.6 * interior.size)
      self.assertAllEqual(got[interior], expected[interior])
      self.assertAllClose(_unnormalize(features['image'])[interior],
                          np.repeat(10.0 * expected[interior, None], 3, -1),
                          atol=0.05)

  @parameterized.named_parameters(
      # A 30x22 image at scale 0.5 is 15x11 in a 40x40 crop.
      ('small_image', 30, 22, 0.5, (40, 40), (15, 11)),
      # The last scaled row and column map to the source's last ones, which
      # float32 rounding could push into crop_and_resize's extrapolation.
      ('edges', 16, 8, 1.75, (33, 41), (28, 14)),
      ('one_row', 1, 9, 2.0, (5, 24), (2, 18)))
  def test_padding_is_exact_and_the_scaled_image_is_real(
      self, height, width, scale, crop_size, scaled):
    parser = preprocess.Parser(
        is_training=True, crop_size=crop_size, ignore_label=IGNORE,
        min_scale_factor=scale, max_scale_factor=scale)
    flips = set()
    for seed in range(6):
      seed = tf.constant([seed, 3], tf.int64)
      features, label = parser(_random_decoded(height, width), seed)
      _, flipped = _window(seed, scaled, crop_size, True)
      flips.add(flipped)
      pad = np.ones(crop_size, bool)
      pad[:scaled[0], :scaled[1]] = False
      pad = pad[:, ::-1] if flipped else pad
      label = np.asarray(label)[..., 0]
      self.assertTrue((label[pad] == IGNORE).all())
      self.assertTrue((np.asarray(features['image'])[pad] == 0.0).all())
      self.assertTrue(np.isin(label[~pad], [1, 2, 3]).all())
      self.assertTrue((np.asarray(features['image'])[~pad] != 0.0).any())
    self.assertEqual(flips, {False, True})

  def test_eval_pads_without_resizing(self):
    parser = preprocess.Parser(is_training=False, crop_size=(33, 41),
                               ignore_label=IGNORE)
    decoded = _decoded()
    features, label = parser(decoded)
    self.assertAllEqual(np.asarray(label)[:30, :22],
                        np.asarray(decoded['label']))
    self.assertTrue((np.asarray(label)[30:] == IGNORE).all())
    self.assertTrue((np.asarray(label)[:, 22:] == IGNORE).all())
    _assert_aligned(self, features['image'], label, exact=True)
    self.assertEqual(int(features['height']), 30)
    self.assertEqual(float(features['valid']), 1.0)

  def test_eval_image_larger_than_crop_names_the_image(self):
    parser = preprocess.Parser(is_training=False, crop_size=(16, 16),
                               ignore_label=IGNORE)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                '(?s)big_one.jpg.*EVAL_CROP_SIZE'):
      parser(_decoded(filename='big_one.jpg'))

  def test_same_seed_same_augmentation(self):
    parser = preprocess.Parser(
        is_training=True, crop_size=(17, 19), ignore_label=IGNORE,
        min_scale_factor=0.5, max_scale_factor=2.0, scale_factor_step_size=0.25)
    decoded = _decoded()
    outputs = [parser(decoded, seed=tf.constant(seed, tf.int64))
               for seed in ([3, 7], [3, 7], [3, 8], [4, 7], [9, 9])]
    self.assertAllEqual(outputs[0][1], outputs[1][1])
    self.assertAllEqual(outputs[0][0]['image'], outputs[1][0]['image'])
    for other in outputs[2:]:
      self.assertNotAllEqual(outputs[0][1], other[1])

  def test_eval_resizes_image_and_label_then_pads(self):
    parser = preprocess.Parser(is_training=False, crop_size=(46, 46),
                               ignore_label=IGNORE, min_resize_value=40,
                               max_resize_value=45)
    features, label = parser(_decoded(height=30, width=22))
    self.assertEqual((int(features['height']), int(features['width'])),
                     (45, 33))
    label = np.asarray(label)[..., 0]
    self.assertTrue((label[45:] == IGNORE).all())
    self.assertTrue((label[:, 33:] == IGNORE).all())
    self.assertEqual(set(np.unique(label[:45, :33])), {0, 1, 2, IGNORE})
    _assert_aligned(self, features['image'][:45, :33], label[:45, :33, None],
                    exact=False)

  def test_train_resizes_before_cropping(self):
    # The 45x33 resized image fits the crop: training then pads it as eval.
    kwargs = dict(crop_size=(46, 46), ignore_label=IGNORE, min_resize_value=40,
                  max_resize_value=45)
    train = preprocess.Parser(is_training=True, random_flip=False, **kwargs)
    evaluate = preprocess.Parser(is_training=False, **kwargs)
    (train_features, train_label), (eval_features, eval_label) = [
        parser(_random_decoded(30, 22), seed=tf.constant([5, 5]))
        for parser in (train, evaluate)]
    self.assertEqual((int(train_features['height']),
                      int(train_features['width'])), (45, 33))
    self.assertAllEqual(train_label, eval_label)
    self.assertAllClose(train_features['image'], eval_features['image'],
                        atol=NORMALIZED_ATOL)

  def test_resize_bound_without_min_is_rejected(self):
    with self.assertRaisesRegex(ValueError, 'min_resize_value'):
      preprocess.Parser(is_training=False, crop_size=(8, 8),
                        ignore_label=IGNORE, max_resize_value=513)

  @parameterized.parameters(True, False)
  def test_label_value_of_no_class_names_the_example(self, is_training):
    # _decoded() has classes 0-2 and ignore pixels: 2 classes is too few.
    parser = preprocess.Parser(is_training=is_training, crop_size=(33, 33),
                               ignore_label=IGNORE, num_classes=2)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                r'(?s)odd_labels.png.*values.*\b2\b.*0 to.*1'):
      parser(_decoded(filename='odd_labels.png'))
    # Three classes cover every value; ignore pixels are always allowed.
    parser = preprocess.Parser(is_training=is_training, crop_size=(33, 33),
                               ignore_label=IGNORE, num_classes=3)
    self.assertEqual(parser(_decoded())[1].shape, (33, 33, 1))

  def test_empty_scale_range_is_rejected(self):
    with self.assertRaisesRegex(ValueError, 'min_scale_factor'):
      preprocess.Parser(is_training=True, crop_size=(8, 8), ignore_label=IGNORE,
                        min_scale_factor=2.0, max_scale_factor=1.0)


if __name__ == '__main__':
  tf.test.main()


class ChannelsAndDepthTest(tf.test.TestCase, parameterized.TestCase):
  """Images of any channels and 16 bits: normalized per channel and padded."""

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.rng = np.random.default_rng(3)

  def _decoded(self, pixels):
    height, width = pixels.shape[:2]
    return {'image': tf.constant(pixels),
            'label': tf.constant(self.rng.integers(0, 3, (height, width, 1),
                                                   dtype=np.uint8)),
            'filename': tf.constant('scan.png'),
            'height': tf.constant(height), 'width': tf.constant(width)}

  def test_16_bit_training_crop_is_normalized_per_channel_and_padded(self):
    pixels = self.rng.integers(0, 4096, (12, 9, 5)).astype(np.uint16)
    mean = [10.0, 20.0, 5.0, 1.0, 0.5]
    std = [2.0, 4.0, 3.0, 1.0, 1.5]
    parser = preprocess.Parser(
        is_training=True, ignore_label=IGNORE, crop_size=(16, 13),
        random_flip=False, mean_rgb=mean, stddev_rgb=std, image_channels=5,
        image_bit_depth=16)
    features, labels = parser(self._decoded(pixels), seed=[1, 2])
    image = features['image'].numpy()
    self.assertEqual(image.shape, (16, 13, 5))
    expected = (pixels * (255 / 65535) - np.array(mean)) / np.array(std)
    self.assertAllClose(image[:12, :9], expected, atol=NORMALIZED_ATOL)
    self.assertAllEqual(image[12:], np.zeros((4, 13, 5)))
    self.assertAllEqual(image[:, 9:], np.zeros((16, 4, 5)))
    self.assertAllEqual(labels[12:], np.full((4, 13, 1), IGNORE))

  def test_grey_eval_image_takes_equal_rgb_values_as_its_own(self):
    pixels = self.rng.integers(0, 256, (6, 4, 1)).astype(np.uint8)
    parser = preprocess.Parser(
        is_training=False, ignore_label=IGNORE, crop_size=(8, 4),
        mean_rgb=[127.5] * 3, stddev_rgb=[127.5] * 3, image_channels=1)
    features, _ = parser(self._decoded(pixels))
    self.assertEqual(features['image'].shape, (8, 4, 1))
    self.assertAllClose(features['image'][:6], (pixels - 127.5) / 127.5)
    self.assertAllEqual(features['image'][6:], np.zeros((2, 4, 1)))

  def test_16_bit_eval_image_is_scaled_to_8_bit_units(self):
    pixels = np.array([[[0], [4095]], [[65535], [257]]], np.uint16)
    parser = preprocess.Parser(
        is_training=False, ignore_label=IGNORE, crop_size=(2, 2),
        mean_rgb=[0.0], stddev_rgb=[1.0], image_channels=1,
        image_bit_depth=16)
    features, _ = parser(self._decoded(pixels))
    self.assertAllClose(features['image'][..., 0],
                        [[0.0, 4095 * 255 / 65535], [255.0, 1.0]], atol=1e-4)

  def test_rgb_means_for_five_channels_stop_in_one_line(self):
    with self.assertRaisesRegex(
        validation.ConfigurationError,
        r'^Parser.mean_rgb = \[1.0, 2.0, 3.0\] has 3 values but the images '
        r'have 5 channels \(IMAGE_CHANNELS\); give one value per channel'):
      preprocess.Parser(is_training=False, ignore_label=IGNORE,
                        crop_size=(2, 2), mean_rgb=[1, 2, 3], image_channels=5)
