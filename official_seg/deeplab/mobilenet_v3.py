"""DeepLab's MobileNetV3 Large and Small (slim's, as its *_seg variants) as Model Garden-style backbones."""

import gin
import tensorflow as tf
from official.vision.modeling.layers import nn_layers

from official_seg import validation
from official_seg.deeplab import mobilenet_v2
from official_seg.deeplab import mobilenet_v2 as mobilenet_v2_lib
from official_seg.deeplab import slim_layers

_RELU, _HSWISH = 'relu', 'hard_swish'
# slim's V3_LARGE and V3_SMALL after their first convolution (16 channels,
# stride 2, hard swish): (expansion factor, output channels, kernel size,
# stride, squeeze-excite, activation) of expanded_conv, expanded_conv_1...
# DeepLab's mobilenet_v3_*_seg halve the last stage's outputs and set its
# expansions to 336/480/480 (Large) and 144/288/288 (Small) channels, i.e.
# factors 3, 6, 6 of the inputs; its last 1x1 convolution (slim's Conv_1,
# hard swish) has 480 and 288 channels, and DeepLab stops there.
_BLOCKS = {
    'large': ((1, 16, 3, 1, False, _RELU), (4, 24, 3, 2, False, _RELU),
              (3, 24, 3, 1, False, _RELU), (3, 40, 5, 2, True, _RELU),
              (3, 40, 5, 1, True, _RELU), (3, 40, 5, 1, True, _RELU),
              (6, 80, 3, 2, False, _HSWISH), (2.5, 80, 3, 1, False, _HSWISH),
              (184 / 80., 80, 3, 1, False, _HSWISH),
              (184 / 80., 80, 3, 1, False, _HSWISH),
              (6, 112, 3, 1, True, _HSWISH), (6, 112, 3, 1, True, _HSWISH),
              (3, 80, 5, 2, True, _HSWISH), (6, 80, 5, 1, True, _HSWISH),
              (6, 80, 5, 1, True, _HSWISH)),
    'small': ((1, 16, 3, 2, True, _RELU), (72 / 16., 24, 3, 2, False, _RELU),
              (88 / 24., 24, 3, 1, False, _RELU),
              (4, 40, 5, 2, True, _HSWISH), (6, 40, 5, 1, True, _HSWISH),
              (6, 40, 5, 1, True, _HSWISH), (3, 48, 5, 1, True, _HSWISH),
              (3, 48, 5, 1, True, _HSWISH), (3, 48, 5, 2, True, _HSWISH),
              (6, 48, 5, 1, True, _HSWISH), (6, 48, 5, 1, True, _HSWISH)),
}
_LAST = {'large': 480, 'small': 288}
_STEM = 16
# The expanded_conv whose depthwise output is DeepLab's decoder end point at
# stride 8: 'layer_7/depthwise_output' (Large), 'layer_4/depthwise_output'
# (Small).
_DECODER_BLOCK = {'large': 5, 'small': 2}
_SCOPE = 'MobilenetV3'


def depths(model_id, depth_multiplier=1.0):
  """Each layer's channels as slim's mobilenet rounds them for DeepLab.

  Args:
    model_id: 'large' or 'small'.
    depth_multiplier: float, DeepLab's depth_multiplier.

  Returns:
    (stem channels, [(expansion channels, output channels)] of each block,
    last convolution's channels). Outputs are rounded to multiples of 8 (at
    least 8) at every multiplier, as mobilenet_v3 leaves slim's default;
    an expansion is its input times the factor, rounded the same way, and
    a block has no expansion layer when it would not add channels.
  """
  scale = lambda d: nn_layers.make_divisible(d * depth_multiplier, 8)
  previous = scale(_STEM)
  blocks = []
  for factor, depth, *_ in _BLOCKS[model_id]:
    inner = nn_layers.make_divisible(previous * factor, 8)
    previous = scale(depth)
    blocks.append((inner, previous))
  return scale(_STEM), blocks, scale(_LAST[model_id])


def _block_args(model_id, depth_multiplier, output_stride):
  """(scope, `mobilenet_v2.ExpandedConv` args) of each block."""
  stem, blocks, _ = depths(model_id, depth_multiplier)
  specs = _BLOCKS[model_id]
  schedule = slim_layers.dense_units([spec[3] for spec in specs],
                                     output_stride, 2)
  previous = stem
  for i, (spec, (stride, rate), (inner, depth)) in enumerate(
      zip(specs, schedule, blocks)):
    _, _, kernel_size, _, squeeze_excite, activation = spec
    yield 'expanded_conv' + (f'_{i}' if i else ''), dict(
        inner=inner, depth=depth, expand=inner > previous, stride=stride,
        rate=rate, unit=dict(kernel_size=kernel_size, activation=activation,
                             squeeze_excite=squeeze_excite))
    previous = depth


@gin.configurable(module='backbones')
@validation.checked(model_id=validation.one_of(sorted(_BLOCKS)),
                    depth_multiplier=validation.POSITIVE_NUMBER,
                    output_stride=validation.one_of((16, 32)))
@tf.keras.utils.register_keras_serializable(package='official_seg')
class DeepLabMobileNetV3(slim_layers.SlimBackbone):
  """DeepLab's MobileNetV3 (mobilenet_v3_large_seg, mobilenet_v3_small_seg).

  slim's MobileNetV3 up to DeepLab's final end point, with DeepLab's halved
  last stage: hard swish or ReLU, 3x3 or 5x5 depthwise convolutions,
  squeeze-excite after the depthwise convolution, 'SAME' padding, batch
  norm epsilon 1e-3. The output dict has level '3' (DeepLab's decoder end
  point at stride 8, the depthwise output of layer_7 in Large, layer_4 in
  Small) and the level of `output_stride` (the last 1x1 convolution).
  `slim_scope` and `slim_layers.slim_variables` give the variables' names
  in DeepLab's checkpoints.
  """

  def __init__(self, model_id='large', depth_multiplier=1.0, output_stride=32,
               input_specs=None, kernel_regularizer=None, **kwargs):
    """Builds the network.

    Args:
      model_id: 'large' or 'small'.
      depth_multiplier: float, DeepLab's depth_multiplier (its zoo's: 1.0).
      output_stride: 32 (the zoo's) or 16.
      input_specs: `tf.keras.layers.InputSpec` of the images.
      kernel_regularizer: Keras regularizer of every kernel.
      **kwargs: Keras Model's.

    Raises:
      validation.ConfigurationError: an unknown model_id, depth multiplier
        or output_stride (at 8 the decoder's stride-8 level would be the
        output's), naming the binding.
    """
    validation.check_binding(
        'backbones.DeepLabMobileNetV3', DeepLabMobileNetV3,
        dict(model_id=model_id, depth_multiplier=depth_multiplier,
             output_stride=output_stride))
    input_specs = input_specs or tf.keras.layers.InputSpec(
        shape=[None, None, None, 3])
    inputs = tf.keras.Input(shape=input_specs.shape[1:])
    stem, _, last = depths(model_id, depth_multiplier)
    common = dict(activation='hard_swish', norm_momentum=0.997,
                  explicit_padding=False, kernel_regularizer=kernel_regularizer)
    x = slim_layers.ConvBN('Conv', stem, 3, strides=2, **common)(inputs)
    endpoints = {}
    for i, (scope, args) in enumerate(_block_args(model_id, depth_multiplier,
                                                  output_stride)):
      x, depthwise = mobilenet_v2.ExpandedConv(
          scope, kernel_regularizer=kernel_regularizer, **args)(x)
      if i == _DECODER_BLOCK[model_id]:
        endpoints['3'] = depthwise
    x = slim_layers.ConvBN('Conv_1', last, 1, **common)(x)
    endpoints[str({16: 4, 32: 5}[output_stride])] = x
    super().__init__(inputs, endpoints, _SCOPE, dict(
        model_id=model_id, depth_multiplier=depth_multiplier,
        output_stride=output_stride, input_specs=input_specs,
        kernel_regularizer=kernel_regularizer), **kwargs)
