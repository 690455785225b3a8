"""The builders an experiment trains, evaluates and exports with, bound once in gin."""

import dataclasses
import inspect
from typing import Callable

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.modeling import inference as inference_lib
from official_seg.modeling import losses
from official_seg.modeling import model as model_lib
from official_seg.modeling import outputs
from official_seg.modeling import sigmoid_losses
from official_seg.training import optimizers
from official_seg.training import schedules
from official_seg.training import updates as updates_lib


@gin.configurable
@dataclasses.dataclass(frozen=True)
class Components:
  """What the runtime builds once and hands to the model_fn, steps and exports.

  gin binds each to a reference (`Components.loss = @my_loss`); the code
  below the runtime receives them as arguments and calls what it is given,
  never a configurable of its own choosing, so a user swaps a loss or a model
  builder in a gin file without touching the model_fn or the steps.

  Attributes:
    model: model(num_classes, cam_attention_dim=None, input_channels=3) ->
      a `model.SegmentationModel`; `@build_model` with its bindings.
    loss: loss(logits [B, h, w, C], labels int32 [B, H, W, 1], ignore_label)
      -> scalar float32, the labeled batch's loss in training, evaluation
      and the semi-supervised step; DeepLab's softmax cross-entropy
      (`@segmentation_loss`) by default.
    optimizer: optimizer(learning_rate, use_tpu=bool) -> a tf.compat.v1
      optimizer; `@make_optimizer` with its bindings.
    learning_rate: learning_rate(global_step) -> scalar float32 tensor;
      `@learning_rate` with its schedule.
    inference: an `inference.InferenceOptions` (scales, flips, windows),
      for evaluation, prediction, the eval parser and every export.
    updates: an `updates.UpdateOptions`: gradient accumulation and
      float16's loss scale, for the training step.
  """

  model: Callable = model_lib.build_model
  loss: Callable = losses.segmentation_loss
  optimizer: Callable = optimizers.make_optimizer
  learning_rate: Callable = schedules.learning_rate
  inference: inference_lib.InferenceOptions = dataclasses.field(
      default_factory=inference_lib.InferenceOptions)
  updates: updates_lib.UpdateOptions = dataclasses.field(
      default_factory=updates_lib.UpdateOptions)

  def __post_init__(self):
    _check_loss_kind(self.loss, self.inference.output)

  @property
  def labeled_loss(self):
    """`loss` on logits resized to the labels by the model's convention.

    With `inference.align_corners` (DeepLab's models) the logits reach the
    loss resized with aligned corners, as DeepLab's training resizes them
    (`upsample_logits`); otherwise the loss resizes them itself, with
    half-pixel centres. The one setting serves training and evaluation.

    Returns:
      loss(logits [B, h, w, C], labels int32 [B, H, W, 1], ignore_label) ->
      scalar float32.
    """
    if not self.inference.align_corners:
      return self.loss

    def aligned(logits, labels, ignore_label):
      logits = inference_lib.upsampled_logits(logits, tf.shape(labels)[1:3],
                                              align_corners=True)
      return self.loss(logits, labels, ignore_label)

    return aligned


def _check_loss_kind(loss, output):
  """A loss made for the other output kind is a configuration error.

  A loss declares its kind as `output_kind` (`outputs.loss_of_kind`); one
  that declares none is taken for a softmax loss, as the losses written
  before the sigmoid kind are, so it trains the softmax kind and is refused
  by the sigmoid one.
  """
  name = getattr(inspect.unwrap(loss), '__name__', type(loss).__name__)
  declared = outputs.declared_kind(loss)
  kind = declared or 'softmax'
  if kind not in outputs.KINDS:
    raise validation.ConfigurationError(
        f'Components.loss = @{name} declares output_kind = {kind!r}; '
        f'declare one of {", ".join(map(repr, outputs.KINDS))}.')
  if output.sigmoid and kind == 'softmax':
    made = 'is a softmax loss' if declared else (
        'declares no output_kind, so is taken for a softmax loss')
    raise validation.ConfigurationError(
        f"Components.loss = @{name} {made}, but OutputKind.kind = 'sigmoid': "
        'bind one of gin/losses/sigmoid_*.gin '
        f'({", ".join(sigmoid_losses.SIGMOID_LOSSES)}), or set '
        "output_kind = 'sigmoid' on a sigmoid loss of your own.")
  if not output.sigmoid and kind == 'sigmoid':
    raise validation.ConfigurationError(
        f'Components.loss = @{name} needs the sigmoid output kind: include '
        'gin/heads/sigmoid.gin before the loss file.')
