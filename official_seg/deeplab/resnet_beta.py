"""DeepLab's ResNet-v1 beta (50, 101) as a Model Garden-style backbone."""

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.deeplab import slim_layers

# Units of block1, block2 and block3 (base depths 64, 128, 256, a stride of
# 2 in each block's last unit), as DeepLab's core/resnet_v1_beta.py lists
# them; block4 has three units of base depth 512 without a stride.
_UNITS = {'resnet_v1_50_beta': (3, 4, 6), 'resnet_v1_101_beta': (3, 4, 23)}
_BASE_DEPTHS = (64, 128, 256, 512)
# DeepLab's scope (its ImageNet checkpoints' names) of each variant.
SLIM_SCOPES = {'resnet_v1_50_beta': 'resnet_v1_50',
               'resnet_v1_101_beta': 'resnet_v1_101'}
# The unit whose conv3 gives the decoder's stride-4 features (DeepLab's
# DECODER_END_POINTS 'block1/unit_2/bottleneck_v1/conv3').
DECODER_UNIT = 'block1/unit_2'
# DeepLab's feature_extractor builds its ResNets with these batch norms.
_NORM = dict(norm_momentum=0.95, norm_epsilon=1e-5)


@tf.keras.utils.register_keras_serializable(package='official_seg')
class Bottleneck(tf.keras.layers.Layer):
  """DeepLab's ResNet-v1 `bottleneck`: 1x1, 3x3 and 1x1 convs and a shortcut.

  The 3x3 convolution carries the unit's stride and atrous rate; the last
  1x1 has batch norm but no ReLU, which follows the sum. The shortcut is the
  input subsampled by the stride when it has the output's channels, else a
  strided 1x1 convolution with batch norm.
  """

  def __init__(self, scope, depth, depth_bottleneck, depth_in, stride=1,
               rate=1, kernel_regularizer=None, **kwargs):
    """Args mirror DeepLab's `bottleneck`.

    Args:
      scope: str, the unit's slim scope, e.g. 'block1/unit_1'.
      depth: int, the output's channels.
      depth_bottleneck: int, the 3x3 convolution's channels.
      depth_in: int, the input's channels.
      stride: int.
      rate: int, the 3x3 convolution's dilation (rate times unit rate).
      kernel_regularizer: Keras regularizer of every kernel.
      **kwargs: Keras Layer's.
    """
    kwargs.setdefault('name', scope.replace('/', '_'))
    super().__init__(**kwargs)
    self._config = dict(scope=scope, depth=depth,
                        depth_bottleneck=depth_bottleneck, depth_in=depth_in,
                        stride=stride, rate=rate)
    unit = scope + '/bottleneck_v1/'
    common = dict(kernel_regularizer=kernel_regularizer, **_NORM)
    self.shortcut = None if depth == depth_in else slim_layers.ConvBN(
        unit + 'shortcut', depth, 1, strides=stride, activation=None,
        **common)
    self.conv1 = slim_layers.ConvBN(unit + 'conv1', depth_bottleneck, 1,
                                    **common)
    self.conv2 = slim_layers.ConvBN(unit + 'conv2', depth_bottleneck, 3,
                                    strides=stride, rate=rate, **common)
    self.conv3 = slim_layers.ConvBN(unit + 'conv3', depth, 1,
                                    activation=None, **common)

  @tf.autograph.experimental.do_not_convert
  def call(self, inputs, training=None):
    """Returns (output, conv3's output before the sum)."""
    stride = self._config['stride']
    if self.shortcut is None:
      shortcut = inputs[:, ::stride, ::stride, :]
    else:
      shortcut = self.shortcut(inputs, training=training)
    x = self.conv1(inputs, training=training)
    residual = self.conv3(self.conv2(x, training=training),
                          training=training)
    return tf.nn.relu(shortcut + residual), residual

  def get_config(self):
    return dict(super().get_config(), **self._config)


def _unit_args(model_id, output_stride, multi_grid, filter_scale):
  """(scope, args) of each unit, atrous past the output stride (DeepLab's
  `stack_blocks_dense` after the root's stride of 4)."""
  units = []
  for block, (count, base) in enumerate(
      zip(_UNITS[model_id] + (len(multi_grid),), _BASE_DEPTHS), 1):
    for i in range(count):
      last_of_strided = block < 4 and i == count - 1
      units.append((f'block{block}/unit_{i + 1}', base,
                    2 if last_of_strided else 1,
                    multi_grid[i] if block == 4 else 1))
  schedule = slim_layers.dense_units([unit[2] for unit in units],
                                     output_stride, 4)
  for (scope, base, _, unit_rate), (stride, rate) in zip(units, schedule):
    yield scope, dict(
        depth=slim_layers.scaled(4 * base, filter_scale),
        depth_bottleneck=slim_layers.scaled(base, filter_scale),
        stride=stride, rate=rate * unit_rate)


def _root(inputs, filter_scale, kernel_regularizer):
  """The beta variant's root: three 3x3 convolutions, then a max pool."""
  x = inputs
  for scope, filters, stride in (('conv1_1', 64, 2), ('conv1_2', 64, 1),
                                 ('conv1_3', 128, 1)):
    x = slim_layers.ConvBN(scope, slim_layers.scaled(filters, filter_scale),
                           3, strides=stride,
                           kernel_regularizer=kernel_regularizer, **_NORM)(x)
  return tf.keras.layers.MaxPool2D(3, 2, padding='same', name='pool1')(x)


@gin.configurable(module='backbones')
@validation.checked(
    model_id=validation.one_of(sorted(_UNITS)),
    output_stride=validation.one_of((8, 16, 32)),
    multi_grid=validation.Expect(
        lambda v: isinstance(v, (list, tuple)) and len(v) == 3,
        'three rates, one a unit of block4'))
@tf.keras.utils.register_keras_serializable(package='official_seg')
class ResNetBeta(slim_layers.SlimBackbone):
  """DeepLab's ResNet-v1 beta (50, 101), returning Model Garden-style levels.

  The beta variant replaces ResNet-v1's 7x7 root convolution by three 3x3
  ones (64, 64 and 128 channels). The output dict has level '2' (DeepLab's
  decoder features at stride 4: block1/unit_2's conv3, after its batch norm)
  and the level of `output_stride` (block4's output, 2048 channels); deeper
  strides are atrous. `slim_scope` and `slim_layers.slim_variables` give the
  variables' names in DeepLab's checkpoints.
  """

  def __init__(self, model_id='resnet_v1_50_beta', output_stride=16,
               multi_grid=(1, 1, 1), filter_scale=1.0, input_specs=None,
               kernel_regularizer=None, **kwargs):
    """Builds the network.

    Args:
      model_id: 'resnet_v1_50_beta' or 'resnet_v1_101_beta'.
      output_stride: 8, 16 or 32.
      multi_grid: three ints, block4's unit rates (DeepLab's multi_grid).
      filter_scale: float, scales every layer's channels; 1.0 is DeepLab's
        network (its checkpoints need it); smaller ones make small test
        networks of the same structure.
      input_specs: `tf.keras.layers.InputSpec` of the images.
      kernel_regularizer: Keras regularizer of every kernel.
      **kwargs: Keras Model's.

    Raises:
      validation.ConfigurationError: an unknown model_id or output_stride,
        or a multi_grid of another length, naming the binding.
    """
    validation.check_binding('backbones.ResNetBeta', ResNetBeta, dict(
        model_id=model_id, output_stride=output_stride,
        multi_grid=multi_grid))
    inputs = slim_layers.backbone_input(input_specs)
    x = _root(inputs, filter_scale, kernel_regularizer)
    for scope, args in _unit_args(model_id, output_stride, multi_grid,
                                  filter_scale):
      x, conv3 = Bottleneck(scope, depth_in=x.shape[-1],
                            kernel_regularizer=kernel_regularizer, **args)(x)
      if scope == DECODER_UNIT:
        stride4 = conv3
    super().__init__(
        inputs, slim_layers.stride4_and_deepest(stride4, x, output_stride),
        SLIM_SCOPES[model_id],
        dict(model_id=model_id, output_stride=output_stride,
             multi_grid=tuple(multi_grid), filter_scale=filter_scale,
             input_specs=input_specs, kernel_regularizer=kernel_regularizer),
        **kwargs)


