"""The sigmoid kind's metrics against a NumPy reference of per-class 2x2 confusions."""

import numpy as np
import tensorflow as tf

from official_seg.data import dataset_info
from official_seg.evaluation import binary_masks
from official_seg.evaluation import metrics
from official_seg.evaluation import scores

IGNORE = 255
NAMES = ['crack', 'stain', 'rust']


def _batch(rng, size=(2, 9, 11)):
  """Bit-mask labels of 3 classes (some pixels ignored) and 0/1 masks."""
  labels = rng.integers(0, 8, size=size)
  labels[rng.uniform(size=size) < 0.1] = IGNORE
  masks = rng.integers(0, 2, size=size + (3,))
  # Class 2 ('rust') is neither labelled nor predicted anywhere.
  labels = np.where(labels == IGNORE, IGNORE, labels & 3)
  masks[..., 2] = 0
  return labels.astype(np.int32), masks.astype(np.int32)


def numpy_counts(labels, masks):
  """(tp, fp, fn, tn) per class over the labelled pixels, by NumPy."""
  valid = labels != IGNORE
  counts = []
  for c in range(masks.shape[-1]):
    truth = ((labels >> c) & 1).astype(bool) & valid
    guess = masks[..., c].astype(bool) & valid
    counts.append([(truth & guess).sum(), (~truth & guess & valid).sum(),
                   (truth & ~guess).sum(), (~truth & ~guess & valid).sum()])
  return np.array(counts, np.float64)


def numpy_scores(labels, masks):
  """Per-class IoU (NaN when absent), mean IoU, accuracy and fwIoU."""
  tp, fp, fn, tn = numpy_counts(labels, masks).T
  present = tp + fp + fn > 0
  iou = np.where(present, tp / np.maximum(tp + fp + fn, 1), np.nan)
  labelled = tp + fn
  return {'iou': iou, 'mean_iou': np.nanmean(iou),
          'dice': np.where(present, 2 * tp / np.maximum(2 * tp + fp + fn, 1),
                           np.nan),
          'pixel_accuracy': (tp + tn).sum() / (tp + fp + fn + tn).sum(),
          'frequency_weighted_iou': (labelled * np.nan_to_num(iou)).sum() /
                                    labelled.sum()}


class BinaryConfusionsTest(tf.test.TestCase):

  def test_each_class_counts_equal_numpy(self):
    labels, masks = _batch(np.random.default_rng(0))
    confusions = binary_masks.binary_confusions(
        tf.constant(labels[..., None]), tf.constant(masks), IGNORE).numpy()
    self.assertEqual(confusions.shape, (2, 3, 2, 2))
    for b in range(2):
      tp, fp, fn, tn = numpy_counts(labels[b:b + 1], masks[b:b + 1]).T
      self.assertAllEqual(confusions[b, :, 1, 1], tp)
      self.assertAllEqual(confusions[b, :, 0, 1], fp)
      self.assertAllEqual(confusions[b, :, 1, 0], fn)
      self.assertAllEqual(confusions[b, :, 0, 0], tn)

  def test_masks_equal_to_the_labels_score_boundary_iou_one(self):
    labels, _ = _batch(np.random.default_rng(1))
    masks = np.stack([(np.where(labels == IGNORE, 0, labels) >> c) & 1
                      for c in range(3)], -1).astype(np.int32)
    counts = binary_masks.binary_boundary_counts(
        tf.constant(labels[..., None]), tf.constant(masks), IGNORE, 1)
    total = tf.reduce_sum(tf.cast(counts, tf.float64), 0).numpy()
    self.assertAllEqual(total[:2, 0], total[:2, 1])
    self.assertAllGreater(total[:2, 1], 0)
    self.assertAllEqual(total[2], [0, 0])

  def test_never_predicted_reads_the_confusions(self):
    confusions = np.zeros((3, 2, 2))
    confusions[0, 1, 0] = 5  # Labelled, never predicted.
    confusions[1, 1, 1] = 2
    self.assertEqual(scores.never_predicted(confusions, NAMES), ['crack'])


class StreamingMetricsTest(tf.test.TestCase):

  def test_summed_over_batches_equal_numpy(self):
    rng = np.random.default_rng(2)
    batches = [_batch(rng) for _ in range(3)]
    dataset = dataset_info.DatasetInfo(num_classes=3, class_names=NAMES,
                                       ignore_label=IGNORE)
    with tf.Graph().as_default():
      labels_ph = tf.compat.v1.placeholder(tf.int32, [None, 9, 11, 1])
      masks_ph = tf.compat.v1.placeholder(tf.int32, [None, 9, 11, 3])
      metric_fn, tensors = binary_masks.eval_metrics(
          {'valid': tf.ones([tf.shape(labels_ph)[0]])}, labels_ph, masks_ph,
          dataset, 1)
      ops = metric_fn(**tensors)
      updates = tf.group(*[update for _, update in ops.values()])
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.local_variables_initializer())
        for labels, masks in batches:
          sess.run(updates, {labels_ph: labels[..., None], masks_ph: masks})
        result = sess.run({name: value for name, (value, _) in ops.items()
                           if name != metrics.CONFUSION_MATRIX})
    expected = numpy_scores(np.concatenate([b[0] for b in batches]),
                            np.concatenate([b[1] for b in batches]))
    for index, name in enumerate(NAMES):
      self.assertAllClose(result[f'iou/{name}'], expected['iou'][index])
      self.assertAllClose(result[f'dice/{name}'], expected['dice'][index])
    self.assertTrue(np.isnan(result['iou/rust']))
    for name in ('mean_iou', 'pixel_accuracy', 'frequency_weighted_iou'):
      self.assertAllClose(result[name], expected[name])
    self.assertEqual(result['num_images'], 6)
    self.assertCountEqual({k.split('/')[0] for k in result if '/' in k},
                          metrics.SCORES)


if __name__ == '__main__':
  tf.test.main()
