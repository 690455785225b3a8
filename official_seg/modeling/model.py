"""DeepLab model: a tf-models-official backbone, ASPP decoder and segmentation head."""

import gin
import tensorflow as tf
from official.vision.modeling import backbones
from official.vision.modeling import decoders
from official.vision.modeling import heads
from official.vision.modeling import segmentation_model

# The Model Garden's own classes, referenced directly from gin files. The
# defaults below are the registered versions, so bindings apply to them too.
for _cls in (backbones.MobileNet, backbones.ResNet, backbones.DilatedResNet):
  gin.external_configurable(_cls, module='backbones')
ASPP = gin.external_configurable(decoders.ASPP, module='decoders')
SegmentationHead = gin.external_configurable(heads.SegmentationHead,
                                             module='heads')


def feature_level(backbone):
  """The deepest level the backbone outputs (log2 of its output stride)."""
  return max(int(level) for level in backbone.output_specs)


@gin.configurable(denylist=['num_classes'])
def build_model(num_classes,
                backbone=gin.REQUIRED,
                decoder=ASPP,
                head=SegmentationHead,
                weight_decay=4e-5):
  """Builds a `SegmentationModel`.

  The decoder and head are constructed here, at the backbone's deepest level,
  so the level can never disagree with the backbone's output stride.

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

  Returns:
    A `SegmentationModel` whose call returns {'logits': [B, h, w, C]}.
  """
  # Keras L2(l2) adds l2 * sum(w**2); halving keeps DeepLab's values valid.
  regularizer = (tf.keras.regularizers.L2(weight_decay / 2.0)
                 if weight_decay else None)
  backbone_net = backbone(kernel_regularizer=regularizer)
  level = feature_level(backbone_net)
  decoder_net = (decoder(level=level, kernel_regularizer=regularizer)
                 if decoder else None)
  head_net = head(num_classes=num_classes, level=level,
                  kernel_regularizer=regularizer)
  return segmentation_model.SegmentationModel(backbone_net, decoder_net,
                                              head_net)
