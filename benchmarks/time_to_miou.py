"""Time to a mean IoU: the evaluation curve, its first reach, ratio and table."""

import contextlib
import time

import numpy as np
import tensorflow as tf

from official_seg.evaluation import metrics
from official_seg.modeling import inference


class Curve:
  """Wall time spent training and evaluating, and the mean IoU at each step.

  The clock starts when the curve is made (before the trainer builds its
  model); time inside `evaluating()` counts as evaluation, the rest as
  training (graph building, input pipelines and checkpoints included).
  """

  def __init__(self, target):
    """Starts the clock.

    Args:
      target: float, the mean IoU to reach.
    """
    self.target = target
    self.points = []  # [step, train_secs, eval_secs, mean_iou]
    self.reached = None
    self._start = time.perf_counter()
    self._eval_secs = 0.0

  def wall_secs(self):
    return time.perf_counter() - self._start

  @contextlib.contextmanager
  def evaluating(self):
    """Counts the time of the `with` block as evaluation."""
    start = time.perf_counter()
    try:
      yield
    finally:
      self._eval_secs += time.perf_counter() - start

  def steps(self):
    return [point[0] for point in self.points]

  def add(self, step, mean_iou):
    """Records an evaluation; True when it is the first to reach the target.

    Args:
      step: int, the training step evaluated.
      mean_iou: float.

    Returns:
      bool, whether training should stop: the target is reached.
    """
    wall = self.wall_secs()
    self.points.append([int(step), wall - self._eval_secs, self._eval_secs,
                        float(mean_iou)])
    if self.reached is None and mean_iou >= self.target:
      self.reached = {'step': int(step), 'wall_secs': wall,
                      'train_secs': wall - self._eval_secs,
                      'eval_secs': self._eval_secs}
    return self.reached is not None

  def result(self):
    """The dict of the run: totals, the first reach (or None), the curve."""
    wall = self.wall_secs()
    reached = self.reached or {}
    return {
        'target_miou': self.target,
        'steps_to_miou': reached.get('step'),
        'wall_secs_to_miou': reached.get('wall_secs'),
        'reached': self.reached,
        'steps_trained': self.points[-1][0] if self.points else 0,
        'train_secs': wall - self._eval_secs,
        'eval_secs': self._eval_secs,
        'wall_secs': wall,
        'curve': self.points,
    }


def evaluation_steps(eval_every_steps, max_steps):
  """The steps evaluated: every `eval_every_steps`, and `max_steps` last.

  Raises:
    ValueError: either is below 1.
  """
  if eval_every_steps < 1 or max_steps < 1:
    raise ValueError(f'--eval_every_steps={eval_every_steps} and '
                     f'--max_steps={max_steps} must be at least 1.')
  steps = list(range(eval_every_steps, max_steps + 1, eval_every_steps))
  return steps if steps and steps[-1] == max_steps else steps + [max_steps]


class KerasEvaluator:
  """The confusion matrix of a Keras segmentation model over a dataset.

  The model's logits go through the same code as official_seg's evaluation
  (runtime/model_fn's eval spec): `inference.predict_probabilities` at
  scale 1 resizes them to the input size, the argmax is scored by
  `metrics.confusion_matrices`, which counts no ignored or padded pixel.
  One `tf.function`, traced once, serves every evaluation.
  """

  def __init__(self, model, num_classes, ignore_label):
    """Args: a Keras model whose call returns {'logits': [B, h, w, C]}, the
    number of classes C and the ignore label."""
    self._num_classes = num_classes

    @tf.function
    def confusion(images, labels):
      probabilities = inference.predict_probabilities(
          model, images, inference.InferenceOptions(
              eval_scales=(1.0,), add_flipped_images=False))
      predictions = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
      return tf.reduce_sum(metrics.confusion_matrices(
          labels, predictions, num_classes, ignore_label), 0)

    self._confusion = confusion

  def __call__(self, dataset):
    """Sums the confusion matrix over a dataset.

    Args:
      dataset: batches of (features with float32 'image' [B, H, W, 3],
        int32 labels [B, H, W, 1]), e.g. official_seg's eval input.

    Returns:
      float64 [C, C] NumPy array; rows true class, columns predicted.
    """
    total = np.zeros([self._num_classes] * 2, np.float64)
    for features, labels in dataset:
      total += self._confusion(features['image'], labels).numpy()
    return total


def mean_iou(confusion):
  """Mean IoU of a float64 [C, C] confusion matrix, as official_seg's."""
  return float(metrics.iou_from_confusion(
      tf.constant(confusion, tf.float64))[1])


def ratio(ours, peer):
  """Our wall time to the target over the peer's; None if either missed."""
  if ours['wall_secs_to_miou'] is None or peer['wall_secs_to_miou'] is None:
    return None
  return ours['wall_secs_to_miou'] / peer['wall_secs_to_miou']


def _format(value, spec):
  return 'never' if value is None else format(value, spec)


def table(results, time_ratio=None):
  """A text table: each trainer's time to the target, then each curve."""
  rows = [('', 'target', 'steps', 'wall s to X', 'train s', 'eval s',
           'last step', 'last mIoU')]
  for r in results:
    reached = r['reached'] or {}
    last = r['curve'][-1] if r['curve'] else [0, 0, 0, float('nan')]
    rows.append((r['trainer'], f"{r['target_miou']:.3f}",
                 _format(r['steps_to_miou'], 'd'),
                 _format(r['wall_secs_to_miou'], '.1f'),
                 _format(reached.get('train_secs', r['train_secs']), '.1f'),
                 _format(reached.get('eval_secs', r['eval_secs']), '.1f'),
                 str(last[0]), f'{last[3]:.3f}'))
  widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
  lines = ['  '.join(cell.rjust(w) for cell, w in zip(row, widths))
           for row in rows]
  if len(results) == 2:
    lines.append('time_to_miou_ratio: ' + _format(time_ratio, '.2f'))
  for r in results:
    lines.append(f"{r['trainer']} curve (step, train s, eval s, mIoU): " +
                 ', '.join(f'({s}, {t:.0f}, {e:.0f}, {m:.3f})'
                           for s, t, e, m in r['curve']))
  return '\n'.join(lines)

