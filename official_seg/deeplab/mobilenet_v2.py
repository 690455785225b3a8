"""DeepLab's MobileNetV2 (tf-slim's, up to layer_18) as a Model Garden-style backbone."""

import gin
import tensorflow as tf
from official.vision.modeling.layers import nn_layers

from official_seg import validation
from official_seg.deeplab import slim_layers

# slim's V2_DEF after its first convolution (32 channels, stride 2):
# (stride, output channels) of expanded_conv, expanded_conv_1, ...,
# expanded_conv_16, i.e. layer_2 to layer_18, where DeepLab's feature
# extractor stops (its 1280-channel layer_19 is not in its checkpoints).
_BLOCKS = ((1, 16), (2, 24), (1, 24), (2, 32), (1, 32), (1, 32), (2, 64),
           (1, 64), (1, 64), (1, 64), (1, 96), (1, 96), (1, 96), (2, 160),
           (1, 160), (1, 160), (1, 320))
_STEM = 32
# The expanded_conv whose depthwise output is DeepLab's decoder end point
# ('layer_4/depthwise_output', stride 4).
_DECODER_BLOCK = 2
_SCOPE = 'MobilenetV2'


def depths(depth_multiplier):
  """Each layer's channels as DeepLab's `_mobilenet_v2` rounds them.

  Args:
    depth_multiplier: float, DeepLab's depth_multiplier.

  Returns:
    (stem channels, [(expansion channels, output channels)] of each block),
    the expansion of the first block being its input (no expansion layer).
  """
  # DeepLab rounds to multiples of 8 (at least 8) at width 1 only, and the
  # expansion to multiples of 8 always (slim's expand_input_by_factor).
  divisor = 8 if depth_multiplier == 1.0 else 1
  scale = lambda d: nn_layers.make_divisible(d * depth_multiplier, divisor,
                                             divisor)
  previous = scale(_STEM)
  blocks = []
  for i, (_, depth) in enumerate(_BLOCKS):
    inner = previous if i == 0 else nn_layers.make_divisible(previous * 6, 8)
    previous = scale(depth)
    blocks.append((inner, previous))
  return scale(_STEM), blocks


@tf.keras.utils.register_keras_serializable(package='official_seg')
class SqueezeExcite(tf.keras.layers.Layer):
  """slim's `squeeze_excite` as MobileNetV3 uses it (factor 4, ReLU, hard sigmoid).

  The whole map's mean, a 1x1 convolution to a quarter of the channels
  (rounded to multiples of 8) with ReLU, one back with slim's hard sigmoid
  (relu6(x + 3) * 0.16667), which gates the input; both convolutions have
  biases and no batch norm.
  """

  def __init__(self, scope, channels, kernel_regularizer=None, **kwargs):
    kwargs.setdefault('name', 'squeeze_excite')
    super().__init__(**kwargs)
    self._config = dict(scope=scope, channels=channels)
    common = dict(batch_norm=False, kernel_regularizer=kernel_regularizer)
    self.squeeze = slim_layers.ConvBN(
        f'{scope}/Conv', nn_layers.make_divisible(channels / 4, 8), 1,
        activation='relu', **common)
    self.excite = slim_layers.ConvBN(f'{scope}/Conv_1', channels, 1,
                                     activation='hard_sigmoid', **common)

  @tf.autograph.experimental.do_not_convert
  def call(self, inputs, training=None):
    del training  # No batch norm; Keras passes the enclosing call's.
    pooled = tf.reduce_mean(inputs, axis=[1, 2], keepdims=True)
    return inputs * self.excite(self.squeeze(pooled))

  def get_config(self):
    return dict(super().get_config(), **self._config)


@tf.keras.utils.register_keras_serializable(package='official_seg')
class ExpandedConv(tf.keras.layers.Layer):
  """slim's `expanded_conv`: 1x1 expansion, depthwise, linear 1x1 projection.

  `activation` (MobileNetV2's ReLU6 by default) after the expansion and the
  depthwise convolution, then MobileNetV3's squeeze-excite when asked; the
  input is added when the stride is 1 and the channels agree. Strided
  convolutions pad as TF's 'SAME', as slim's mobilenet (DeepLab passes no
  explicit padding).
  """

  def __init__(self, scope, inner, depth, stride=1, rate=1, expand=True,
               kernel_regularizer=None, unit=None, **kwargs):
    """Args:

    Args:
      scope: str, the block's slim scope, e.g. 'expanded_conv_3'.
      inner: int, the expansion's channels.
      depth: int, the output channels.
      stride: int, the depthwise convolution's.
      rate: int, its dilation.
      expand: bool, whether there is an expansion layer.
      kernel_regularizer: Keras regularizer of every kernel.
      unit: dict of MobileNetV3's kernel_size (3), activation ('relu6') and
        squeeze_excite (False); None for MobileNetV2's.
      **kwargs: Keras Layer's.
    """
    kwargs.setdefault('name', scope)
    super().__init__(**kwargs)
    unit = dict(dict(kernel_size=3, activation='relu6', squeeze_excite=False),
                **(unit or {}))
    self._config = dict(scope=scope, inner=inner, depth=depth, stride=stride,
                        rate=rate, expand=expand, unit=unit)
    common = dict(kernel_regularizer=kernel_regularizer, norm_momentum=0.997,
                  explicit_padding=False)
    self.convs = []
    if expand:
      self.convs.append(slim_layers.ConvBN(
          f'{scope}/expand', inner, 1, activation=unit['activation'],
          **common))
    self.convs.append(slim_layers.ConvBN(
        f'{scope}/depthwise', None, unit['kernel_size'], strides=stride,
        rate=rate, depthwise=True, activation=unit['activation'], **common))
    self.squeeze_excite = (SqueezeExcite(
        f'{scope}/squeeze_excite', inner, kernel_regularizer)
                           if unit['squeeze_excite'] else None)
    self.project = slim_layers.ConvBN(f'{scope}/project', depth, 1,
                                      activation=None, **common)

  @tf.autograph.experimental.do_not_convert
  def call(self, inputs, training=None):
    """Returns (output, the depthwise convolution's output)."""
    x = inputs
    for conv in self.convs:
      x = conv(x, training=training)
    depthwise = x
    if self.squeeze_excite is not None:
      x = self.squeeze_excite(x)
    x = self.project(x, training=training)
    if self._config['stride'] == 1 and x.shape[-1] == inputs.shape[-1]:
      x += inputs
    return x, depthwise

  def get_config(self):
    return dict(super().get_config(), **self._config)


def _block_args(depth_multiplier, output_stride):
  """(scope, `ExpandedConv` args) of each block."""
  _, blocks = depths(depth_multiplier)
  # slim's mobilenet_base: atrous once the output stride is reached, after
  # the stride-2 first layer.
  schedule = slim_layers.dense_units([stride for stride, _ in _BLOCKS],
                                     output_stride, 2)
  for i, ((stride, rate), (inner, depth)) in enumerate(zip(schedule, blocks)):
    scope = 'expanded_conv' + (f'_{i}' if i else '')
    yield scope, dict(inner=inner, depth=depth, expand=i > 0, stride=stride,
                      rate=rate)


@gin.configurable(module='backbones')
@validation.checked(depth_multiplier=validation.POSITIVE_NUMBER,
                    output_stride=validation.one_of((8, 16, 32)))
@tf.keras.utils.register_keras_serializable(package='official_seg')
class DeepLabMobileNetV2(slim_layers.SlimBackbone):
  """DeepLab's MobileNetV2 variant, returning Model Garden-style levels.

  Unlike the Model Garden's MobileNet (official/vision/modeling/backbones/
  mobilenet.py): the block where the output stride is reached keeps
  dilation 1 (the Model Garden's dilates it already), there is no
  1280-channel last layer, and at a depth multiplier other than 1 the
  channels are not rounded to multiples of 8 (DeepLab's `divisible_by`).
  The output dict has level '2' (DeepLab's decoder end point,
  layer_4/depthwise_output) and the level of `output_stride` (layer_18).
  `slim_scope` and `slim_layers.slim_variables` give the variables' names
  in DeepLab's checkpoints.
  """

  def __init__(self, depth_multiplier=1.0, output_stride=16,
               input_specs=None, kernel_regularizer=None, **kwargs):
    """Builds the network.

    Args:
      depth_multiplier: float, DeepLab's depth_multiplier (1.0, or 0.5 for
        its mobilenetv2_dm05 models).
      output_stride: 8, 16 or 32.
      input_specs: `tf.keras.layers.InputSpec` of the images.
      kernel_regularizer: Keras regularizer of every kernel.
      **kwargs: Keras Model's.

    Raises:
      validation.ConfigurationError: an unknown output_stride or a depth
        multiplier that is not positive, naming the binding.
    """
    validation.check_binding(
        'backbones.DeepLabMobileNetV2', DeepLabMobileNetV2,
        dict(depth_multiplier=depth_multiplier, output_stride=output_stride))
    inputs = slim_layers.backbone_input(input_specs)
    x = slim_layers.ConvBN('Conv', depths(depth_multiplier)[0], 3, strides=2,
                           activation='relu6', norm_momentum=0.997,
                           explicit_padding=False,
                           kernel_regularizer=kernel_regularizer)(inputs)
    for i, (scope, args) in enumerate(_block_args(depth_multiplier,
                                                  output_stride)):
      x, depthwise = ExpandedConv(scope, kernel_regularizer=kernel_regularizer,
                                  **args)(x)
      if i == _DECODER_BLOCK:
        stride4 = depthwise
    endpoints = slim_layers.stride4_and_deepest(stride4, x, output_stride)
    super().__init__(inputs, endpoints, _SCOPE, dict(
        depth_multiplier=depth_multiplier, output_stride=output_stride,
        input_specs=input_specs, kernel_regularizer=kernel_regularizer),
                     **kwargs)
