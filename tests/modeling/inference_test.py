"""Tests for multi-scale and flipped inference against closed forms."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg.modeling import inference


def _predict(model, images, base_logits=None, with_logits=False, **settings):
  """`predict_probabilities` with `InferenceOptions` of these settings."""
  return inference.predict_probabilities(
      model, images, inference.InferenceOptions(**settings),
      base_logits=base_logits, with_logits=with_logits)


def _model(images, training=False):
  """A stand-in model whose 2-class logits are the first two channels."""
  del training  # Unused.
  return {'logits': images[..., :2] * 3.0}


def _softmax(logits):
  exp = np.exp(logits - logits.max(-1, keepdims=True))
  return exp / exp.sum(-1, keepdims=True)


# A stand-in model at output stride 4, as DeepLab's logits of 'SAME'
# strided layers (ceil(side / 4)); the column ramp makes flips matter.
_STRIDE = 4


def _strided_model(images, training=False):
  del training  # Unused.
  logits = tf.nn.avg_pool2d(images[..., :2], 3, _STRIDE, 'SAME') * 3.0
  columns = tf.cast(tf.range(tf.shape(logits)[2]), tf.float32)
  return {'logits': logits + tf.stack([0.0 * columns, 0.5 * columns], -1)}


def _scale_dimension(dim, scale):
  """DeepLab's core/utils.py scale_dimension, for an int dimension."""
  return int((float(dim) - 1.0) * scale + 1.0)


def _resize_aligned(images, size):
  return tf.compat.v1.image.resize_bilinear(images, size, align_corners=True)


def _deeplab_multi_scale(images, eval_scales, add_flipped_images):
  """DeepLab's predict_labels_multi_scale before its argmax.

  Each scale is multi_scale_logits(image_pyramid=[scale]): the (flipped)
  image scaled to scale_dimension, its logits resized to scale_dimension of
  the crop at max(1, scale) / output stride, then to the image, flipped
  back, softmax, averaged.

  Returns:
    (probabilities, logits of predict_labels at scale 1) as NumPy arrays.
  """
  height, width = images.shape[1:3]
  predictions = []
  for scale in eval_scales:
    logits_size = [_scale_dimension(d, max(1.0, scale) / _STRIDE)
                   for d in (height, width)]
    for flip in (False, True) if add_flipped_images else (False,):
      flipped = tf.reverse(images, [2]) if flip else images
      if scale != 1.0:
        flipped = _resize_aligned(
            flipped, [_scale_dimension(d, scale) for d in (height, width)])
      logits = _resize_aligned(_strided_model(flipped)['logits'], logits_size)
      logits = tf.reverse(logits, [2]) if flip else logits
      predictions.append(
          tf.nn.softmax(_resize_aligned(logits, [height, width])))
  plain = _resize_aligned(_strided_model(images)['logits'], [height, width])
  return np.mean(predictions, axis=0), plain.numpy()


class InferenceTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.images = rng.normal(size=(2, 8, 12, 3)).astype(np.float32)

  def test_single_scale_is_softmax(self):
    probabilities = _predict(_model, tf.constant(self.images))
    self.assertAllClose(probabilities, _softmax(self.images[..., :2] * 3.0),
                        rtol=1e-5)

  def test_flip_averages_the_flipped_pass_flipped_back(self):
    probabilities = _predict(
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

    got = _predict(shifted, tf.constant(self.images),
                                          add_flipped_images=True)
    columns = np.arange(12, dtype=np.float32)
    plain = np.stack([self.images[..., 0], self.images[..., 1] + columns], -1)
    flipped = np.stack([self.images[..., 0], self.images[..., 1] + columns[::-1]], -1)
    self.assertAllClose(got, (_softmax(plain) + _softmax(flipped)) / 2, rtol=1e-5)

  def test_scales_resize_back_and_average(self):
    images = tf.constant(self.images)
    got = _predict(_model, images, eval_scales=[0.5, 1.0])
    half = tf.image.resize(images, [4, 6], 'bilinear')
    back = tf.image.resize(half[..., :2] * 3.0, [8, 12], 'bilinear').numpy()
    expected = (_softmax(back) + _softmax(self.images[..., :2] * 3.0)) / 2
    self.assertAllClose(got, expected, rtol=1e-5)

  def test_base_logits_are_reused(self):
    base = tf.zeros([2, 8, 12, 2])
    got = _predict(_model, tf.constant(self.images),
                                          base_logits=base)
    self.assertAllClose(got, np.full((2, 8, 12, 2), 0.5))

  def test_bad_scales_name_the_binding(self):
    with self.assertRaisesRegex(ValueError, 'eval_scales'):
      _predict(_model, tf.constant(self.images),
                                      eval_scales=[])

  @parameterized.parameters(
      ([1.0], False, False), ([1.0], False, True),
      ([0.5, 0.75, 1.0, 1.25, 1.75], True, False),
      ([0.5, 0.75, 1.0, 1.25, 1.75], True, True),
      # Without 1.0, a scale below 1 still takes the scale-1 logits' size.
      ([0.75, 1.25], False, False))
  def test_aligned_corners_compute_deeplabs_evaluation(
      self, eval_scales, add_flipped_images, dynamic):
    # 13 x 18: sides where round(side * scale) and DeepLab's
    # int((side - 1) * scale + 1) differ, and where at scale 0.75 the logits
    # (3 x 4) resized to the scale-1 logits' size (4 x 5) and then to the
    # image differ from one resize.
    images = np.random.default_rng(1).normal(size=(2, 13, 18, 3))
    images = tf.constant(images, tf.float32)

    def predict(inputs):
      return _predict(
          _strided_model, inputs, eval_scales=eval_scales,
          add_flipped_images=add_flipped_images, align_corners=True,
          with_logits=True)

    if dynamic:  # The SavedModel's inputs have no static size.
      predict = tf.function(predict, input_signature=[
          tf.TensorSpec([None, None, None, 3], tf.float32)])
    probabilities, logits = predict(images)
    expected, expected_logits = _deeplab_multi_scale(
        images, eval_scales, add_flipped_images)
    self.assertAllClose(probabilities, expected, atol=1e-5, rtol=0)
    self.assertAllClose(logits, expected_logits, atol=1e-5, rtol=0)


if __name__ == '__main__':
  tf.test.main()
