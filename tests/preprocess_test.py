"""Tests for the Parser: augmentation alignment and evaluation padding."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
from official.vision.ops import preprocess_ops

from official_seg.data import preprocess

IGNORE = 255


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
  mean = np.array(preprocess_ops.MEAN_RGB, np.float32)
  std = np.array(preprocess_ops.STDDEV_RGB, np.float32)
  return np.asarray(image) * std + mean


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
  test.assertAllClose(image[valid], 10.0 * label[valid], atol=1e-3 if exact else 0.5)


def _deeplab_resize_size(height, width, min_size, max_size, factor):
  """NumPy float32 reference of DeepLab's resize_to_range output size."""
  f32 = np.float32
  max_size = f32(max_size - (max_size - 1) % factor)
  size = np.array([height, width], f32)
  large = np.floor(size * (f32(min_size) / size.min())).astype(np.int32)
  small = np.floor(size * (max_size / size.max())).astype(np.int32)
  new_size = small if large.max() > max_size else large
  return new_size + (factor - (new_size - 1) % factor) % factor


class ParserTest(tf.test.TestCase, parameterized.TestCase):

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

  def test_small_image_is_padded_with_mean_pixel_and_ignore(self):
    parser = preprocess.Parser(is_training=True, crop_size=(40, 40),
                               ignore_label=IGNORE, random_flip=False)
    features, label = parser(_decoded(height=30, width=22))
    label = np.asarray(label)[..., 0]
    image = _unnormalize(features['image'])
    # The crop must cover the whole 30x22 image, so padding is the rest.
    self.assertEqual(int((label != IGNORE).sum()),
                     int((np.asarray(_decoded()['label']) != IGNORE).sum()))
    pad = np.ones_like(label, bool)
    pad[:30, :22] = False
    self.assertTrue((label[pad] == IGNORE).all())
    self.assertAllClose(image[pad], np.broadcast_to(
        preprocess_ops.MEAN_RGB, image[pad].shape), atol=1e-3)

  def test_random_scale_factor_draws_from_the_step_grid(self):
    draws = {round(float(preprocess.random_scale_factor(0.5, 2.0, 0.25)), 4)
             for _ in range(200)}
    self.assertEqual(draws, {0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0})

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
    outputs = [parser(decoded, seed=tf.constant(seed, tf.int64))[1].numpy()
               for seed in ([3, 7], [3, 7], [3, 8], [4, 7], [9, 9])]
    self.assertAllEqual(outputs[0], outputs[1])
    for other in outputs[2:]:
      self.assertNotAllEqual(outputs[0], other)

  @parameterized.parameters(
      # VOC-sized images fit 513 with sides 16k + 1, as DeepLab resizes ADE20K.
      (375, 500, 513, 513, 16, (385, 513)),
      (500, 375, 513, 513, 16, (513, 385)),
      (100, 200, 50, None, None, (50, 100)),
      (100, 200, 50, None, 16, (65, 113)),
      (30, 22, 40, 45, None, (45, 33)))
  def test_resize_to_range_size_on_known_sizes(self, height, width, min_size,
                                               max_size, factor, expected):
    size = preprocess.resize_to_range_size(height, width, min_size, max_size,
                                           factor)
    self.assertAllEqual(size, expected)

  def test_resize_to_range_size_matches_deeplab_rule(self):
    rng = np.random.default_rng(4)
    for height, width in rng.integers(100, 2200, size=(40, 2)):
      self.assertAllEqual(
          preprocess.resize_to_range_size(height, width, 513, 513, 16),
          _deeplab_resize_size(height, width, 513, 513, 16))

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
