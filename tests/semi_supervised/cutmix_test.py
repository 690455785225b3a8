"""Tests for CutMix: UniMatch's boxes, the pasted views, the labels that follow."""

import gin
import numpy as np
import tensorflow as tf

from official_seg.semi_supervised import cutmix
from official_seg.semi_supervised import views
from tests.semi_supervised import views_test

_IGNORE = views_test._IGNORE  # pylint: disable=protected-access
_GEOMETRY = views_test._GEOMETRY  # pylint: disable=protected-access
_decoded = views_test._decoded  # pylint: disable=protected-access


class CutMixTest(tf.test.TestCase):

  def test_boxes_follow_unimatch_draws(self):
    count, height, width = 4000, 40, 50
    apply, boxes = cutmix.cutmix_boxes(count, (height, width), 0.5, [3, 4])
    top, left, box_height, box_width = boxes.numpy().T
    self.assertBetween(apply.numpy().mean(), 0.45, 0.55)
    self.assertTrue(((top >= 0) & (top < height)).all())
    self.assertTrue(((left >= 0) & (left < width)).all())
    self.assertEqual(len(set(top)), height)
    share = box_height * box_width / (height * width)
    self.assertLessEqual(share.max(), 0.4)
    self.assertGreaterEqual(
        ((box_height + 1) * (box_width + 1) / (height * width)).min(), 0.02)
    self.assertLess(share.min(), 0.03)
    self.assertGreater(share.max(), 0.37)
    self.assertTrue((box_height / (box_width + 1) <= 1 / 0.3).all())
    self.assertTrue(((box_height + 1) / box_width >= 0.3).all())

  def _batch(self, size=3):
    rng = np.random.default_rng(5)
    features = {
        'strong_image': rng.normal(size=(size, 12, 14, 3)).astype(np.float32),
        'strong_valid': rng.integers(0, 2, (size, 12, 14, 1)).astype(
            np.float32),
        'strong_label': rng.integers(0, 5, (size, 12, 14, 1)).astype(np.int32),
        'image': rng.normal(size=(size, 12, 14, 3)).astype(np.float32),
    }
    return features, rng.integers(0, 5, (size, 12, 14, 1)).astype(np.int32)

  def test_pasted_boxes_against_numpy(self):
    features, labels = self._batch()
    seed = tf.constant([8, 1])
    mixed, mixed_labels = cutmix.cutmix(
        {k: tf.constant(v) for k, v in features.items()}, labels, 0.7, seed)
    # The boxes from the same uniform draws, by UniMatch's formulas in
    # NumPy (float32, as the draws): area share, aspect ratio, corner.
    draws = tf.random.stateless_uniform([3, 5], seed).numpy()
    area = (np.float32(0.02) + draws[:, 0] * np.float32(0.38)) * 12 * 14
    ratio = np.float32(0.3) + draws[:, 1] * np.float32(1 / 0.3 - 0.3)
    tops, lefts = np.floor(draws[:, 2] * 12), np.floor(draws[:, 3] * 14)
    heights, widths = np.floor(np.sqrt(area * ratio)), np.floor(
        np.sqrt(area / ratio))
    apply = draws[:, 4] < 0.7
    self.assertBetween(apply.sum(), 1, 2)  # This seed pastes into some.
    mask = np.zeros((3, 12, 14, 1), np.float32)
    for i in range(3):
      top, left, height, width = [int(v[i]) for v in (tops, lefts, heights,
                                                      widths)]
      if apply[i]:
        mask[i, top:top + height, left:left + width] = 1
    self.assertGreater(mask.sum(), 0)
    partner = np.where(apply, [1, 2, 0], [0, 1, 2])
    self.assertAllEqual(mixed['mix_index'], partner)
    self.assertAllEqual(mixed['mix_mask'], mask)
    for key in ('strong_image', 'strong_valid', 'strong_label'):
      expected = np.where(mask > 0, features[key][[1, 2, 0]], features[key])
      self.assertAllEqual(mixed[key], expected)
    self.assertAllEqual(mixed['image'], features['image'])
    self.assertAllEqual(mixed_labels, labels)

  def test_probability_zero_pastes_nothing(self):
    features, labels = self._batch()
    mixed, _ = cutmix.cutmix(features, labels, 0.0)
    self.assertAllEqual(mixed['mix_index'], [0, 1, 2])
    self.assertAllEqual(mixed['mix_mask'], np.zeros((3, 12, 14, 1)))
    for key, value in features.items():
      self.assertAllEqual(mixed[key], value)

  def test_mixed_weak_label_is_the_strong_label_outside_the_cutout(self):
    gin.clear_config()
    parser = views.UnlabeledParser(_IGNORE, 4, strong_jitter=False,
                                   cutout_fraction=8 / 24, **_GEOMETRY)
    batch = tf.data.Dataset.range(4).map(
        lambda i: parser(_decoded(0), tf.stack([i, i]))).batch(4)
    features, labels = next(iter(batch))
    mixed, _ = cutmix.cutmix(features, labels, 1.0, [2, 2])
    self.assertGreater(mixed['mix_mask'].numpy().sum(), 0)
    index, inside = mixed['mix_index'].numpy(), mixed['mix_mask'].numpy() > 0
    self.assertNotAllEqual(index, np.arange(4))
    followed = np.where(inside, labels.numpy()[index], labels.numpy())
    kept = mixed['strong_valid'].numpy() > 0
    self.assertAllEqual(followed[kept],
                        mixed['strong_label'].numpy()[kept])
    self.assertTrue((mixed['strong_label'].numpy()[~kept] == _IGNORE).all())
    self.assertTrue((followed[~kept] != _IGNORE).any())

  def test_mix_follows_the_partner_inside_the_mask(self):
    values = np.arange(3 * 2 * 2 * 1, dtype=np.int32).reshape(3, 2, 2, 1)
    mask = np.zeros((3, 2, 2, 1), np.float32)
    mask[0, 0, 1] = mask[2, 1, 0] = 1
    mixed = cutmix.mix(values, tf.constant([1, 1, 0]), mask).numpy()
    expected = values.copy()
    expected[0, 0, 1] = values[1, 0, 1]
    expected[2, 1, 0] = values[0, 1, 0]
    self.assertAllEqual(mixed, expected)


if __name__ == '__main__':
  tf.test.main()
