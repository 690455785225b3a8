"""Tests for sliding-window inference against NumPy blending."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg.modeling import inference
from official_seg.modeling import tiling


def _predict(model, images, base_logits=None, with_logits=False, **settings):
  """`predict_probabilities` with `InferenceOptions` of these settings."""
  return inference.predict_probabilities(
      model, images, inference.InferenceOptions(**settings),
      base_logits=base_logits, with_logits=with_logits)


def _model(images, training=False):
  """A stand-in whose logits depend on the whole window (its mean)."""
  del training  # Unused.
  context = tf.reduce_mean(images[..., :1], axis=[1, 2], keepdims=True)
  return {'logits': tf.concat([images[..., :1] * 3.0 - context,
                               images[..., 1:2] * 2.0 + context], -1)}


def _np_softmax(logits):
  exp = np.exp(logits - logits.max(-1, keepdims=True))
  return exp / exp.sum(-1, keepdims=True)


def _np_model_probabilities(tile):
  context = tile[..., :1].mean(axis=(1, 2), keepdims=True)
  return _np_softmax(np.concatenate([tile[..., :1] * 3.0 - context,
                                     tile[..., 1:2] * 2.0 + context], -1))


def np_starts(length, window, stride):
  window = min(window, length)
  stride = min(stride, window)
  count = -(-max(length - window, 0) // stride) + 1
  return [min(i * stride, length - window) for i in range(count)], window


def _np_profile(window, blending):
  if blending == 'uniform':
    return np.ones(window)
  offsets = np.arange(window) - (window - 1) / 2.0
  return np.exp(-0.5 * (offsets / (0.125 * window)) ** 2)


def np_weight_maps(size, window, stride, blending):
  """Unnormalized weight maps of each window, row-major, and their sum."""
  maps = []
  rows, height = np_starts(size[0], window[0], stride[0])
  cols, width = np_starts(size[1], window[1], stride[1])
  for y in rows:
    for x in cols:
      weight = np.zeros(size)
      weight[y:y + height, x:x + width] = np.outer(
          _np_profile(height, blending), _np_profile(width, blending))
      maps.append(weight)
  maps = np.stack(maps)
  return maps, maps.sum(0)


def _np_windowed(images, window, stride, blending):
  """NumPy sliding-window probabilities of `_model`, blended."""
  size = images.shape[1:3]
  maps, total = np_weight_maps(size, window, stride, blending)
  rows, height = np_starts(size[0], window[0], stride[0])
  cols, width = np_starts(size[1], window[1], stride[1])
  result = np.zeros(images.shape[:3] + (2,))
  for index, (y, x) in enumerate((y, x) for y in rows for x in cols):
    tile = images[:, y:y + height, x:x + width]
    weight = maps[index, y:y + height, x:x + width] / total[
        y:y + height, x:x + width]
    result[:, y:y + height, x:x + width] += (
        _np_model_probabilities(tile) * weight[None, :, :, None])
  return result


def _dynamic(function):
  return tf.function(function, input_signature=[
      tf.TensorSpec([None, None, None, 3], tf.float32)])


class TilingTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.images = rng.normal(size=(2, 13, 17, 3)).astype(np.float32)

  @parameterized.product(blending=['uniform', 'gaussian'],
                         static=[True, False],
                         tta=[False, True])
  def test_one_window_covering_the_image_equals_whole_image(self, blending,
                                                             static, tta):
    options = dict(eval_scales=[0.75, 1.0] if tta else [1.0],
                   add_flipped_images=tta)
    whole = _predict(_model, tf.constant(self.images),
                                            **options)

    def windowed(images):
      return _predict(
          _model, images, window_size=[13, 40], window_stride=[5, 7],
          window_blending=blending, **options)

    got = (windowed if static else _dynamic(windowed))(
        tf.constant(self.images))
    self.assertAllEqual(got, whole)

  @parameterized.parameters(
      ((13, 17), (6, 8), (4, 5), 'uniform'),
      ((13, 17), (6, 8), (6, 8), 'gaussian'),
      ((9, 30), (9, 7), (3, 2), 'gaussian'),
      ((5, 5), (8, 3), (8, 1), 'uniform'))
  def test_weights_of_every_pixel_sum_to_one(self, size, window, stride,
                                             blending):
    windows = tiling.make_windows(list(window), list(stride), blending)
    got = tiling.weight_maps(size, windows).numpy()
    maps, total = np_weight_maps(size, window, stride, blending)
    self.assertGreater(len(maps), 1, 'a vacuous check')
    self.assertAllClose(got, maps / total[None], atol=1e-6)
    self.assertAllClose(got.sum(0), np.ones(size), atol=1e-6)

  # 3 x 3 windows: a batch of 2 leaves a row's last window a batch alone.
  @parameterized.product(blending=['uniform', 'gaussian'],
                         batch_size=[1, 2, 100])
  def test_windowed_prediction_equals_numpy_blending(self, blending,
                                                     batch_size):
    def windowed(images):
      return _predict(
          _model, images, window_size=[6, 8], window_stride=[4, 5],
          window_blending=blending, window_batch_size=batch_size)

    expected = _np_windowed(self.images, (6, 8), (4, 5), blending)
    whole = _np_model_probabilities(self.images)
    self.assertGreater(np.abs(expected - whole).max(), 0.05,
                       'the windows must change the result')
    self.assertAllClose(windowed(tf.constant(self.images)), expected,
                        atol=1e-5)
    # Twice: the sums are written into buffers of each run's own, so a
    # second run starts from zeros again.
    dynamic = _dynamic(windowed)
    for _ in range(2):
      self.assertAllClose(dynamic(tf.constant(self.images)), expected,
                          atol=1e-5)

  def test_logits_with_windows_are_log_probabilities(self):
    probabilities, logits = _predict(
        _model, tf.constant(self.images), window_size=[6, 8],
        with_logits=True)
    self.assertAllClose(tf.nn.softmax(logits), probabilities, atol=1e-6)

  def test_default_stride_overlaps_a_third(self):
    self.assertEqual(tiling.make_windows([513, 513]).stride, (342, 342))

  @parameterized.parameters(
      (dict(window_size=[0, 5]), r'InferenceOptions.window_size = '),
      (dict(window_size=[5]), r'InferenceOptions.window_size = '),
      (dict(window_size=[5, 5], window_stride=[0, 2]),
       r'InferenceOptions.window_stride = \[0, 2\]'),
      (dict(window_size=[5, 5], window_stride=[6, 2]),
       r'InferenceOptions.window_size = \[5, 5\], '
       r'InferenceOptions.window_stride = \[6, 2\]: expected '
       r'window_stride at most window_size'),
      (dict(window_size=[5, 5], window_blending='cosine'),
       r'InferenceOptions.window_blending = .cosine.'),
      (dict(window_size=[5, 5], window_batch_size=0),
       r'InferenceOptions.window_batch_size = 0'))
  def test_bad_settings_name_the_binding(self, settings, message):
    # The first line names the binding; gin adds the configurable's name.
    with self.assertRaisesRegex(ValueError, rf'^{message}[^\n]*\.\n'):
      _predict(_model, tf.constant(self.images),
                                      **settings)


if __name__ == '__main__':
  tf.test.main()
