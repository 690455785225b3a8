"""Tests for crops that find rare classes: cat_max_ratio and foreground crops."""

import re

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import crop_sampling
from official_seg.data import image_ops
from official_seg.data import preprocess

IGNORE = 255


def _decoded(label):
  label = np.asarray(label, np.uint8)[..., None]
  return {'image': tf.constant(np.repeat(label, 3, axis=-1)),
          'label': tf.constant(label), 'filename': tf.constant('x.png')}


def _crops(parser, decoded, seeds):
  """The parser's label crops [n, h, w] for seeds [s, 7], in one graph."""
  call = tf.function(lambda seed: parser(decoded, seed)[1][..., 0])
  return np.stack([call(tf.constant([seed, 7], tf.int64)).numpy()
                   for seed in seeds])


def _draws(seeds, size, crop_size, tries):
  """Per seed, the first crop's offset and the redrawn ones, as the parser
  draws them: int [len(seeds), tries + 1, 2]."""

  @tf.function
  def draws(seed):
    crop_seed = tf.random.experimental.stateless_split(seed, 2)[1]
    first, _ = image_ops.random_crop_window(size, crop_size, False, crop_seed)
    return tf.stack([first] + [
        crop_sampling.redrawn_offset(size, crop_size, crop_seed, attempt)
        for attempt in range(1, tries + 1)])

  return [draws(tf.constant([seed, 7], tf.int64)).numpy() for seed in seeds]


def _numpy_crop(label, offset, crop_size):
  """The crop at `offset` of `label` padded with IGNORE to the crop size."""
  height, width = (max(s, c) for s, c in zip(label.shape, crop_size))
  padded = np.full((height, width), IGNORE, label.dtype)
  padded[:label.shape[0], :label.shape[1]] = label
  return padded[offset[0]:offset[0] + crop_size[0],
                offset[1]:offset[1] + crop_size[1]]


def _numpy_balanced(crop, ratio):
  """mmsegmentation's RandomCrop test, as written there in NumPy."""
  labels, cnt = np.unique(crop, return_counts=True)
  cnt = cnt[labels != IGNORE]
  return len(cnt) > 1 and np.max(cnt) / np.sum(cnt) < ratio


def _parser(crop_size, sampling, **kwargs):
  return preprocess.Parser(True, IGNORE, 8, crop_size=crop_size,
                           crop_sampling=sampling, **kwargs)


class CatMaxRatioTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  @parameterized.named_parameters(
      # Class 1 everywhere but a 6x6 block of class 2 and an ignored band:
      # most 8x8 crops hold class 1 alone.
      ('inside', (24, 24), 0.75, 4),
      # Shorter than the crop: the padding is ignored, never counted.
      ('padded', (6, 30), 0.6, 3))
  def test_each_crop_is_the_first_that_passes_or_the_last_draw(
      self, size, ratio, tries):
    label = np.ones(size, np.uint8)
    label[2:8, 12:18] = 2
    label[:, 20:22] = IGNORE
    crop_size = (8, 8)
    sampling = crop_sampling.CropSampling(cat_max_ratio=ratio,
                                          crop_tries=tries)
    seeds = range(40)
    crops = _crops(_parser(crop_size, sampling, random_flip=False),
                   _decoded(label), seeds)
    chosen = []
    offsets = _draws(seeds, size, crop_size, tries)
    for seed, crop, offset in zip(seeds, crops, offsets):
      draws = [_numpy_crop(label, o, crop_size) for o in offset]
      first = next((i for i in range(tries)
                    if _numpy_balanced(draws[i], ratio)), tries)
      self.assertAllEqual(crop, draws[first], f'seed {seed}')
      chosen.append(first)
    # Both ends of the rule were met: a redrawn crop that passed, and the
    # unchecked draw after `tries` failures.
    self.assertNotEmpty([i for i in chosen if 0 < i < tries])
    self.assertIn(tries, chosen)

  def test_the_same_seed_gives_the_same_crop(self):
    label = np.zeros((30, 30), np.uint8)
    label[10:14, 3:9] = 3
    parser = _parser((9, 9), crop_sampling.CropSampling(cat_max_ratio=0.5),
                     min_scale_factor=0.5, max_scale_factor=2.0,
                     scale_factor_step_size=0.25)
    first, again = (_crops(parser, _decoded(label), range(12))
                    for _ in range(2))
    self.assertAllEqual(first, again)
    self.assertGreater(len({crop.tobytes() for crop in first}), 1)

  @parameterized.named_parameters(
      ('ratio_above_one', {'cat_max_ratio': 1.5},
       'CropSampling.cat_max_ratio = 1.5: expected a number in (0, 1]'),
      ('no_tries', {'crop_tries': 0},
       'CropSampling.crop_tries = 0: expected a positive whole number'),
      ('share', {'foreground_share': -0.1},
       'CropSampling.foreground_share = -0.1: expected a number in [0, 1]'),
      ('classes', {'foreground_classes': [3, 256]},
       'CropSampling.foreground_classes = [3, 256]: expected a list'))
  def test_values_out_of_range_name_the_setting(self, kwargs, message):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                re.escape(message)):
      crop_sampling.CropSampling(**kwargs)


class ForegroundTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    # Background, a large class 1, and single pixels of classes 3 and 5 in
    # opposite corners: no 9x9 crop holds both.
    self.label = np.zeros((40, 40), np.uint8)
    self.label[20:40, 0:20] = 1
    self.label[2, 37] = 3
    self.label[36, 3] = 5
    self.label[:, 18] = IGNORE

  @parameterized.named_parameters(
      ('scale_one', 1.0, 1.0, False),
      ('scaled_up_and_flipped', 1.0, 2.0, True))
  def test_share_one_centres_every_crop_on_a_named_class(
      self, low, high, flip):
    sampling = crop_sampling.CropSampling(foreground_share=1.0,
                                          foreground_classes=[3])
    parser = _parser((9, 9), sampling, min_scale_factor=low,
                     max_scale_factor=high, scale_factor_step_size=0.25,
                     random_flip=flip)
    crops = _crops(parser, _decoded(self.label), range(30))
    self.assertTrue(all((crop == 3).any() for crop in crops))

  def test_without_named_classes_a_class_present_is_drawn_uniformly(self):
    sampling = crop_sampling.CropSampling(foreground_share=1.0)
    label = np.where(self.label == 1, 0, self.label)  # 3 and 5 are left.
    crops = _crops(_parser((9, 9), sampling), _decoded(label), range(200))
    holds_3 = sum(bool((crop == 3).any()) for crop in crops)
    holds_5 = sum(bool((crop == 5).any()) for crop in crops)
    self.assertEqual(holds_3 + holds_5, 200)
    # Binomial(200, 1/2): 4 standard deviations are 28.
    self.assertLess(abs(holds_3 - 100), 28)

  def test_share_zero_or_no_named_pixel_is_the_plain_crop(self):
    decoded = _decoded(self.label)
    plain = _crops(_parser((9, 9), None), decoded, range(12))
    for sampling in (crop_sampling.CropSampling(foreground_share=0.0),
                     crop_sampling.CropSampling(foreground_share=1.0,
                                                foreground_classes=[4])):
      self.assertAllEqual(_crops(_parser((9, 9), sampling), decoded,
                                 range(12)), plain)

  def test_the_centred_window_moves_only_to_stay_inside(self):
    # A 21x31 label scaled to 41x61: pixel p lands at round(p * 40 / 20)
    # down and round(p * 60 / 30) across; windows of 9x9 in 41x61.
    for pixel, expected in (((10, 15), (16, 26)), ((1, 0), (0, 0)),
                            ((20, 30), (32, 52))):
      got = crop_sampling.centred_window(
          tf.constant(pixel), tf.constant([21, 31]), tf.constant([41, 61]),
          (9, 9))
      self.assertAllEqual(got, expected)
    # Smaller than the crop: the only window of the padded image.
    self.assertAllEqual(crop_sampling.centred_window(
        tf.constant([3, 3]), tf.constant([5, 5]), tf.constant([5, 5]),
        (9, 9)), [0, 0])

  def test_the_share_of_centred_crops_is_the_setting(self):
    label = np.zeros((64, 64), np.uint8)
    label[40, 20] = 1
    share, count, crop = 0.3, 400, 8
    sampling = crop_sampling.CropSampling(foreground_share=share)
    crops = _crops(_parser((crop, crop), sampling, random_flip=False),
                   _decoded(label), range(count))
    found = sum(bool((c == 1).any()) for c in crops)
    # A uniform crop holds the pixel when its offset is one of the `crop`
    # values from pixel - crop + 1 to pixel, of 64 - crop + 1, per axis.
    offsets = np.arange(64 - crop + 1)
    covers = [((offsets <= p) & (offsets > p - crop)).mean() for p in (40, 20)]
    expected = share + (1 - share) * np.prod(covers)
    bound = 4 * np.sqrt(expected * (1 - expected) / count)
    self.assertLess(abs(found / count - expected), bound)


if __name__ == '__main__':
  tf.test.main()
