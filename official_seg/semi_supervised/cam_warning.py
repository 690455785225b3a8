"""The warning of PseudoSeg's image classifier naming no class: empty class activation maps."""

import dataclasses

import gin
import tensorflow as tf

from official_seg.semi_supervised import host_checks
from official_seg.training import summaries

# The mean count of classes the image classifier named a weak view
# (`monitors.classes_picked`, a step scalar); `NoClassWarning` reads it.
CLASSES_PICKED = 'semi/cam_classes_picked'


@gin.configurable
@dataclasses.dataclass(frozen=True)
class NoClassWarning:
  """Says once when PseudoSeg's image classifier names no class.

  Run on the host every step with the step's scalars, like
  `SemiSupervisedWarnings`. Counts the steps whose unlabeled batch got no
  class from the classifier (`semi/cam_classes_picked` 0: every class
  activation map empty) in windows of `window_steps` steps (steps
  [k * window_steps, (k + 1) * window_steps)). At the end of the first
  window in which such steps are at least `min_share` of the steps seen
  (half the window at least), writes a warning under 'semi/warnings' and
  logs it, naming the cause (fused targets pulled to background) and what
  to do; never again in that session.

  Attributes:
    window_steps: int >= 1.
    min_share: float in (0, 1].
  """

  window_steps: int = 500
  min_share: float = 0.9

  def __call__(self, scalars, step, record):
    """The host ops: the window's counts and the warning.

    Args:
      scalars: dict of summary name to float32 scalar; reads
        `CLASSES_PICKED`.
      step: int64 scalar, the global step.
      record: bool scalar, unused (the warning is written when it fires).

    Returns:
      An op to run with the host_call's summaries.
    """
    del record
    empty = summaries.host_state('semi_no_class_steps',
                                 tf.constant(0, tf.int64))
    seen = summaries.host_state('semi_no_class_seen', tf.constant(0, tf.int64))
    warned = summaries.host_state('semi_no_class_warned', False)
    empty_now = empty + tf.cast(scalars[CLASSES_PICKED] <= 0, tf.int64)
    seen_now = seen + 1
    share = tf.cast(empty_now, tf.float32) / tf.cast(seen_now, tf.float32)
    ends = tf.equal(step % self.window_steps, self.window_steps - 1)
    # A window seen in part (a resumed run) is judged on half of it at least.
    judged = tf.logical_and(ends, 2 * seen_now >= self.window_steps)
    fires = tf.logical_and(
        tf.logical_and(judged, share >= self.min_share),
        tf.logical_not(warned))
    # The states are read above: they may change only once those reads are
    # done.
    with tf.control_dependencies([fires]):
      assigns = [empty.assign(tf.where(ends, tf.constant(0, tf.int64),
                                       empty_now)),
                 seen.assign(tf.where(ends, tf.constant(0, tf.int64),
                                      seen_now)),
                 warned.assign(tf.logical_or(warned, fires))]
    with tf.control_dependencies(assigns):
      return host_checks.write_and_log(fires, fires, step, _no_class_message(
          share, step - seen_now + 1, step))


def _no_class_message(share, first, last):
  return tf.strings.join([
      'Semi-supervised training: the image classifier (CamFusion) named no '
      'class in the unlabeled batch at ', host_checks.number(100.0 * share, 0),
      '% of steps ', tf.strings.as_string(first), '-',
      tf.strings.as_string(last), ': its class activation maps are empty, '
      'so the fused pseudo labels are pulled toward background. Set '
      'CamFusion.decoder_where_no_class = True (such images take the '
      'decoder\'s targets), or train without the CAM '
      '(SemiSupervisedOptions.cam_fusion = None) or with fixmatch.gin '
      '(docs/semi_supervised.md, "When it hurts").'])

