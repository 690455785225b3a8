"""Tests of pseudo labels, the consistency loss, ramp-up and the monitors."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg.semi_supervised import pseudo_labels


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


class PseudoLabelsTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    rng = np.random.RandomState(0)
    self.decoder = rng.normal(scale=3.0, size=(2, 4, 5, 3)).astype(np.float32)
    self.cam = rng.normal(scale=0.5, size=(2, 4, 5, 3)).astype(np.float32)

  def test_calibrated_fusion_equals_numpy(self):
    both = np.concatenate([self.decoder, self.cam], 0).astype(np.float64)
    scale = 1.0 / np.sqrt(np.mean(both ** 2) + 1e-8)
    expected = 0.5 * (_softmax(self.decoder * scale) +
                      _softmax(self.cam * scale))
    fused = pseudo_labels.calibrated_fusion(self.decoder, self.cam)
    self.assertAllClose(fused, expected, atol=1e-6)
    self.assertAllClose(np.sum(fused, -1), np.ones((2, 4, 5)), atol=1e-6)

  @parameterized.parameters(0.5, 0.25, 1.0)
  def test_sharpen_equals_power_rule(self, temperature):
    p = _softmax(self.decoder.astype(np.float64))
    expected = p ** (1 / temperature)
    expected /= expected.sum(-1, keepdims=True)
    self.assertAllClose(
        pseudo_labels.sharpen(tf.constant(p, tf.float32), temperature),
        expected, atol=1e-6)

  def test_fused_soft_pseudo_label_equals_numpy(self):
    """The whole PseudoSeg target: fusion, sharpening, threshold."""
    both = np.concatenate([self.decoder, self.cam], 0).astype(np.float64)
    scale = 1.0 / np.sqrt(np.mean(both ** 2) + 1e-8)
    fused = 0.5 * (_softmax(self.decoder * scale) +
                   _softmax(self.cam * scale))
    sharp = fused ** 2
    sharp /= sharp.sum(-1, keepdims=True)
    labeler = pseudo_labels.PseudoLabeler(temperature=0.5, soft=True,
                                          threshold=0.7)
    targets, kept = labeler(pseudo_labels.calibrated_fusion(self.decoder,
                                                            self.cam))
    self.assertAllClose(targets, sharp, atol=1e-6)
    self.assertAllEqual(kept, (sharp.max(-1) >= 0.7).astype(np.float32))
    self.assertBetween(float(np.mean(kept)), 0.01, 0.99)

  def test_hard_targets_threshold_on_probability(self):
    p = _softmax(self.decoder.astype(np.float64)).astype(np.float32)
    labeler = pseudo_labels.PseudoLabeler(soft=False, threshold=0.95)
    targets, kept = labeler(tf.constant(p))
    self.assertAllEqual(targets, np.eye(3)[p.argmax(-1)])
    self.assertAllEqual(kept, (p.max(-1) >= 0.95).astype(np.float32))

  def test_zero_threshold_keeps_every_pixel(self):
    _, kept = pseudo_labels.PseudoLabeler()(tf.nn.softmax(self.decoder))
    self.assertAllEqual(kept, np.ones((2, 4, 5)))

  @parameterized.parameters({'temperature': 0.0}, {'threshold': 1.0},
                            {'threshold': -0.1})
  def test_bad_settings_name_the_binding(self, **kwargs):
    with self.assertRaisesRegex(ValueError, 'PseudoLabeler.'):
      pseudo_labels.PseudoLabeler(**kwargs)

  def test_consistency_loss_equals_numpy(self):
    rng = np.random.RandomState(1)
    targets = _softmax(rng.normal(size=(2, 4, 5, 3)))
    kept = (rng.uniform(size=(2, 4, 5)) > 0.3).astype(np.float32)
    valid = (rng.uniform(size=(2, 4, 5)) > 0.2).astype(np.float32)
    log_p = np.log(_softmax(self.decoder.astype(np.float64)))
    pixel = -np.sum(targets * log_p, -1)
    expected = np.sum(pixel * kept * valid) / np.sum(valid)
    loss = pseudo_labels.consistency_loss(
        self.decoder, tf.constant(targets, tf.float32), kept, valid)
    self.assertAllClose(loss, expected, atol=1e-5)

  def test_invalid_pixels_count_nowhere(self):
    rng = np.random.RandomState(2)
    targets = tf.constant(_softmax(rng.normal(size=(2, 4, 5, 3))), tf.float32)
    valid = np.ones((2, 4, 5), np.float32)
    valid[:, :2] = 0
    kept = np.ones_like(valid)
    changed = self.decoder.copy()
    changed[:, :2] += 100.0
    losses = [pseudo_labels.consistency_loss(logits, targets, kept, valid)
              for logits in (self.decoder, changed)]
    self.assertAllClose(losses[0], losses[1])
    self.assertEqual(
        pseudo_labels.consistency_loss(self.decoder, targets, kept,
                                       np.zeros_like(valid)), 0.0)

  def test_no_gradient_reaches_the_targets(self):
    probabilities = tf.Variable(tf.nn.softmax(self.decoder))
    logits = tf.Variable(self.cam)
    with tf.GradientTape() as tape:
      targets, kept = pseudo_labels.PseudoLabeler()(probabilities)
      loss = pseudo_labels.consistency_loss(logits, targets, kept,
                                            tf.ones([2, 4, 5]))
    grads = tape.gradient(loss, [probabilities, logits])
    self.assertIsNone(grads[0])
    self.assertGreater(float(tf.norm(grads[1])), 0.0)

  @parameterized.parameters((0, 100, np.exp(-5.0)), (50, 100, np.exp(-1.25)),
                            (100, 100, 1.0), (250, 100, 1.0), (0, 0, 1.0),
                            (7, 0, 1.0))
  def test_rampup_at_chosen_steps(self, step, rampup_steps, expected):
    self.assertAllClose(pseudo_labels.rampup(tf.constant(step, tf.int64),
                                             rampup_steps), expected)

  def test_accuracies_against_numpy(self):
    rng = np.random.RandomState(3)
    labels = rng.randint(0, 3, size=(2, 6, 6))
    labels[0, 0] = 255
    predictions = np.where(rng.uniform(size=labels.shape) > 0.4,
                           labels % 255, rng.randint(0, 3, labels.shape))
    weights = np.ones(labels.shape, np.float32)
    weights[1, :, :2] = 0
    counted = (labels != 255) & (weights > 0)
    right = (predictions == labels) & counted
    pixel = right.sum() / counted.sum()
    per_class = [right[labels == c].sum() / counted[labels == c].sum()
                 for c in range(3)]
    got = pseudo_labels.accuracies(tf.constant(predictions, tf.int32),
                                   labels, 3, 255, weights)
    self.assertAllClose(got, (pixel, np.mean(per_class)))

  def test_accuracies_of_unlabelled_batch_are_zero(self):
    labels = np.full((1, 3, 3), 255)
    got = pseudo_labels.accuracies(tf.zeros([1, 3, 3], tf.int32), labels, 3,
                                   255, np.ones((1, 3, 3), np.float32))
    self.assertAllEqual(got, (0.0, 0.0))


if __name__ == '__main__':
  tf.test.main()
