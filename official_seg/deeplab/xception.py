"""DeepLab's modified aligned Xception (41, 65, 71) as a Model Garden-style backbone."""

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.deeplab import slim_layers

# (block scope, depth list, skip connection, activation inside the separable
# convolutions, units, stride), as DeepLab's core/xception.py lists them.
_ENTRY_41_65 = (
    ('entry_flow/block1', (128, 128, 128), 'conv', False, 1, 2),
    ('entry_flow/block2', (256, 256, 256), 'conv', False, 1, 2),
    ('entry_flow/block3', (728, 728, 728), 'conv', False, 1, 2),
)
_ENTRY_71 = (
    ('entry_flow/block1', (128, 128, 128), 'conv', False, 1, 2),
    ('entry_flow/block2', (256, 256, 256), 'conv', False, 1, 1),
    ('entry_flow/block3', (256, 256, 256), 'conv', False, 1, 2),
    ('entry_flow/block4', (728, 728, 728), 'conv', False, 1, 1),
    ('entry_flow/block5', (728, 728, 728), 'conv', False, 1, 2),
)
_EXIT = (
    ('exit_flow/block1', (728, 1024, 1024), 'conv', False, 1, 2),
    ('exit_flow/block2', (1536, 1536, 2048), 'none', True, 1, 1),
)


def _blocks(entry, middle_units):
  middle = (('middle_flow/block1', (728, 728, 728), 'sum', False,
             middle_units, 1),)
  return entry + middle + _EXIT

# Blocks, and the unit whose second separable convolution gives the
# decoder's stride-4 features (DeepLab's DECODER_END_POINTS).
SPECS = {
    'xception_41': (_blocks(_ENTRY_41_65, 8), 'entry_flow/block2/unit_1'),
    'xception_65': (_blocks(_ENTRY_41_65, 16), 'entry_flow/block2/unit_1'),
    'xception_71': (_blocks(_ENTRY_71, 16), 'entry_flow/block3/unit_1'),
}


@tf.keras.utils.register_keras_serializable(package='official_seg')
class XceptionModule(tf.keras.layers.Layer):
  """DeepLab's `xception_module`: three separable convs and a skip connection.

  With `activation_inside`, each separable convolution has batch norm and
  ReLU after both its depthwise and pointwise parts; without, a ReLU comes
  before it and its parts have batch norm only (the original design, used
  everywhere but the exit flow's last block).
  """

  def __init__(self, scope, depths, skip, activation_inside, stride=1,
               rate=1, unit_rates=(1, 1, 1), kernel_regularizer=None,
               **kwargs):
    kwargs.setdefault('name', scope.replace('/', '_'))
    super().__init__(**kwargs)
    self._config = dict(scope=scope, depths=depths, skip=skip,
                        activation_inside=activation_inside, stride=stride,
                        rate=rate, unit_rates=unit_rates)
    self._activation_inside = activation_inside
    self._skip = skip
    inner = 'relu' if activation_inside else None
    module = scope + '/xception_module/'
    self.separable_convs = []
    for i, depth in enumerate(depths):
      self.separable_convs.append(slim_layers.separable(
          f'{module}separable_conv{i + 1}', depth,
          rate=rate * unit_rates[i], strides=stride if i == 2 else 1,
          activation=inner, kernel_regularizer=kernel_regularizer))
    self.shortcut = (slim_layers.ConvBN(
        module + 'shortcut', depths[-1], 1, strides=stride, activation=None,
        kernel_regularizer=kernel_regularizer) if skip == 'conv' else None)

  @tf.autograph.experimental.do_not_convert
  def call(self, inputs, training=None):
    """Returns (output, the second separable conv's output)."""
    x = inputs
    second = None
    for i, (depthwise, pointwise) in enumerate(self.separable_convs):
      if not self._activation_inside:
        x = tf.nn.relu(x)
      x = pointwise(depthwise(x, training=training), training=training)
      if i == 1:
        second = x
    if self._skip == 'conv':
      x += self.shortcut(inputs, training=training)
    elif self._skip == 'sum':
      x += inputs
    return x, second

  def get_config(self):
    return dict(super().get_config(), **self._config)


def _unit_args(blocks, output_stride, multi_grid, filter_scale):
  """DeepLab's `stack_blocks_dense`: (scope, args) of each unit, atrous past
  the output stride (the root's stride of 2 included)."""
  units = []
  for scope, depths, skip, inside, count, stride in blocks:
    grid = multi_grid if scope == 'exit_flow/block2' else (1, 1, 1)
    args = dict(depths=tuple(slim_layers.scaled(d, filter_scale)
                             for d in depths),
                skip=skip, activation_inside=inside, unit_rates=tuple(grid))
    units += [(f'{scope}/unit_{i + 1}', args, stride if i == count - 1 else 1)
              for i in range(count)]
  schedule = slim_layers.dense_units([unit[2] for unit in units],
                                     output_stride, 2)
  for (scope, args, _), (stride, rate) in zip(units, schedule):
    yield scope, dict(args, stride=stride, rate=rate)


@gin.configurable(module='backbones')
@validation.checked(model_id=validation.one_of(sorted(SPECS)),
                    output_stride=validation.one_of((8, 16, 32)))
@tf.keras.utils.register_keras_serializable(package='official_seg')
class Xception(slim_layers.SlimBackbone):
  """DeepLab's aligned Xception, returning Model Garden-style levels.

  The output dict has level '2' (DeepLab's decoder features at stride 4,
  the named unit's second separable convolution) and the level of
  `output_stride` (the exit flow's output, 2048 channels); deeper strides
  are atrous. `slim_scope` and `slim_layers.slim_variables` give the
  variables' names in DeepLab's checkpoints.
  """

  def __init__(self, model_id='xception_65', output_stride=16,
               multi_grid=(1, 1, 1), filter_scale=1.0, input_specs=None,
               kernel_regularizer=None, **kwargs):
    """Builds the network.

    Args:
      model_id: 'xception_41', 'xception_65' or 'xception_71'.
      output_stride: 8, 16 or 32.
      multi_grid: three ints, the exit flow's last unit's rates (DeepLab's
        multi_grid).
      filter_scale: float, scales every layer's channels; 1.0 is DeepLab's
        network (its checkpoints need it); smaller ones make small test
        networks of the same structure.
      input_specs: `tf.keras.layers.InputSpec` of the images.
      kernel_regularizer: Keras regularizer of every kernel.
      **kwargs: Keras Model's.

    Raises:
      validation.ConfigurationError: an unknown model_id or output_stride,
        naming the binding.
    """
    validation.check_binding('backbones.Xception', Xception, dict(
        model_id=model_id, output_stride=output_stride))
    blocks, decoder_unit = SPECS[model_id]
    inputs = slim_layers.backbone_input(input_specs)
    x = inputs
    for scope, filters, stride in (('entry_flow/conv1_1', 32, 2),
                                   ('entry_flow/conv1_2', 64, 1)):
      x = slim_layers.ConvBN(scope, slim_layers.scaled(filters, filter_scale),
                             3, strides=stride,
                             kernel_regularizer=kernel_regularizer,
                             name=scope.replace('/', '_'))(x)
    for scope, args in _unit_args(blocks, output_stride, multi_grid,
                                  filter_scale):
      x, second = XceptionModule(scope, kernel_regularizer=kernel_regularizer,
                                 **args)(x)
      if scope == decoder_unit:
        stride4 = second
    super().__init__(
        inputs, slim_layers.stride4_and_deepest(stride4, x, output_stride),
        model_id,
        dict(model_id=model_id, output_stride=output_stride,
             multi_grid=tuple(multi_grid), filter_scale=filter_scale,
             input_specs=input_specs, kernel_regularizer=kernel_regularizer),
        **kwargs)
