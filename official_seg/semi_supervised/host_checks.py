"""Warnings of semi-supervised training: a rising labeled loss, pseudo labels unlike the labels."""

import dataclasses

from absl import logging
import gin
import tensorflow as tf

from official_seg.semi_supervised import pseudo_labels
from official_seg.training import summaries

# The step's scalars the warnings read (semi_supervised.build_step,
# model_fn's 'loss/...' scalars).
LABELED_LOSS = 'loss/segmentation'
GRADIENT_AGREEMENT = 'semi/gradient_agreement'
SHARE_DISTANCE = 'semi/class_share_distance'
LABELED_ACCURACY = 'semi/labeled_pseudo_accuracy'
KEPT_SHARE = 'semi/kept_share'
UNLABELED_WEIGHT = 'semi/unlabeled_weight'
INPUTS = (LABELED_LOSS, GRADIENT_AGREEMENT, SHARE_DISTANCE, LABELED_ACCURACY,
          KEPT_SHARE, UNLABELED_WEIGHT)
# What the warnings write to TensorBoard: the loss's rise over its lowest,
# the moving averages, and the warnings as text.
LOSS_RISE = 'semi/labeled_loss_rise'
AVERAGE_TAGS = {name: name + '_average'
                for name in (GRADIENT_AGREEMENT, SHARE_DISTANCE,
                             LABELED_ACCURACY, KEPT_SHARE)}
WARNINGS_TAG = 'semi/warnings'
# A lasting warning's log line repeats every this many checks, so a run
# that warns throughout logs a few lines; TensorBoard gets every check.
LOG_REPEAT_CHECKS = 10


def class_shares(classes, weights, num_classes):
  """Each class's share of the weighted pixels.

  Args:
    classes: int32 [...], class ids in [0, num_classes).
    weights: float32 [...] of the same shape.
    num_classes: int.

  Returns:
    float32 [num_classes] summing to 1; zeros when the weights sum to 0.
  """
  totals = tf.math.unsorted_segment_sum(
      tf.reshape(tf.cast(weights, tf.float32), [-1]),
      tf.reshape(classes, [-1]), num_classes)
  return tf.math.divide_no_nan(totals, tf.reduce_sum(totals))


def share_distance(pseudo_classes, kept, labels, num_classes, ignore_label):
  """Total variation between the pseudo labels' and the labels' class shares.

  Half the summed absolute difference of the two share vectors: 0 when the
  kept pseudo labels name the classes in the labeled batch's proportions, 1
  when they name none of its classes.

  Args:
    pseudo_classes: int32 [B_u, H, W], the pseudo labels' classes.
    kept: float32 [B_u, H, W], 1 on kept (and valid) pixels.
    labels: int [B, H', W', 1], the labeled batch's.
    num_classes: int.
    ignore_label: int.

  Returns:
    float32 scalar in [0, 1]; 0 when no pixel is kept or labelled.
  """
  labels = tf.cast(labels, tf.int32)
  labelled = tf.not_equal(labels, ignore_label)
  label_shares = class_shares(tf.where(labelled, labels, 0), labelled,
                              num_classes)
  pseudo_shares = class_shares(pseudo_classes, kept, num_classes)
  distance = 0.5 * tf.reduce_sum(tf.abs(pseudo_shares - label_shares))
  both = tf.logical_and(tf.reduce_sum(kept) > 0, tf.reduce_any(labelled))
  return tf.where(both, distance, 0.0)


def labeled_agreement(targets, kept, labels, num_classes, ignore_label):
  """Class-balanced accuracy of pseudo labels of the labeled images.

  Args:
    targets: float32 [B, H, W, C], the labeler's targets on the labeled
      images.
    kept: float32 [B, H, W], the pixels it keeps.
    labels: int [B, H, W, 1].
    num_classes: int.
    ignore_label: int.

  Returns:
    float32 scalar in [0, 1] (`pseudo_labels.accuracies`' second); 0 when
    no labelled pixel is kept.
  """
  predictions = tf.argmax(targets, axis=-1, output_type=tf.int32)
  return pseudo_labels.accuracies(predictions, labels[..., 0], num_classes,
                                  ignore_label, kept)[1]


def output_variables(model, num_classes):
  """The head's variables whose last dimension is the classes: its output
  layers' kernels and biases."""
  return [v for v in model.head.trainable_variables
          if v.shape[-1] == num_classes]


def gradient_agreement(labeled_loss, unlabeled_loss, variables):
  """Cosine between the two losses' gradients on `variables`.

  Below 0, a step down the unlabeled loss's gradient raises the labeled
  loss (to first order): the unlabeled stream pulls against the labels.
  Taken on the output layers, whose gradients cost one small product each.

  Args:
    labeled_loss: float32 scalar.
    unlabeled_loss: float32 scalar (weighted as trained).
    variables: list of `tf.Variable`.

  Returns:
    float32 scalar in [-1, 1]; 0 when either gradient is 0.
  """
  def flat(loss):
    grads = tf.gradients(loss, variables)
    return tf.concat([tf.reshape(tf.zeros_like(v) if g is None else g, [-1])
                      for g, v in zip(grads, variables)], 0)

  first, second = flat(labeled_loss), flat(unlabeled_loss)
  return tf.math.divide_no_nan(tf.reduce_sum(first * second),
                               tf.norm(first) * tf.norm(second))


def signals(model, step_losses, pseudo, labeled_pseudo, labels, dataset):
  """The step's scalars the warnings read, beside the labeled loss.

  Args:
    model: the `SegmentationModel` (its head's output layers).
    step_losses: dict with 'segmentation' and (weighted) 'consistency'.
    pseudo: (targets float32 [B_u, H, W, C], kept float32 [B_u, H, W]) of
      the strong views, kept counting valid pixels only.
    labeled_pseudo: (targets [B, H', W', C], kept [B, H', W']) of the same
      labeler on the labeled images.
    labels: int [B, H', W', 1], the labeled batch's.
    dataset: the `DatasetInfo`.

  Returns:
    dict of 'gradient_agreement', 'class_share_distance' and
    'labeled_pseudo_accuracy' to float32 scalars.
  """
  num_classes, ignore = dataset.num_classes, dataset.ignore_label
  return {
      'gradient_agreement': gradient_agreement(
          step_losses['segmentation'], step_losses['consistency'],
          output_variables(model, num_classes)),
      'class_share_distance': share_distance(
          tf.argmax(pseudo[0], axis=-1, output_type=tf.int32), pseudo[1],
          labels, num_classes, ignore),
      'labeled_pseudo_accuracy': labeled_agreement(
          *labeled_pseudo, labels, num_classes, ignore)}


@gin.configurable
@dataclasses.dataclass(frozen=True)
class SemiSupervisedWarnings:
  """Says in the log and TensorBoard when the unlabeled stream hurts.

  Run on the host with the step's scalars (`summaries.host_call`), every
  step, over moving averages (decay `decay` a step) of the labeled loss,
  `semi/gradient_agreement`, `semi/class_share_distance`,
  `semi/labeled_pseudo_accuracy` and `semi/kept_share`. After
  `warmup_steps`, every `every_n_steps`, a warning is written as text under
  'semi/warnings' and logged:
  (a) "pulling against the labels" while the unlabeled weight is not 0 and
  the agreement's average is below `min_gradient_agreement`, or the
  labeled loss's average is more than `max_loss_rise` above its lowest
  since the warm-up;
  (b) "disagree with the labeled data" while the distance's average exceeds
  `max_share_distance` (e.g. pseudo labels collapsed to the background) or
  the labeled images' pseudo labels' accuracy is below
  `min_labeled_accuracy`;
  (c) "keep almost no pixel" while the unlabeled weight is not 0 and the
  kept share's average is below `min_kept_share`: the unlabeled stream
  trains nothing (a threshold the labeler's confidence never reaches).
  Then (b) is not judged: with nothing kept its two signals are 0.
  While a warning lasts, its log line repeats only every
  `LOG_REPEAT_CHECKS` checks (TensorBoard still gets it at every check), and
  at once when it returns after a check without it: a run that warns for
  its whole length logs a few lines, not one a check.

  Attributes:
    decay: float in [0, 1), the moving averages' decay a step.
    warmup_steps: int, steps before any warning and before the lowest loss
      is tracked (the loss falls fast at first).
    min_gradient_agreement: float in [-1, 1].
    max_loss_rise: float, relative rise of the loss's average over its
      lowest.
    max_share_distance: float in [0, 1].
    min_labeled_accuracy: float in [0, 1].
    min_kept_share: float in [0, 1].
    every_n_steps: int, at most one warning of each kind this often.
  """

  decay: float = 0.98
  warmup_steps: int = 200
  min_gradient_agreement: float = -0.15
  max_loss_rise: float = 0.5
  max_share_distance: float = 0.3
  min_labeled_accuracy: float = 0.7
  min_kept_share: float = 0.01
  every_n_steps: int = 100

  def __call__(self, scalars, step, record):
    """The host ops: averages, their scalars and the warnings.

    Args:
      scalars: dict of summary name to float32 scalar; reads `INPUTS`.
      step: int64 scalar, the global step.
      record: bool scalar, whether this step writes its scalars.

    Returns:
      An op to run with the host_call's summaries.
    """
    averages = {name: self._average(name, scalars[name]) for name in INPUTS
                if name != UNLABELED_WEIGHT}
    warm = tf.greater_equal(step, self.warmup_steps)
    rise = self._rise(averages[LABELED_LOSS], warm)
    with tf.summary.record_if(record):
      tf.summary.scalar(LOSS_RISE, rise, step=step)
      for name, tag in AVERAGE_TAGS.items():
        tf.summary.scalar(tag, averages[name], step=step)
    due = tf.logical_and(warm, tf.equal(step % self.every_n_steps, 0))
    agreement = averages[GRADIENT_AGREEMENT]
    pulling = tf.logical_and(
        scalars[UNLABELED_WEIGHT] > 0,
        tf.logical_or(agreement < self.min_gradient_agreement,
                      rise > self.max_loss_rise))
    distance, accuracy = averages[SHARE_DISTANCE], averages[LABELED_ACCURACY]
    kept = averages[KEPT_SHARE]
    starved = kept < self.min_kept_share
    disagree = tf.logical_and(
        tf.logical_not(starved),
        tf.logical_or(distance > self.max_share_distance,
                      accuracy < self.min_labeled_accuracy))
    starving = tf.logical_and(starved, scalars[UNLABELED_WEIGHT] > 0)
    return tf.group(*[
        self._warn(kind, due, condition, step, message)
        for kind, condition, message in (
            ('pulling', pulling, _pulling_message(agreement, rise)),
            ('disagree', disagree, _disagree_message(distance, accuracy)),
            ('starved', starving, _starved_message(kept)))])

  def _warn(self, kind, due, condition, step, message):
    """Writes `message` at due steps where `condition`; logs it at its
    onset and then every `LOG_REPEAT_CHECKS` checks while it lasts."""
    name = 'semi_warnings_' + kind
    was_on = summaries.host_state(name + '_on', False)
    last_logged = summaries.host_state(name + '_logged',
                                       tf.constant(0, tf.int64))
    fires = tf.logical_and(due, condition)
    repeat = step - last_logged >= LOG_REPEAT_CHECKS * self.every_n_steps
    logs = tf.logical_and(fires,
                          tf.logical_or(tf.logical_not(was_on), repeat))
    # The states are read above: they may change only once those reads are
    # done.
    with tf.control_dependencies([logs]):
      assigns = [
          was_on.assign(tf.where(due, condition, was_on)),
          last_logged.assign(tf.where(logs, step, last_logged))]
    with tf.control_dependencies(assigns):
      return write_and_log(fires, logs, step, message)

  def _average(self, name, value):
    """The moving average of `value` after this step (its first value first)."""
    name = 'semi_warnings_' + name.replace('/', '_')
    average = summaries.host_state(name + '_average', 0.0)
    seen = summaries.host_state(name + '_seen', False)
    updated = tf.where(seen, self.decay * average + (1 - self.decay) * value,
                       value)
    # `seen` is read above: it may change only once that read is done.
    with tf.control_dependencies([updated]):
      assigns = [average.assign(updated), seen.assign(True)]
    with tf.control_dependencies(assigns):
      return tf.identity(updated)

  def _rise(self, loss, warm):
    """The loss average's rise over its lowest since the warm-up; 0 before."""
    lowest = summaries.host_state('semi_warnings_lowest_loss', float('inf'))
    lowest_now = tf.where(warm, tf.minimum(lowest, loss), lowest)
    rise = tf.where(warm, tf.math.divide_no_nan(loss, lowest_now) - 1.0, 0.0)
    with tf.control_dependencies([lowest.assign(lowest_now)]):
      return tf.identity(rise)


def number(value, precision=2):
  """`value` as a string with `precision` decimals."""
  return tf.strings.as_string(value, precision=precision)


def _pulling_message(agreement, rise):
  return tf.strings.join([
      'Semi-supervised training: the unlabeled stream is pulling against '
      'the labels (gradient agreement ', number(agreement), ', labeled '
      'loss ', number(100.0 * rise, 0), '% above its lowest, moving '
      'averages). Lower SemiSupervisedOptions.unlabeled_weight, raise '
      'PseudoLabeler.threshold or train labeled only '
      '(docs/semi_supervised.md, "When it hurts").'])


def _disagree_message(distance, accuracy):
  return tf.strings.join([
      'Semi-supervised training: the pseudo labels disagree with the '
      'labeled data (class shares ', number(distance), ' apart; on the '
      'labeled images ', number(accuracy), ' class-balanced accuracy; '
      'moving averages). See pictures/unlabeled_pseudo_label '
      '(docs/semi_supervised.md, "When it hurts").'])


def _starved_message(kept):
  return tf.strings.join([
      'Semi-supervised training: the pseudo labels keep almost no pixel '
      '(kept share ', number(kept, 3), ', moving average): the unlabeled '
      'stream trains nothing. Lower PseudoLabeler.threshold; fused '
      '(CamFusion) probabilities are softer than the decoder\'s '
      '(docs/semi_supervised.md, "When it hurts").'])


def write_and_log(written, logged, step, message):
  """Writes `message` as text where `written`, logs it where `logged`.

  The log line starts with the step ('Step 4400: ...'); TensorBoard has
  its own.
  """
  with tf.summary.record_if(written):
    tf.summary.text(WARNINGS_TAG, message, step=step)
  line = tf.strings.join(['Step ', tf.strings.as_string(step), ': ', message])
  return tf.cond(logged,
                 lambda: tf.print(line, output_stream=logging.warning),
                 tf.no_op)
