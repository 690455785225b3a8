"""Tests for multi-scale and flipped inference against closed forms."""

import numpy as np
import tensorflow as tf

from official_seg.modeling import inference


def _model(images, training=False):
  """A stand-in model whose 2-class logits are the first two channels."""
  del training  # Unused.
  return {'logits': images[..., :2] * 3.0}


def _softmax(logits):
  exp = np.exp(logits - logits.max(-1, keepdims=True))
  return exp / exp.sum(-1, keepdims=True)


class InferenceTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.images = rng.normal(size=(2, 8, 12, 3)).astype(np.float32)

  def test_single_scale_is_softmax(self):
    probabilities = inference.predict_probabilities(_model, tf.constant(self.images))
    self.assertAllClose(probabilities, _softmax(self.images[..., :2] * 3.0),
                        rtol=1e-5)

  def test_flip_averages_the_flipped_pass_flipped_back(self):
    probabilities = inference.predict_probabilities(
        _model, tf.constant(self.images), add_flipped_images=True)
    # Flip, model, flip back: the stand-in commutes with flipping, so both
    # passes agree and the average equals one pass.
    self.assertAllClose(probabilities, _softmax(self.images[..., :2] * 3.0),
                        rtol=1e-5)

    def shifted(images, training=False):
      del training  # Unused.
      # Not flip-equivariant: logits depend on the column index.
      columns = tf.cast(tf.range(tf.shape(images)[2]), tf.float32)
      return {'logits': tf.stack([images[..., 0],
                                  images[..., 1] + columns], axis=-1)}

    got = inference.predict_probabilities(shifted, tf.constant(self.images),
                                          add_flipped_images=True)
    columns = np.arange(12, dtype=np.float32)
    plain = np.stack([self.images[..., 0], self.images[..., 1] + columns], -1)
    flipped = np.stack([self.images[..., 0], self.images[..., 1] + columns[::-1]], -1)
    self.assertAllClose(got, (_softmax(plain) + _softmax(flipped)) / 2, rtol=1e-5)

  def test_scales_resize_back_and_average(self):
    images = tf.constant(self.images)
    got = inference.predict_probabilities(_model, images, eval_scales=[0.5, 1.0])
    half = tf.image.resize(images, [4, 6], 'bilinear')
    back = tf.image.resize(half[..., :2] * 3.0, [8, 12], 'bilinear').numpy()
    expected = (_softmax(back) + _softmax(self.images[..., :2] * 3.0)) / 2
    self.assertAllClose(got, expected, rtol=1e-5)

  def test_base_logits_are_reused(self):
    base = tf.zeros([2, 8, 12, 2])
    got = inference.predict_probabilities(_model, tf.constant(self.images),
                                          base_logits=base)
    self.assertAllClose(got, np.full((2, 8, 12, 2), 0.5))

  def test_bad_scales_name_the_binding(self):
    with self.assertRaisesRegex(ValueError, 'eval_scales'):
      inference.predict_probabilities(_model, tf.constant(self.images),
                                      eval_scales=[])


if __name__ == '__main__':
  tf.test.main()
