"""Monitors of the semi-supervised step, scored against labels training never reads."""

import tensorflow as tf

from official_seg.data import palettes
from official_seg.semi_supervised import pseudo_labels
from official_seg.semi_supervised import views

UNLABELED = views.UNLABELED
MONITOR = views.MONITOR


def kept_share(kept, valid):
  """The share of valid pixels the labeler kept; float32 scalar.

  Args:
    kept: float32 [B, H, W], 1 where the labeler kept the pixel.
    valid: float32 [B, H, W], 0 on padding and cutout pixels.
  """
  return tf.math.divide_no_nan(tf.reduce_sum(kept * valid),
                               tf.reduce_sum(valid))


def classes_picked(picked):
  """The mean count of classes whose maps the CAM drew an image; float32.

  Args:
    picked: float32 [B, C-1], 1 for each class whose map the CAM drew.
  """
  return tf.reduce_mean(tf.reduce_sum(picked, axis=-1))


def step_monitors(targets, strong_logits, valid, features, dataset):
  """The accuracies of pseudo labels and strong predictions.

  Args:
    targets: float32 [B, H, W, C], the strong views' pseudo labels.
    strong_logits: float [B, H, W, C], the strong views' prediction.
    valid: float32 [B, H, W], 0 on padding and cutout pixels.
    features: the semi-supervised input_fn's features.
    dataset: the `DatasetInfo`.

  Returns:
    dict of '{pseudo,strong}_accuracy' and
    '{pseudo,strong}_balanced_accuracy' to float32 scalars.
  """
  strong_label = features[MONITOR + 'unlabeled_strong_label'][..., 0]
  scalars = {}
  for name, values in (('pseudo', targets), ('strong', strong_logits)):
    predictions = tf.argmax(values, axis=-1, output_type=tf.int32)
    pixel, balanced = pseudo_labels.accuracies(
        predictions, strong_label, dataset.num_classes, dataset.ignore_label,
        valid)
    scalars[f'{name}_accuracy'] = pixel
    scalars[f'{name}_balanced_accuracy'] = balanced
  return scalars


def fusion_monitors(decoder_logits, cam_logits, picked, features, dataset):
  """How each of the fusion's two sources alone would label the weak views.

  Fused targets are only as good as what the decoder and the refined CAM
  say; these tell which of the two holds them back, and whether the
  classifier picked the classes whose maps the CAM draws.

  Args:
    decoder_logits: float [B, H, W, C], the weak views' decoder logits.
    cam_logits: float [B, H, W, C], their refined CAM's logits.
    picked: float32 [B, C-1], 1 for each class whose map the CAM drew.
    features: the semi-supervised input_fn's features (the weak views'
      ground truth under `MONITOR`, their valid pixels under `UNLABELED`).
    dataset: the `DatasetInfo`.

  Returns:
    dict of 'decoder_balanced_accuracy' and 'cam_balanced_accuracy' (each
    source's argmax, as `pseudo_labels.accuracies`), 'cam_class_recall'
    (share of the classes present in the valid pixels that were picked)
    and 'cam_class_precision' (share of the picked classes that are
    present) to float32 scalars; `classes_picked` gives the count.
  """
  label = tf.cast(features[MONITOR + 'unlabeled_label'][..., 0], tf.int32)
  valid = features[UNLABELED + 'weak_valid'][..., 0]
  scalars = {}
  for name, logits in (('decoder', decoder_logits), ('cam', cam_logits)):
    predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
    scalars[f'{name}_balanced_accuracy'] = pseudo_labels.accuracies(
        predictions, label, dataset.num_classes, dataset.ignore_label,
        valid)[1]
  # Invalid pixels count for no class, as ignore pixels.
  present = views.class_lists(
      tf.where(valid > 0, label, dataset.ignore_label)[..., None],
      dataset.num_classes, dataset.ignore_label)
  right = tf.reduce_sum(picked * present)
  return dict(
      scalars,
      cam_class_recall=tf.math.divide_no_nan(right, tf.reduce_sum(present)),
      cam_class_precision=tf.math.divide_no_nan(right, tf.reduce_sum(picked)))


def written_monitors(targets, strong_logits, valid, weak_logits, weak_cam,
                     features, dataset, prefix):
  """A builder of the monitors no warning reads, for
  `summaries.Registered.sampled_scalars` (built only on the steps that
  write scalars).

  Args:
    targets, strong_logits, valid: as `step_monitors`'.
    weak_logits: float [B, h, w, C], the weak views' decoder logits.
    weak_cam: None, or (refined CAM logits [B, h', w', C], picked classes
      float32 [B, C-1]) of the weak views (PseudoSeg's fusion).
    features: the semi-supervised input_fn's features.
    dataset: the `DatasetInfo`.
    prefix: str before each name.

  Returns:
    A callable returning `step_monitors`' scalars, and `fusion_monitors`'
    with `weak_cam`, named with `prefix`.
  """
  size = tf.shape(strong_logits)[1:3]

  def build():
    scalars = step_monitors(targets, strong_logits, valid, features, dataset)
    if weak_cam is not None:
      scalars.update(fusion_monitors(
          tf.image.resize(tf.cast(weak_logits, tf.float32), size),
          tf.image.resize(tf.cast(weak_cam[0], tf.float32), size),
          weak_cam[1], features, dataset))
    return {prefix + name: value for name, value in scalars.items()}

  return build


def pictures(features, targets, dataset):
  """The strong views, their ground truth and their pseudo labels.

  Args:
    features: the semi-supervised input_fn's features.
    targets: float32 [B, H, W, C], the strong views' pseudo labels.
    dataset: the `DatasetInfo`.

  Returns:
    dict of 'pictures/unlabeled_{strong,label,pseudo_label}' to uint8
    [B, h, w, 3].
  """
  colours = palettes.label_colours(dataset.palette, dataset.ignore_label)
  valid = features[UNLABELED + 'strong_valid'][..., 0] > 0
  pseudo = tf.where(valid, tf.argmax(targets, -1, output_type=tf.int32),
                    dataset.ignore_label)
  drawn = palettes.pictures(features[UNLABELED + 'strong_image'],
                            features[MONITOR + 'unlabeled_strong_label'],
                            pseudo, colours)
  return {f'pictures/unlabeled_{tag}': value
          for tag, value in (('strong', drawn['image']),
                             ('label', drawn['label']),
                             ('pseudo_label', drawn['prediction']))}
