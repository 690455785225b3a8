"""Tests for the unlabeled views: jitter, cutout, alignment, CutMix, mix."""

import colorsys

import gin
import numpy as np
import tensorflow as tf

from official_seg.data import preprocess
from official_seg.data import tfexample
from official_seg.semi_supervised import views

_IGNORE = 255
_GEOMETRY = {'crop_size': (24, 24), 'min_scale_factor': 0.5,
             'max_scale_factor': 2.0, 'scale_factor_step_size': 0.25}
_OFF = {'brightness': 0, 'contrast': None, 'saturation': None, 'hue': 0}


def _image(seed, shape=(6, 7, 3), low=0.2, high=0.8):
  return np.random.default_rng(seed).uniform(
      low, high, shape).astype(np.float32)


def _hsv_map(image, function):
  """Applies function(h, s, v) -> (h, s, v) to every pixel, via colorsys."""
  out = np.empty_like(image)
  for index in np.ndindex(image.shape[:2]):
    out[index] = colorsys.hsv_to_rgb(*function(*colorsys.rgb_to_hsv(
        *image[index])))
  return out


def _contrast(image, factor):
  mean = image.mean(axis=(0, 1), keepdims=True)
  return np.clip((image - mean) * factor + mean, 0, 1)


def _saturation(image, factor):
  return np.clip(_hsv_map(
      image, lambda h, s, v: (h, min(max(s * factor, 0.0), 1.0), v)), 0, 1)


def _jitter(image, seed, **settings):
  return views.color_jitter(tf.constant(image), tf.constant(seed),
                            **dict(_OFF, **settings)).numpy()


def _decoded(seed, height=20, width=25, label=True):
  rng = np.random.default_rng(seed)
  return {
      'image': tf.constant(rng.integers(0, 256, (height, width, 3), np.uint8)),
      'label': tf.constant(rng.integers(0, 4, (height, width, 1), np.uint8)),
      'filename': tf.constant(f'{seed}.png'),
      'has_label': tf.constant(label),
  }


def _unnormalized(image):
  """A normalized view back in [0, 1]."""
  mean = np.array(preprocess.preprocess_ops.MEAN_RGB, np.float32)
  stddev = np.array(preprocess.preprocess_ops.STDDEV_RGB, np.float32)
  return (image * stddev + mean) / 255.0


class ColorJitterTest(tf.test.TestCase):

  def test_brightness_adds_one_delta_of_at_most_half(self):
    image = _image(0)
    deltas = []
    for seed in range(4):
      out = _jitter(image, [seed, 1], brightness=0.5)
      delta = np.median(out - image)
      self.assertLessEqual(abs(delta), 0.5)
      self.assertAllClose(out, np.clip(image + delta, 0, 1), atol=1e-6)
      deltas.append(delta)
    self.assertLen(set(np.round(deltas, 5)), 4)

  def test_contrast_and_saturation_at_a_fixed_factor(self):
    image = _image(1)
    out = _jitter(image, [2, 3], contrast=(0.7, 0.7 + 1e-7))
    self.assertAllClose(out, _contrast(image, 0.7), atol=1e-5)
    out = _jitter(image, [2, 3], saturation=(1.4, 1.4 + 1e-7))
    self.assertAllClose(out, _saturation(image, 1.4), atol=1e-4)

  def test_hue_turns_every_pixel_by_one_delta_of_at_most_a_quarter(self):
    image = _image(2)
    hues = []
    for seed in range(3):
      out = _jitter(image, [seed, 7], hue=0.25)
      turn = [colorsys.rgb_to_hsv(*out[i])[0] - colorsys.rgb_to_hsv(
          *image[i])[0] for i in np.ndindex(image.shape[:2])]
      delta = (np.median(np.mod(turn, 1.0)) + 0.5) % 1.0 - 0.5
      self.assertLessEqual(abs(delta), 0.25)
      expected = _hsv_map(image, lambda h, s, v, d=delta: ((h + d) % 1, s, v))
      self.assertAllClose(out, expected, atol=1e-4)
      hues.append(delta)
    self.assertLen(set(np.round(hues, 4)), 3)

  def test_order_is_random_and_fixed_by_the_seed(self):
    image = _image(3, low=0.0, high=1.0)
    fixed = {'contrast': (1.5, 1.5 + 1e-7), 'saturation': (0.5, 0.5 + 1e-7)}
    contrast_first = _saturation(_contrast(image, 1.5), 0.5)
    saturation_first = _contrast(_saturation(image, 0.5), 1.5)
    self.assertGreater(np.abs(contrast_first - saturation_first).max(), 0.05)
    orders = []
    for seed in range(8):
      out = _jitter(image, [seed, 0], **fixed)
      self.assertAllEqual(out, _jitter(image, [seed, 0], **fixed))
      first = np.abs(out - contrast_first).max() < 1e-4
      self.assertTrue(first or np.abs(out - saturation_first).max() < 1e-4)
      orders.append(first)
    self.assertCountEqual(set(orders), [True, False])


class CutoutMaskTest(tf.test.TestCase):

  def test_one_square_with_a_uniform_centre_clipped_at_the_borders(self):
    height, width, side = 20, 30, 8
    clipped = 0
    for seed in range(30):
      mask = views.cutout_mask((height, width), side, [seed, 4]).numpy()
      self.assertEqual(mask.shape, (height, width, 1))
      rows, cols = np.nonzero(mask[..., 0] == 0)
      top, bottom, left, right = (rows.min(), rows.max() + 1, cols.min(),
                                  cols.max() + 1)
      expected = np.ones_like(mask)
      expected[top:bottom, left:right] = 0
      self.assertAllEqual(mask, expected)
      self.assertLessEqual(max(bottom - top, right - left), side)
      if top and left and bottom < height and right < width:
        self.assertEqual((bottom - top, right - left), (side, side))
      else:
        clipped += 1
    self.assertBetween(clipped, 1, 29)

  def test_size_zero_cuts_nothing(self):
    self.assertAllEqual(views.cutout_mask((5, 6), 0, [1, 2]),
                        np.ones((5, 6, 1)))


class UnlabeledParserTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def _parser(self, **kwargs):
    return views.UnlabeledParser(_IGNORE, 4, **dict(_GEOMETRY, **kwargs))

  def _both(self, parser, decoded, seed):
    """The parser's output eagerly and inside tf.data; asserts them equal."""
    eager = parser(decoded, tf.constant(seed, tf.int64))
    mapped = next(iter(tf.data.Dataset.from_tensors(decoded).map(
        lambda d: parser(d, tf.constant(seed, tf.int64)))))
    tf.nest.map_structure(self.assertAllEqual, eager, mapped)
    return eager

  def test_weak_view_is_the_training_parsers_view(self):
    parser = self._parser()
    training = preprocess.Parser(True, _IGNORE, 4, **_GEOMETRY)
    for seed in range(4):
      decoded = _decoded(seed)
      (features, label), (expected, expected_label) = [p(
          decoded, tf.constant([seed, 9], tf.int64)) for p in (parser, training)]
      for key in ('image', 'height', 'width', 'valid'):
        self.assertAllEqual(features[key], expected[key])
      self.assertAllEqual(label, expected_label)

  def test_strong_view_without_jitter_and_cutout_is_the_weak_view(self):
    parser = self._parser(strong_jitter=False, cutout_fraction=0)
    for seed in range(3):
      features, label = self._both(parser, _decoded(seed), [seed, 5])
      self.assertAllEqual(features['strong_image'], features['image'])
      self.assertAllEqual(features['strong_valid'], features['weak_valid'])
      self.assertAllEqual(features['strong_label'], label)
      # The labels have no ignore pixels: ignore marks padding alone.
      self.assertAllEqual(features['weak_valid'] == 0, label == _IGNORE)
      self.assertAllEqual(features['mix_mask'], np.zeros((24, 24, 1)))

  def test_jittered_view_is_pixel_aligned_and_cutout_counts_nowhere(self):
    # Contrast alone maps each channel by one affine function, so an aligned
    # strong view is an affine function of the weak one pixel for pixel.
    gin.bind_parameter('color_jitter.brightness', 0)
    gin.bind_parameter('color_jitter.saturation', None)
    gin.bind_parameter('color_jitter.hue', 0)
    parser = self._parser(cutout_fraction=10 / 24)
    cut_pixels = 0
    for seed in range(4):
      features, label = self._both(parser, _decoded(seed), [seed, 6])
      weak, strong = [_unnormalized(features[key].numpy())
                      for key in ('image', 'strong_image')]
      weak_valid = features['weak_valid'].numpy()[..., 0]
      strong_valid = features['strong_valid'].numpy()[..., 0]
      cut = (weak_valid == 1) & (strong_valid == 0)
      self.assertAllEqual(strong_valid, weak_valid * ~cut)
      self.assertTrue((features['strong_image'].numpy()[cut] == 0).all())
      self.assertTrue((features['strong_label'].numpy()[cut] == _IGNORE).all())
      kept = strong_valid == 1
      self.assertAllEqual(features['strong_label'].numpy()[kept],
                          label.numpy()[kept])
      cut_pixels += cut.sum()
      for channel in range(3):
        x, y = weak[..., channel][kept], strong[..., channel][kept]
        inside = (y > 1e-3) & (y < 1 - 1e-3)
        fit = np.polyfit(x[inside], y[inside], 1)
        self.assertLess(np.abs(np.polyval(fit, x[inside]) - y[inside]).max(),
                        1e-3)
        shifted = np.roll(weak[..., channel], 1, axis=1)[kept][inside]
        misfit = np.polyfit(shifted, y[inside], 1)
        self.assertGreater(
            np.abs(np.polyval(misfit, shifted) - y[inside]).max(), 0.05)
    self.assertGreater(cut_pixels, 0)

  def test_record_without_a_label_map_gives_the_ignore_label(self):
    image = np.random.default_rng(3).integers(0, 256, (20, 25, 3), np.uint8)
    record = tfexample.make_example(tf.io.encode_png(image).numpy(), None,
                                    'u.png', 'png', 20, 25).SerializeToString()
    decoded = tfexample.Decoder(label_optional=True).decode(tf.constant(record))
    features, label = self._parser()(decoded, tf.constant([1, 2]))
    self.assertAllEqual(label, np.full((24, 24, 1), _IGNORE))
    self.assertAllEqual(features['strong_label'], label)
    self.assertGreater(features['weak_valid'].numpy().sum(), 0)


class MergeTest(tf.test.TestCase):

  def test_ground_truth_only_under_monitor_and_class_lists(self):
    rng = np.random.default_rng(1)
    label = rng.integers(0, 3, (2, 5, 6, 1)).astype(np.int32)
    label[0][label[0] == 2] = _IGNORE  # Image 0 holds classes 0 and 1.
    strong_label = np.full_like(label, _IGNORE)
    strong_label[1, 0, 0] = 3
    parser = views.UnlabeledParser(_IGNORE, 5, crop_size=(5, 6))
    labeled = ({'image': tf.zeros([2, 5, 6, 3])}, tf.zeros([2, 5, 6, 1]))
    unlabeled = ({'image': tf.ones([2, 5, 6, 3]),
                  'strong_label': tf.constant(strong_label)},
                 tf.constant(label))
    features, _ = views._merge(labeled, unlabeled, parser)  # pylint: disable=protected-access
    self.assertCountEqual(features, [
        'image', 'unlabeled/image', 'monitor/unlabeled_label',
        'monitor/unlabeled_strong_label', 'unlabeled/class_labels',
        'unlabeled/strong_class_labels'])
    self.assertAllEqual(features['monitor/unlabeled_label'], label)
    self.assertAllEqual(features['monitor/unlabeled_strong_label'],
                        strong_label)
    self.assertAllEqual(features['unlabeled/class_labels'],
                        [[1, 0, 0, 0], [1, 1, 0, 0]])
    self.assertAllEqual(features['unlabeled/strong_class_labels'],
                        [[0, 0, 0, 0], [0, 0, 1, 0]])


if __name__ == '__main__':
  tf.test.main()
