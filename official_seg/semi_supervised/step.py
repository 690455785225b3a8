"""Semi-supervised training: the weak view's pseudo labels supervise the strong view."""

import dataclasses
from typing import Any, Optional, Tuple

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.modeling import losses
from official_seg.semi_supervised import cam_warning
from official_seg.semi_supervised import classifier as classifier_lib
from official_seg.semi_supervised import cutmix
from official_seg.semi_supervised import host_checks as host_checks_lib
from official_seg.semi_supervised import monitors as monitors_lib
from official_seg.semi_supervised import pseudo_labels
from official_seg.semi_supervised import views
from official_seg.training import step as step_lib

# Features of the unlabeled stream, as the semi-supervised input_fn names
# them; its ground truth is under views.MONITOR, read by `monitors` only.
UNLABELED = views.UNLABELED
# Scalars of the step, under this prefix in TensorBoard.
SUMMARY_PREFIX = 'semi/'
# The batch-norm rule, stated here once: every pass that normalises with its
# own batch's moments (training mode) also moves the moving statistics
# toward them, as PseudoSeg applies all of its UPDATE_OPS. The labeled
# images and the strong views share one pass, so one update per layer for
# their joint moments; the weak views' pass adds the moments of clean images
# like the evaluated ones; the refinement's passes over the labeled and the
# weak features update its own batch norm. A pass left out here would
# normalise with batch moments but leave the moving statistics alone.
BATCH_NORM_PASSES = ('labeled_and_strong', 'weak', 'refinement_labeled',
                     'refinement_weak')


@gin.configurable
@dataclasses.dataclass(frozen=True)
class RefinementLoss:
  """The CAM refinement's loss on the labeled batch, configured on its own.

  Cross-entropy over the labeled pixels (PseudoSeg's DeepLab loss);
  the labeled batch's loss (`Components.loss`) and its bindings do not
  reach it.

  Attributes:
    class_weights: optional list of C floats.
    label_smoothing: float in [0, 1).
    top_k_percent_pixels: float in (0, 1].
  """

  class_weights: Optional[Tuple[float, ...]] = None
  label_smoothing: float = 0.0
  top_k_percent_pixels: float = 1.0

  def __call__(self, logits, labels, ignore_label):
    """Scalar float32 loss of logits [B, h, w, C] against labels [B, H, W, 1]."""
    return losses.cross_entropy(logits, labels, ignore_label,
                                self.class_weights, self.label_smoothing,
                                self.top_k_percent_pixels)


@gin.configurable
@validation.checked(classifier_weight=validation.NUMBER_AT_LEAST_0)
@dataclasses.dataclass(frozen=True)
class CamFusion:
  """PseudoSeg's second pseudo-label source: a refined class activation map.

  An image classifier (global pool, 1x1 convolution, sigmoid cross-entropy)
  on the backbone's deepest level gives class activation maps; a
  self-attention layer refines them into segmentation logits, trained on the
  labeled batch; the weak view's refined map and its decoder prediction are
  fused (`pseudo_labels.calibrated_fusion`).

  The classifier and refinement are layers of the model
  (`build_model(cam_attention_dim=attention_dim)`, which the model_fn
  calls), so weight decay, moving averages, warm start and the resume check
  see them.

  Attributes:
    attention_dim: int, keys' and queries' channels of the refinement.
    weakly: bool; the unlabeled images' class lists
      ('unlabeled/class_labels', image-level labels, as PseudoSeg simulates
      them from label maps) pick the weak view's maps and train the
      classifier on the strong view; otherwise the classifier's own
      confident classes (sigmoid >= 0.5) pick them.
    refinement_loss: a `RefinementLoss`.
    classifier_weight: float >= 0, the image classifier's loss weight; the
      loss trains the backbone too (PseudoSeg: 1, pseudoseg.gin: 0.1).
    decoder_where_no_class: bool; an image whose CAM drew no class (the
      classifier picked none) takes the decoder's softmax alone as its
      pseudo label, where PseudoSeg fuses it with a map that says
      background everywhere.
    no_class_warning: a `cam_warning.NoClassWarning`, said when the
      classifier names no class for long (not with `weakly`, whose maps
      follow the given class lists); None for none.
  """

  attention_dim: int = 128
  weakly: bool = False
  classifier_weight: float = 1.0
  decoder_where_no_class: bool = False
  refinement_loss: Any = dataclasses.field(default_factory=RefinementLoss)
  no_class_warning: Any = dataclasses.field(
      default_factory=cam_warning.NoClassWarning)

  def __post_init__(self):
    validation.check(CamFusion, classifier_weight=self.classifier_weight)


@gin.configurable
@dataclasses.dataclass(frozen=True)
class SemiSupervisedOptions:
  """How the unlabeled stream trains the model (gin/semi_supervised/*.gin).

  Attributes:
    unlabeled_weight: float, weight of the consistency loss.
    rampup_steps: int; the weight ramps up over these steps
      (`pseudo_labels.rampup`); 0 starts at full weight (PseudoSeg).
    labeler: a `pseudo_labels.PseudoLabeler`.
    cam_fusion: a `CamFusion`, or None to take pseudo labels from the
      decoder's prediction alone.
    warnings: a `host_checks_lib.SemiSupervisedWarnings`, or None for none.
  """

  unlabeled_weight: float = 1.0
  rampup_steps: int = 0
  labeler: Any = dataclasses.field(default_factory=pseudo_labels.PseudoLabeler)
  cam_fusion: Optional[CamFusion] = None
  warnings: Any = dataclasses.field(
      default_factory=host_checks_lib.SemiSupervisedWarnings)


def _resized(logits, like):
  """float32 logits resized bilinearly to the spatial size of `like`."""
  return tf.image.resize(tf.cast(logits, tf.float32), tf.shape(like)[1:3])


def pseudo_probabilities(logits, cam, like, fusion=None):
  """The labeler's input at the size of `like`, without gradient.

  Args:
    logits: float [B, h, w, C], the decoder's.
    cam: None, or (refined CAM logits float [B, h', w', C], classes drawn
      float32 [B, C-1]).
    like: a tensor [B, H, W, ...] of the size wanted.
    fusion: the `CamFusion`, with `cam`.

  Returns:
    float32 [B, H, W, C]: the softmax of `logits`, or its calibrated fusion
    with the refined CAM's (the softmax alone for images whose CAM drew no
    class, with `fusion.decoder_where_no_class`).
  """
  logits = _resized(tf.stop_gradient(logits), like)
  decoder = tf.nn.softmax(logits)
  if cam is None:
    return decoder
  refined, drawn = cam
  fused = pseudo_labels.calibrated_fusion(logits, _resized(refined, like))
  if not fusion.decoder_where_no_class:
    return fused
  any_class = tf.reduce_max(drawn, axis=-1) > 0
  return tf.where(any_class[:, None, None, None], fused, decoder)


def _levels(model, outputs, count=2):
  """The `count` deepest backbone levels the decoder can read, deepest first.

  Levels outside the backbone's output_specs (MobileNet's last 1x1
  convolution) are left out: the segmentation path never trains them.
  """
  features = {level: value
              for level, value in outputs['backbone_features'].items()
              if level in model.backbone.output_specs}
  return classifier_lib.feature_levels(features, count)


def _updates_of(model, build):
  """build()'s result and the batch-norm updates of the model it created."""
  before = set(model.updates)
  result = build()
  return result, [u for u in model.updates if u not in before]


def batch_norm_updates(pass_updates):
  """The update ops a step applies: those of the passes the rule names.

  Args:
    pass_updates: dict of pass name (in `BATCH_NORM_PASSES`) to its list of
      update ops.

  Returns:
    List of ops.
  """
  unknown = set(pass_updates) - set(BATCH_NORM_PASSES)
  if unknown:
    raise ValueError(f'Passes {sorted(unknown)} are not in BATCH_NORM_PASSES.')
  return [update for name in BATCH_NORM_PASSES
          for update in pass_updates.get(name, [])]


def _branch(model):
  """The model's image classifier and CAM refinement; fails without them."""
  if model.image_classifier is None or model.cam_refinement is None:
    raise ValueError('SemiSupervisedOptions.cam_fusion needs the model built '
                     'with build_model(cam_attention_dim=...).')
  return model.image_classifier, model.cam_refinement


def _cam_branch(fusion, model, outputs, weak_outputs, features, labels,
                dataset, training, pass_updates):
  """The classifier, refinement and their losses; the weak view's CAM logits.

  Records the refinement passes' batch-norm updates in `pass_updates`.

  Returns:
    (losses dict, the weak views' CAM, the labeled images' CAM): each CAM
    (refined logits float32 [B, h, w, C] without gradient, the classes
    float32 [B, C-1] whose maps it drew).
  """
  num_classes, ignore = dataset.num_classes, dataset.ignore_label
  count = tf.shape(labels)[0]
  classifier, refinement = _branch(model)
  both = _levels(model, outputs)
  labeled = [level[:count] for level in both]
  targets = classifier_lib.image_labels(labels, num_classes, ignore)
  result = {'classifier': classifier_lib.classification_loss(
      classifier(labeled[0]), targets)}
  cam = classifier.cam(labeled[0], targets)
  # Labeled crops mark padding with the ignore label (so do object borders,
  # which the attention then skips too).
  valid = tf.cast(tf.not_equal(labels, ignore), tf.float32)
  refined, pass_updates['refinement_labeled'] = _updates_of(
      model, lambda: refinement(labeled, cam, valid, training=training))
  result['refinement'] = fusion.refinement_loss(refined, labels, ignore)
  weak = [tf.stop_gradient(level) for level in _levels(model, weak_outputs)]
  if fusion.weakly:
    weak_targets = features[UNLABELED + 'class_labels']
    result['classifier'] += classifier_lib.classification_loss(
        classifier(both[0][count:]),
        features[UNLABELED + 'strong_class_labels'])
  else:
    weak_targets = tf.cast(tf.sigmoid(classifier(weak[0])) >= 0.5,
                           tf.float32)
  result['classifier'] *= fusion.classifier_weight
  weak_cam = classifier.cam(weak[0], weak_targets)
  weak_refined, pass_updates['refinement_weak'] = _updates_of(
      model, lambda: refinement(weak, weak_cam,
                                features[UNLABELED + 'weak_valid'],
                                training=training))
  return (result, (tf.stop_gradient(weak_refined), weak_targets),
          (tf.stop_gradient(refined), targets))


def build_step(model, features, labels, training, dataset, options,
               global_step, loss):
  """The losses of one semi-supervised training step.

  The labeled images and the strong views go through the model in one
  batch; the weak views go through it once more, forward only: their
  prediction is the pseudo label's source, so no gradient reaches them.
  Batch-norm updates follow `BATCH_NORM_PASSES`. Features under
  `views.MONITOR` feed the monitors and pictures only.

  Args:
    model: a `model.SegmentationModel`; with `options.cam_fusion`, built
      with `cam_attention_dim`.
    features: the semi-supervised input_fn's features: the labeled batch's,
      the unlabeled batch's under 'unlabeled/' and its ground truth under
      'monitor/'.
    labels: int32 [B, H, W, 1], the labeled batch's.
    training: bool, the model's `training` flag.
    dataset: the `DatasetInfo`.
    options: a `SemiSupervisedOptions`.
    global_step: int64 scalar tensor, for the ramp-up.
    loss: the labeled batch's loss, loss(logits, labels, ignore_label) ->
      scalar float32 (`components.Components.loss`).

  Returns:
    A `step_lib.Step`.
  """
  images = features['image']
  strong = features[UNLABELED + 'strong_image']
  with_features = options.cam_fusion is not None
  both = tf.concat([images, strong], axis=0)
  pass_updates = {}
  outputs, pass_updates['labeled_and_strong'] = _updates_of(
      model, lambda: model(both, training=training,
                           with_features=with_features))
  weak_outputs, pass_updates['weak'] = _updates_of(
      model, lambda: model(features[UNLABELED + 'image'], training=training,
                           with_features=with_features))
  count = tf.shape(images)[0]
  logits = outputs['logits'][:count]
  strong_logits = _resized(outputs['logits'][count:], strong)
  step_losses = {'segmentation': loss(logits, labels, dataset.ignore_label)}
  weak_cam = labeled_cam = None
  if with_features:
    cam_losses, weak_cam, labeled_cam = _cam_branch(
        options.cam_fusion, model, outputs, weak_outputs, features, labels,
        dataset, training, pass_updates)
    step_losses.update(cam_losses)
  targets, kept = options.labeler(pseudo_probabilities(
      weak_outputs['logits'], weak_cam, strong, options.cam_fusion))
  # The strong view may hold pasted boxes of other images (CutMix): their
  # pseudo labels are pasted alike.
  mix_index = features[UNLABELED + 'mix_index']
  mix_mask = features[UNLABELED + 'mix_mask']
  targets = cutmix.mix(targets, mix_index, mix_mask)
  kept = cutmix.mix(kept[..., None], mix_index, mix_mask)[..., 0]
  valid = features[UNLABELED + 'strong_valid'][..., 0]
  weight = options.unlabeled_weight * pseudo_labels.rampup(
      global_step, options.rampup_steps)
  consistency = pseudo_labels.consistency_loss(strong_logits, targets, kept,
                                               valid)
  step_losses['consistency'] = weight * consistency
  scalars = {'kept_share': monitors_lib.kept_share(kept, valid)}
  if with_features:
    scalars['cam_classes_picked'] = monitors_lib.classes_picked(weak_cam[1])
  if options.warnings:
    # The same labeler on the labeled images too, against their labels.
    scalars.update(host_checks_lib.signals(
        model, step_losses, (targets, kept * valid),
        options.labeler(pseudo_probabilities(logits, labeled_cam, labels,
                                             options.cam_fusion)),
        labels, dataset))
  scalars.update(consistency_loss=consistency, unlabeled_weight=weight)
  return step_lib.Step(logits=logits, losses=step_losses,
              update_ops=batch_norm_updates(pass_updates),
              scalars={SUMMARY_PREFIX + k: v for k, v in scalars.items()},
              sampled_scalars=monitors_lib.written_monitors(
                  targets, strong_logits, valid, weak_outputs['logits'],
                  weak_cam, features, dataset, SUMMARY_PREFIX),
              pictures=monitors_lib.pictures(features, targets, dataset),
              host_checks=_host_checks(options))


def _host_checks(options):
  """The warnings the options ask for, run on the host with the summaries."""
  checks = [options.warnings] if options.warnings else []
  fusion = options.cam_fusion
  if fusion and fusion.no_class_warning and not fusion.weakly:
    checks.append(fusion.no_class_warning)
  return checks
