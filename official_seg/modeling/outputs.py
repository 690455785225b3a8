"""The output kind: a softmax over classes, or independent sigmoids with per-class thresholds."""

import dataclasses
import inspect
from typing import Sequence

import gin
import tensorflow as tf

from official_seg import validation

KINDS = ('softmax', 'sigmoid')
# A sigmoid label holds one bit per class in an 8-bit mask, with 255 left
# for the ignore label: bits 0 to 6, so seven classes at most.
MAX_SIGMOID_CLASSES = 7

_THRESHOLDS = validation.Expect(
    lambda v: isinstance(v, (list, tuple)) and len(v) > 0 and all(
        validation.POSITIVE_NUMBER.test(t) and t < 1 for t in v),
    'a list of numbers in (0, 1), one for every class or one for all')


def loss_of_kind(kind):
  """Declares the output kind a loss is made for, as `output_kind`.

  A decorator beneath `@gin.configurable` (which copies the attribute onto
  its wrapper); a loss class sets `output_kind = ...` itself. The runtime
  reads it (`declared_kind`) to refuse a loss of the other kind.

  Args:
    kind: one of `KINDS`.
  """
  if kind not in KINDS:
    raise ValueError(f'output_kind {kind!r}: one of {KINDS}.')

  def declare(loss):
    loss.output_kind = kind
    return loss

  return declare


def declared_kind(loss):
  """The `output_kind` a loss declares (its own, or its wrapped function's,
  or a `functools.partial`'s function's), or None."""
  for each in (loss, inspect.unwrap(loss), getattr(loss, 'func', None)):
    kind = getattr(each, 'output_kind', None)
    if kind is not None:
      return kind
  return None


@gin.configurable
@validation.checked(kind=validation.one_of(KINDS), thresholds=_THRESHOLDS)
@dataclasses.dataclass(frozen=True)
class OutputKind:
  """What the model's C output channels mean; one binding, handed down.

  'softmax' (the default): one class per pixel, the labels class ids, the
  prediction the argmax. 'sigmoid': each channel its own yes/no, so classes
  may overlap (or C = 1 for one foreground class); a pixel's label is the
  bit mask sum of 2**c over the classes c it belongs to (a binary 0/1 mask
  when C = 1, `IGNORE_LABEL` for a pixel that counts nowhere), and class c
  is predicted where its probability exceeds its threshold.

  Attributes:
    kind: 'softmax' or 'sigmoid'.
    thresholds: the sigmoid's thresholds, one per class or one for all;
      unused by 'softmax'.
  """

  kind: str = 'softmax'
  thresholds: Sequence[float] = (0.5,)

  def __post_init__(self):
    validation.check(OutputKind, kind=self.kind, thresholds=self.thresholds)

  @property
  def sigmoid(self):
    return self.kind == 'sigmoid'

  def activate(self, logits):
    """Probabilities of float logits [..., C]: softmax or sigmoid."""
    return tf.sigmoid(logits) if self.sigmoid else tf.nn.softmax(logits)

  def logits_of(self, probabilities):
    """The logits whose `activate` gives `probabilities`, up to a constant."""
    if self.sigmoid:
      probabilities = tf.clip_by_value(probabilities, 1e-7, 1.0 - 1e-7)
      return tf.math.log(probabilities) - tf.math.log1p(-probabilities)
    return tf.math.log(tf.maximum(probabilities, 1e-30))

  def label_values(self, num_classes):
    """How many label values other than the ignore label a label may hold."""
    return 2**num_classes if self.sigmoid else num_classes

  def predict(self, probabilities, num_classes):
    """(int32 [...] labels, int32 [..., C] masks or None) of probabilities.

    Softmax: the argmax, no masks. Sigmoid: the masks at the thresholds and
    their bit mask, the form of its training labels (`label_bits`).
    """
    if not self.sigmoid:
      return tf.argmax(probabilities, axis=-1, output_type=tf.int32), None
    masks = threshold_masks(probabilities, self.class_thresholds(num_classes))
    return bit_mask(masks), masks

  def class_thresholds(self, num_classes):
    """float32 [C]: `thresholds` of a dataset of C classes.

    Raises:
      validation.ConfigurationError: C above `MAX_SIGMOID_CLASSES`, or
        neither one threshold nor C.
    """
    if num_classes > MAX_SIGMOID_CLASSES:
      raise validation.ConfigurationError(
          f"OutputKind.kind = 'sigmoid' takes at most {MAX_SIGMOID_CLASSES} "
          f'classes (one bit each of an 8-bit label), not NUM_CLASSES = '
          f'{num_classes}.')
    thresholds = list(self.thresholds)
    if len(thresholds) not in (1, num_classes):
      raise validation.ConfigurationError(
          f'OutputKind.thresholds = {thresholds!r}: expected one threshold '
          f'or NUM_CLASSES = {num_classes}.')
    return tf.constant(thresholds * (num_classes // len(thresholds)),
                       tf.float32)


def label_bits(labels, num_classes, ignore_label):
  """A sigmoid kind's labels as per-class targets and the valid pixels.

  Args:
    labels: int [..., 1], bit masks (bit c set: class c present), or
      `ignore_label`.
    num_classes: int, C.
    ignore_label: int.

  Returns:
    (targets float32 [..., C] of 0 and 1, 0 at ignored pixels; valid
    float32 [...], 1 where labelled).
  """
  labels = tf.cast(labels[..., 0], tf.int32)
  valid = tf.not_equal(labels, ignore_label)
  safe = tf.where(valid, labels, tf.zeros_like(labels))
  bits = tf.bitwise.bitwise_and(
      safe[..., tf.newaxis], tf.bitwise.left_shift(1, tf.range(num_classes)))
  return tf.cast(bits > 0, tf.float32), tf.cast(valid, tf.float32)


def threshold_masks(probabilities, thresholds):
  """int32 [..., C]: 1 where a class's probability exceeds its threshold."""
  return tf.cast(probabilities > tf.cast(thresholds, probabilities.dtype),
                 tf.int32)


def bit_mask(masks):
  """int32 [...]: per-class 0/1 masks [..., C] as one label of bits."""
  weights = tf.bitwise.left_shift(1, tf.range(tf.shape(masks)[-1]))
  return tf.reduce_sum(masks * weights, -1)
