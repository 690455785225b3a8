"""A tiny batch with ignored pixels and a rare class, NumPy helpers, and the contract every loss keeps."""

import numpy as np
import tensorflow as tf

IGNORE = 255
NUM_CLASSES = 3
# Two images of 4x5 pixels. Class 2 is rare: 2 pixels of image 0, none of
# image 1. Row 0 of image 0 and one pixel of image 1 are ignored.
LABELS = np.array([
    [[IGNORE] * 5,
     [0, 0, 1, 1, 0],
     [0, 2, 1, 0, 0],
     [0, 0, 2, 1, 1]],
    [[0, 0, 0, 1, 1],
     [0, 0, 1, 1, IGNORE],
     [0, 0, 0, 1, 1],
     [0, 0, 0, 0, 1]],
], np.int32)[..., np.newaxis]


def logits(seed=0, shape=(2, 4, 5)):
  """float64 [*shape, NUM_CLASSES] of a standard normal."""
  return np.random.default_rng(seed).normal(size=shape + (NUM_CLASSES,))


def softmax(values):
  shifted = values - values.max(-1, keepdims=True)
  exponentials = np.exp(shifted)
  return exponentials / exponentials.sum(-1, keepdims=True)


def one_hot_and_valid(labels):
  """(one-hot float64 [B, H, W, C] with zero rows where ignored, valid [B, H, W])."""
  labels = labels[..., 0]
  valid = (labels != IGNORE).astype(np.float64)
  one_hot = np.eye(NUM_CLASSES)[np.where(labels == IGNORE, 0, labels)]
  return one_hot * valid[..., np.newaxis], valid


def numeric_gradient(function, values, step=1e-6):
  """Central differences of a NumPy function of a float64 array."""
  gradient = np.zeros_like(values)
  for index in np.ndindex(values.shape):
    up, down = values.copy(), values.copy()
    up[index] += step
    down[index] -= step
    gradient[index] = (function(up) - function(down)) / (2 * step)
  return gradient


def gradient(loss, values, labels=LABELS, **settings):
  """(value, d value / d logits) of a TensorFlow loss, in float32."""
  values = tf.constant(values, tf.float32)
  with tf.GradientTape() as tape:
    tape.watch(values)
    value = loss(values, tf.constant(labels), IGNORE, **settings)
  return value, tape.gradient(value, values)


class LossContract:
  """What every loss of `Components.loss` keeps; mixed into a test case.

  A subclass sets `loss` (called as loss(logits, labels, ignore_label,
  **settings)), `reference` (reference(logits, labels, **settings), the same
  loss in NumPy float64, written from its formula) and `settings`, the
  settings whose values are checked besides the defaults.
  """

  loss = None
  reference = None
  settings = ()

  def test_declares_the_softmax_output_kind(self):
    # Read by the runtime, which refuses it with the sigmoid kind.
    self.assertEqual(type(self).loss.output_kind, 'softmax')

  def test_value_and_gradient_match_the_numpy_reference(self):
    values = logits(seed=1)
    value, grad = gradient(type(self).loss, values)
    self.assertEqual(value.dtype, tf.float32)
    self.assertAllClose(value, self.reference(values, LABELS), rtol=1e-5,
                        atol=1e-7)
    expected = numeric_gradient(lambda x: self.reference(x, LABELS), values)
    self.assertAllClose(grad, expected, rtol=1e-4, atol=1e-6)

  def test_value_matches_the_numpy_reference_under_each_setting(self):
    self.assertNotEmpty(self.settings)
    for index, settings in enumerate(self.settings):
      values = logits(seed=10 + index)
      with self.subTest(settings=settings):
        value = type(self).loss(tf.constant(values, tf.float32),
                                tf.constant(LABELS), IGNORE, **settings)
        self.assertAllClose(value, self.reference(values, LABELS, **settings),
                            rtol=1e-5, atol=1e-7)

  def test_ignored_pixels_get_exactly_zero_gradient(self):
    _, grad = gradient(type(self).loss, logits(seed=2))
    ignored = LABELS[..., 0] == IGNORE
    self.assertAllEqual(grad.numpy()[ignored], np.zeros([ignored.sum(), 3]))
    self.assertGreater(np.abs(grad.numpy()[~ignored]).sum(), 0)

  def test_resizes_the_logits_bilinearly_to_the_labels(self):
    small = tf.constant(logits(seed=3, shape=(2, 2, 3)), tf.float32)
    resized = tf.image.resize(small, [4, 5], method='bilinear')
    loss = type(self).loss
    self.assertAllClose(loss(small, tf.constant(LABELS), IGNORE),
                        loss(resized, tf.constant(LABELS), IGNORE),
                        rtol=1e-6, atol=0)

  def test_low_precision_logits_give_a_float32_loss_of_the_same_values(self):
    loss = type(self).loss
    for dtype in (tf.float16, tf.bfloat16):
      low = tf.cast(tf.constant(logits(seed=4), tf.float32), dtype)
      value = loss(low, tf.constant(LABELS), IGNORE)
      self.assertEqual(value.dtype, tf.float32)
      # Cast to float32 first: the same loss as of the float32 values.
      self.assertAllClose(
          value, loss(tf.cast(low, tf.float32), tf.constant(LABELS), IGNORE),
          rtol=0, atol=0)

  def test_builds_with_static_shapes_only(self):
    loss = type(self).loss

    def value_and_gradient(values, labels):
      with tf.GradientTape() as tape:
        tape.watch(values)
        value = loss(values, labels, IGNORE)
      return value, tape.gradient(value, values)

    function = tf.function(value_and_gradient).get_concrete_function(
        tf.TensorSpec([2, 2, 3, NUM_CLASSES], tf.bfloat16),
        tf.TensorSpec([2, 4, 5, 1], tf.int32))
    self.assertEqual(function.output_shapes[0], tf.TensorShape([]))
    dynamic = [f'{op.type} {op.name}: {output.shape}'
               for op in function.graph.get_operations()
               for output in op.outputs
               if not output.shape.is_fully_defined()]
    self.assertEmpty(dynamic)
