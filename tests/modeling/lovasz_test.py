"""Lovász-softmax against a NumPy transcription of the reference implementation."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.modeling import lovasz
from tests.modeling import loss_testing

IGNORE = loss_testing.IGNORE
LABELS = loss_testing.LABELS


def _lovasz_grad(truth_sorted):
  """bermanmaxim/LovaszSoftmax's lovasz_grad."""
  total = truth_sorted.sum()
  intersection = total - np.cumsum(truth_sorted)
  union = total + np.cumsum(1.0 - truth_sorted)
  jaccard = 1.0 - intersection / union
  jaccard[1:] = jaccard[1:] - jaccard[:-1]
  return jaccard


def _flat_loss(probabilities, labels, classes):
  """The reference's lovasz_softmax_flat on [P, C] pixels left after ignoring."""
  terms = []
  for c in range(probabilities.shape[1]):
    truth = (labels == c).astype(np.float64)
    if classes == 'present' and truth.sum() == 0:
      continue
    errors = np.abs(truth - probabilities[:, c])
    order = np.argsort(-errors, kind='stable')
    terms.append(errors[order] @ _lovasz_grad(truth[order]))
  return np.mean(terms)


def _numpy_lovasz(logits, labels, classes='present', per_image=False):
  """The reference's lovasz_softmax with ignored pixels dropped; per image,
  the mean over images with a labelled pixel."""
  probabilities = loss_testing.softmax(logits)
  labels = labels[..., 0]
  groups = [[b] for b in range(len(labels))] if per_image else [
      list(range(len(labels)))]
  group_losses = []
  for images in groups:
    kept = labels[images] != IGNORE
    if kept.any():
      group_losses.append(_flat_loss(probabilities[images][kept],
                                     labels[images][kept], classes))
  return np.mean(group_losses) if group_losses else 0.0


def _value(values, labels=LABELS, **settings):
  return lovasz.lovasz_softmax_loss(tf.constant(values, tf.float32),
                                    tf.constant(labels), IGNORE, **settings)


class LovaszSoftmaxTest(loss_testing.LossContract, tf.test.TestCase,
                        parameterized.TestCase):

  loss = staticmethod(lovasz.lovasz_softmax_loss)
  reference = staticmethod(_numpy_lovasz)
  settings = tuple(dict(classes=classes, per_image=per_image)
                   for classes in lovasz.CLASSES for per_image in (True, False))

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_per_image_gradient_with_all_classes_matches_finite_differences(self):
    values = loss_testing.logits(seed=12)
    settings = dict(classes='all', per_image=True)
    _, grad = loss_testing.gradient(lovasz.lovasz_softmax_loss, values,
                                    **settings)
    expected = loss_testing.numeric_gradient(
        lambda x: _numpy_lovasz(x, LABELS, **settings), values)
    self.assertAllClose(grad, expected, rtol=1e-4, atol=1e-6)

  def test_an_absent_class_adds_its_largest_probability_with_all(self):
    # One image, labels of class 0 and 1 only: class 2's term is max p(2).
    values = loss_testing.logits(seed=13)[1:]
    labels = np.where(LABELS[1:] == IGNORE, 0, LABELS[1:])
    present = float(_value(values, labels, classes='present'))
    every = float(_value(values, labels, classes='all'))
    largest = loss_testing.softmax(values)[..., 2].max()
    self.assertAllClose(every, (2 * present + largest) / 3, rtol=1e-5)

  @parameterized.parameters(True, False)
  def test_an_image_all_ignored_adds_nothing(self, per_image):
    labels = LABELS.copy()
    labels[1] = IGNORE
    values = loss_testing.logits(seed=14)
    self.assertAllClose(_value(values, labels, per_image=per_image),
                        _value(values[:1], labels[:1]), rtol=1e-6)

  def test_a_batch_all_ignored_gives_0_and_no_gradient(self):
    labels = np.full_like(LABELS, IGNORE)
    value, grad = loss_testing.gradient(lovasz.lovasz_softmax_loss,
                                        loss_testing.logits(), labels)
    self.assertEqual(float(value), 0.0)
    self.assertAllEqual(grad, np.zeros(grad.shape))

  def test_a_perfect_prediction_scores_0(self):
    one_hot, _ = loss_testing.one_hot_and_valid(LABELS)
    self.assertAllClose(_value(200.0 * one_hot), 0.0, atol=1e-6)

  @parameterized.parameters(True, False)
  def test_tied_errors_give_the_reference_value(self, per_image):
    # Equal logits: every probability is 1/3, so each class's pixels have the
    # error 2/3 and the others 1/3, tied within each; the Lovász extension's
    # value does not depend on how ties are ordered.
    values = np.zeros(loss_testing.logits().shape, np.float32)
    self.assertAllClose(_value(values, per_image=per_image),
                        _numpy_lovasz(values, LABELS, per_image=per_image),
                        rtol=1e-6)

  def test_a_class_and_another_tied_at_one_error(self):
    # Two classes, logits giving p(class 1) = 1/2 at half the pixels: there a
    # class-1 pixel's error (1 - p) equals a class-0 pixel's error (p).
    values = np.zeros((2, 4, 5, 2), np.float32)
    values[..., 1] = np.where(np.arange(5) % 2, 0.0, 1.5)
    labels = np.where(LABELS == IGNORE, IGNORE, LABELS % 2)
    self.assertAllClose(_value(values, labels),
                        _numpy_lovasz(values, labels), rtol=1e-6)

  def test_unknown_classes_option_is_a_configuration_error(self):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                r"lovasz_softmax_loss.classes = 'some': "
                                r"expected one of 'present', 'all'"):
      _value(loss_testing.logits(), classes='some')


class JaccardStepsTest(tf.test.TestCase):

  def test_steps_of_each_row_are_the_reference_lovasz_grad(self):
    truth = np.random.default_rng(0).integers(0, 2, size=(3, 2, 9)).astype(
        np.float32)
    truth[0, 0] = 0  # A class with no pixel.
    expected = np.stack([[_lovasz_grad(row.astype(np.float64)) for row in rows]
                         for rows in truth])
    self.assertAllClose(lovasz.jaccard_steps(tf.constant(truth)), expected,
                        rtol=1e-6)


if __name__ == '__main__':
  tf.test.main()
