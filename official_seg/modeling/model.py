"""DeepLab model: a tf-models-official backbone, ASPP decoder and segmentation head."""

import warnings

import gin
import tensorflow as tf
from official.vision.modeling import backbones
from official.vision.modeling import heads
from official.vision.modeling import segmentation_model

from official_seg import validation
from official_seg.modeling import aspp
from official_seg.semi_supervised import classifier as classifier_lib

# The Model Garden's own classes, referenced directly from gin files (every
# one with dense features; gin/backbones/ has a file for each). The
# defaults below are the registered versions, so bindings apply to them too.
for _cls in (backbones.MobileNet, backbones.ResNet, backbones.DilatedResNet,
             backbones.EfficientNet, backbones.SpineNet,
             backbones.SpineNetMobile, backbones.RevNet, backbones.MobileDet):
  gin.external_configurable(_cls, module='backbones')
# decoders.ASPP: the Model Garden's ASPP without the atrous kernel taps that
# can only read padding (aspp.ASPP; drop_padding_taps=False keeps them).
ASPP = aspp.ASPP
SegmentationHead = gin.external_configurable(heads.SegmentationHead,
                                             module='heads')


class SegmentationModel(segmentation_model.SegmentationModel):
  """The Model Garden's `SegmentationModel`, which can also return its features.

  Semi-supervised training needs the backbone's features of the pass that
  made the logits (for the image classifier and its class activation maps);
  calling the backbone again would cost a second backbone pass. The class
  keeps the Model Garden's name, so its variables are named as theirs.

  PseudoSeg's image classifier and CAM refinement, when built
  (`build_model(cam_attention_dim=...)`), are layers of the model, so weight
  decay (`model.losses`), moving averages and the optimizer
  (`model.trainable_variables`), warm start (`checkpoint_items`) and the
  resume check (`model.variables`) see them; `call` never runs them.
  """

  def __init__(self, backbone, decoder, head, image_classifier=None,
               cam_refinement=None, **kwargs):
    """As the Model Garden's, plus the optional PseudoSeg branch.

    Args:
      backbone, decoder, head: as the Model Garden's.
      image_classifier: optional `classifier.ImageClassifier`.
      cam_refinement: optional `classifier.CamRefinement`.
      **kwargs: as the Model Garden's.
    """
    super().__init__(backbone, decoder, head, **kwargs)
    self.image_classifier = image_classifier
    self.cam_refinement = cam_refinement

  @property
  def checkpoint_items(self):
    """The Model Garden's items, and the PseudoSeg branch's when built."""
    items = dict(super().checkpoint_items)
    for name in ('image_classifier', 'cam_refinement'):
      if getattr(self, name) is not None:
        items[name] = getattr(self, name)
    return items

  def call(self, inputs, training=None, with_features=False):  # pylint: disable=arguments-differ
    """The logits, and with `with_features` the backbone's output dict.

    Args:
      inputs: float [B, H, W, channels] images.
      training: bool, as Keras's.
      with_features: bool, add 'backbone_features', the backbone's dict of
        level (str) to float [B, h, w, K].

    Returns:
      {'logits': [B, h, w, C]} and maybe 'backbone_features'.
    """
    if not with_features:
      return super().call(inputs, training=training)
    backbone_features = self.backbone(inputs)
    decoder_features = (self.decoder(backbone_features) if self.decoder
                        else backbone_features)
    return {'logits': self.head((backbone_features, decoder_features)),
            'backbone_features': backbone_features}


def feature_level(backbone, level=None):
  """The level the decoder reads: `level`, or the backbone's deepest.

  Args:
    backbone: a Model Garden backbone.
    level: None, or int: one of the backbone's levels.

  Returns:
    int, log2 of the features' stride.

  Raises:
    validation.ConfigurationError: the backbone has no such level.
  """
  levels = sorted(int(key) for key in backbone.output_specs)
  if level is None:
    return levels[-1]
  if level not in levels:
    raise validation.ConfigurationError(
        f'build_model.level = {level}: the backbone outputs levels {levels}.')
  return level


def _construct_backbone(backbone, regularizer, input_channels=3):
  """Calls the backbone constructor in inference mode.

  Model Garden backbones are functional models: constructing one calls each
  layer once on a symbolic input. In a graph with no learning phase set,
  each batch norm then builds a `tf.cond` of its training and inference
  branches, which no later call uses (a call passes its own `training`,
  and Keras does not store the framework-supplied one); in inference mode
  it builds the plain op, which cuts the graph's construction time.

  Args:
    backbone: the backbone constructor.
    regularizer: the kernel regularizer, or None.
    input_channels: int, the images' channels; other than 3, the backbone
      is given `input_specs` of that many (3 keeps each backbone's own
      specs, some of which have a size).

  Returns:
    The backbone, a Keras model.
  """
  kwargs = {'kernel_regularizer': regularizer}
  if input_channels != 3:
    kwargs['input_specs'] = tf.keras.layers.InputSpec(
        shape=[None, None, None, input_channels])
  with warnings.catch_warnings():
    # The scope is deprecated in favour of passing `training` to a call,
    # which a functional model's constructor offers no way to do.
    warnings.filterwarnings('ignore', message='.*learning_phase_scope')
    with tf.keras.backend.learning_phase_scope(0):
      return backbone(**kwargs)


@gin.configurable(denylist=['num_classes', 'cam_attention_dim',
                            'input_channels'])
def build_model(num_classes,
                backbone=gin.REQUIRED,
                decoder=ASPP,
                head=SegmentationHead,
                weight_decay=4e-5,
                level=None,
                cam_attention_dim=None,
                input_channels=3):
  """Builds a `SegmentationModel`.

  The decoder and head are constructed here, at the backbone's deepest level
  (or `level`), so the level can never disagree with the backbone's output
  stride.

  Args:
    num_classes: int, number of classes including background (the
      dataset's).
    backbone: a constructor of a Model Garden backbone, e.g.
      `@backbones.MobileNet` (not called: this function calls it).
    decoder: a decoder constructor taking `level` and `kernel_regularizer`,
      or None to feed the backbone's deepest features to the head.
    head: a head constructor taking `num_classes`, `level` and
      `kernel_regularizer`.
    weight_decay: float, L2 weight decay on convolution kernels, as DeepLab
      defines it: `weight_decay * sum(w ** 2) / 2`.
    cam_attention_dim: None, or int: also build PseudoSeg's image
      classifier and CAM refinement (keys and queries of this many
      channels), with the same weight decay (set by the model_fn from
      `CamFusion.attention_dim`, never bound in gin).
    input_channels: int, the images' channels, which the backbone's first
      convolution reads (the dataset's `image_channels`, set by the
      model_fn, never bound in gin).

  Returns:
    A `SegmentationModel` whose call returns {'logits': [B, h, w, C]}.

  Raises:
    validation.ConfigurationError: `level` is not one of the backbone's.
  """
  # Keras L2(l2) adds l2 * sum(w**2); halving keeps DeepLab's values valid.
  regularizer = (tf.keras.regularizers.L2(weight_decay / 2.0)
                 if weight_decay else None)
  backbone_net = _construct_backbone(backbone, regularizer, input_channels)
  level = feature_level(backbone_net, level)
  decoder_net = (decoder(level=level, kernel_regularizer=regularizer)
                 if decoder else None)
  head_net = head(num_classes=num_classes, level=level,
                  kernel_regularizer=regularizer)
  branch = {}
  if cam_attention_dim is not None:
    branch = dict(
        image_classifier=classifier_lib.ImageClassifier(
            num_classes, kernel_regularizer=regularizer),
        cam_refinement=classifier_lib.CamRefinement(
            num_classes, cam_attention_dim, kernel_regularizer=regularizer))
  return SegmentationModel(backbone_net, decoder_net, head_net, **branch)
