"""Tests for the output kind: bit-mask labels, thresholds, masks and checks."""

import functools

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.modeling import outputs

_IGNORE = 255


def numpy_bits(labels, num_classes):
  """Targets [..., C] and valid [...] of bit-mask labels [..., 1], by NumPy."""
  labels = labels[..., 0]
  valid = labels != _IGNORE
  targets = np.stack([(labels >> c) & 1 for c in range(num_classes)], -1)
  return targets * valid[..., None], valid


class LabelBitsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(1, 3)
  def test_bits_of_each_class_and_the_ignored_pixels(self, num_classes):
    rng = np.random.default_rng(num_classes)
    labels = rng.integers(0, 2**num_classes, size=(2, 5, 4, 1))
    labels[0, :2] = _IGNORE
    targets, valid = outputs.label_bits(tf.constant(labels, tf.int32),
                                        num_classes, _IGNORE)
    expected_targets, expected_valid = numpy_bits(labels, num_classes)
    self.assertAllEqual(targets, expected_targets)
    self.assertAllEqual(valid, expected_valid)

  def test_masks_at_each_threshold_and_their_bit_mask(self):
    rng = np.random.default_rng(0)
    probabilities = rng.uniform(size=(2, 3, 4, 3)).astype(np.float32)
    thresholds = [0.5, 0.2, 0.9]
    masks = outputs.threshold_masks(tf.constant(probabilities), thresholds)
    expected = (probabilities > np.array(thresholds)).astype(np.int32)
    self.assertAllEqual(masks, expected)
    self.assertAllEqual(outputs.bit_mask(masks),
                        expected[..., 0] + 2 * expected[..., 1] +
                        4 * expected[..., 2])


class OutputKindTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()  # OutputKind is configurable: no earlier test's kind.

  def test_softmax_is_the_default_and_predicts_the_argmax(self):
    kind = outputs.OutputKind()
    logits = tf.constant([[[0.0, 2.0, 1.0]]])
    probabilities = kind.activate(logits)
    exp = np.exp([0.0, 2.0, 1.0])
    self.assertAllClose(probabilities[0, 0], exp / exp.sum())
    labels, masks = kind.predict(probabilities, 3)
    self.assertAllEqual(labels, [[1]])
    self.assertIsNone(masks)
    self.assertEqual(kind.label_values(3), 3)

  def test_sigmoid_predicts_masks_at_per_class_thresholds(self):
    kind = outputs.OutputKind('sigmoid', [0.5, 0.3])
    logits = tf.constant([[[0.1, -0.5], [-0.1, -1.0]]])
    probabilities = kind.activate(logits)
    self.assertAllClose(probabilities, 1 / (1 + np.exp(-logits.numpy())))
    labels, masks = kind.predict(probabilities, 2)
    # sigmoid(-0.5) = 0.378 > 0.3; sigmoid(-1) = 0.269 < 0.3.
    self.assertAllEqual(masks, [[[1, 1], [0, 0]]])
    self.assertAllEqual(labels, [[3, 0]])
    self.assertEqual(kind.label_values(2), 4)

  def test_sigmoid_logits_of_its_probabilities_are_the_logits(self):
    kind = outputs.OutputKind('sigmoid')
    logits = tf.constant([-3.0, -0.5, 0.0, 2.0])
    self.assertAllClose(kind.logits_of(kind.activate(logits)), logits,
                        atol=1e-5)

  def test_one_threshold_serves_every_class(self):
    kind = outputs.OutputKind('sigmoid', [0.25])
    self.assertAllClose(kind.class_thresholds(3), [0.25] * 3)

  @parameterized.parameters(
      (dict(kind='softmx'), 'OutputKind.kind'),
      (dict(kind='sigmoid', thresholds=[0.5, 1.0]), 'OutputKind.thresholds'),
      (dict(kind='sigmoid', thresholds=[]), 'OutputKind.thresholds'))
  def test_a_setting_of_the_wrong_form_names_it(self, settings, binding):
    with self.assertRaisesRegex(validation.ConfigurationError, binding):
      outputs.OutputKind(**settings)

  @parameterized.parameters((2, 3, 'thresholds'), (8, 1, 'at most 7'))
  def test_thresholds_or_classes_the_labels_cannot_hold(self, num_classes,
                                                        count, message):
    kind = outputs.OutputKind('sigmoid', [0.5] * count)
    with self.assertRaisesRegex(validation.ConfigurationError, message):
      kind.class_thresholds(num_classes)


class LossKindTest(tf.test.TestCase):
  """A loss declares its output kind; what `declared_kind` reads."""

  def test_the_declaration_survives_the_configurable(self):

    @gin.configurable('declared_sigmoid_loss_of_a_test')
    @outputs.loss_of_kind('sigmoid')
    def loss(logits, labels, ignore_label):
      del labels, ignore_label  # Unused.
      return logits

    self.assertEqual(loss.output_kind, 'sigmoid')
    self.assertEqual(outputs.declared_kind(loss), 'sigmoid')
    self.assertEqual(outputs.declared_kind(functools.partial(loss)), 'sigmoid')

  def test_an_undeclared_loss_declares_nothing(self):
    self.assertIsNone(outputs.declared_kind(lambda *args: 0.0))

  def test_an_unknown_kind_fails_where_it_is_declared(self):
    with self.assertRaisesRegex(ValueError, "'softmaxx'"):
      outputs.loss_of_kind('softmaxx')


if __name__ == '__main__':
  tf.test.main()
