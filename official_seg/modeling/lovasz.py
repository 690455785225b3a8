"""The Lovász-softmax loss (Berman et al. 2018), a surrogate of each class's IoU, in static shapes."""

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.modeling import losses
from official_seg.modeling import outputs

CLASSES = ('present', 'all')


def jaccard_steps(truth_sorted):
  """The Lovász extension's gradient at errors sorted in decreasing order.

  Algorithm 1 of the paper (the reference implementation's `lovasz_grad`):
  with g the sorted foreground indicator, J_i = 1 - (G - cumsum(g)_i) /
  (G + cumsum(1 - g)_i), G = sum(g), and the result is J's first
  differences, J_0 first. The union is at least 1 at every position.

  Args:
    truth_sorted: float32 [..., N], 1 where the pixel is of the class.

  Returns:
    float32 [..., N].
  """
  total = tf.reduce_sum(truth_sorted, -1, keepdims=True)
  foreground = tf.cumsum(truth_sorted, -1)
  # cumsum(1 - g)_i is (i + 1) - cumsum(g)_i, exact for integers below 2**24
  # in float32: one cumulative sum instead of two.
  seen = tf.range(1, _size(truth_sorted, -1) + 1, dtype=truth_sorted.dtype)
  intersection = total - foreground
  union = total + seen - foreground
  jaccard = 1.0 - intersection / union
  return tf.concat([jaccard[..., :1], jaccard[..., 1:] - jaccard[..., :-1]],
                   -1)


def class_losses(probabilities, truth, valid):
  """Each class's Lovász extension at its errors |g - p|, at a fixed length.

  The reference drops ignored pixels; here they keep their place with an
  error of 0 and a sort key below every valid error, so they sort after all
  valid pixels, leave the valid pixels' steps as they are, and add 0 to the
  loss and its gradient. The sum of the sorted errors times their steps is
  taken in the pixels' own order, with the steps moved back there by the
  inverse permutation: the gradient is then a product, not the scatter that
  differentiating the sort would add.

  Args:
    probabilities: float32 [G, C, N], softmax of each group's pixels.
    truth: float32 [G, C, N], one-hot labels, 0 where ignored.
    valid: float32 [G, 1, N], 1 where labelled.

  Returns:
    float32 [G, C].
  """
  errors = tf.abs(truth - probabilities) * valid
  order, truth_sorted = _decreasing_order(errors, truth, valid)
  steps = tf.stop_gradient(jaccard_steps(truth_sorted))
  return tf.reduce_sum(errors * _unsorted(steps, order), -1)


def _decreasing_order(errors, truth, valid):
  """The order that sorts each row's errors in decreasing order, and truth in it.

  Errors lie in [0, 1], where a float32's bits read as an int32 keep its
  order, and twice them plus the truth bit still fits an int32: sorting
  those keys sorts the errors (equal errors: the class's pixels first, then
  pixel order) and carries each pixel's truth in the lowest bit, so no
  gather is needed. Ignored pixels get -2, below all of them.

  Args:
    errors: float32 [G, C, N] in [0, 1].
    truth: float32 [G, C, N], 0 or 1.
    valid: float32 [G, 1, N], 1 where labelled.

  Returns:
    (int32 [G, C, N] indices, float32 [G, C, N] truth in that order).
  """
  keys = tf.bitcast(errors, tf.int32) * 2 + tf.cast(truth, tf.int32)
  keys = tf.where(valid > 0, keys, tf.fill(tf.shape(keys), -2))
  values, order = tf.math.top_k(keys, k=_size(keys, -1))
  return order, tf.cast(tf.bitwise.bitwise_and(values, 1), truth.dtype)


def _unsorted(values, order):
  """values[..., k] moved to position order[..., k] of each row."""
  length = _size(order, -1)
  rows = tf.range(tf.size(order) // length) * length
  flat = tf.reshape(order + tf.reshape(rows, tf.shape(order)[:-1])[..., None],
                    [-1])
  inverse = tf.math.invert_permutation(flat)
  return tf.reshape(tf.gather(tf.reshape(values, [-1]), inverse),
                    tf.shape(order))


def _size(tensor, axis):
  """The static size of an axis, else its size in the graph."""
  return tensor.shape[axis] or tf.shape(tensor)[axis]


def _grouped(tensor, per_image):
  """[B, H, W, K] as [G, K, N]: G = B per image, else 1 for the batch."""
  groups = _size(tensor, 0) if per_image else 1
  flat = tf.reshape(tensor, [groups, -1, tensor.shape[-1]])
  return tf.transpose(flat, [0, 2, 1])


def _safe_mean(values, weights, axis):
  """Weighted mean along `axis`, 0 where the weights sum to 0."""
  total = tf.reduce_sum(weights, axis)
  return tf.reduce_sum(values * weights, axis) / tf.maximum(total, 1.0)


@gin.configurable(denylist=['logits', 'labels', 'ignore_label'])
@outputs.loss_of_kind('softmax')
@validation.checked(classes=validation.one_of(CLASSES))
def lovasz_softmax_loss(logits, labels, ignore_label, classes='present',
                        per_image=False):
  """The mean over classes of the Lovász extension of 1 - IoU at the softmax.

  Berman, Rannen Triki and Blaschko (CVPR 2018), as the reference's
  `lovasz_softmax` on the softmax of the logits resized to the labels.

  Args:
    logits: float [B, h, w, C].
    labels: int32 [B, H, W, 1].
    ignore_label: int, label value excluded from loss and gradient.
    classes: 'present' averages the classes with a labelled pixel in the
      group (the reference's option; a class absent from it adds nothing),
      'all' every class (an absent class adds its largest probability).
    per_image: bool, the loss of each image, averaged over the images with
      a labelled pixel (the reference's mean would be NaN with an image all
      ignored); else one loss over the batch's pixels.

  Returns:
    Scalar float32 loss; 0 when no pixel is labelled.
  """
  validation.check(lovasz_softmax_loss, classes=classes)
  logits, labels, valid = losses.pixel_inputs(logits, labels, ignore_label)
  valid = _grouped(valid[..., tf.newaxis], per_image)
  truth = _grouped(tf.one_hot(labels, logits.shape[-1]), per_image) * valid
  per_class = class_losses(_grouped(tf.nn.softmax(logits), per_image), truth,
                           valid)
  labelled = tf.reduce_max(valid, [1, 2])
  if classes == 'present':
    counted = tf.reduce_max(truth, -1)
  else:
    counted = tf.ones_like(per_class) * labelled[:, tf.newaxis]
  return _safe_mean(_safe_mean(per_class, counted, -1), labelled, 0)
