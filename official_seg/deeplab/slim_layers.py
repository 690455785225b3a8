"""Keras convolutions with batch norm that know their tf-slim (DeepLab) variable names."""

import tensorflow as tf
from official.modeling import tf_utils

# tf-slim's batch_norm variables, in Keras's names.
_BATCH_NORM = (('gamma', 'gamma'), ('beta', 'beta'),
               ('moving_mean', 'moving_mean'),
               ('moving_variance', 'moving_variance'))


def fixed_padding(inputs, kernel_size, rate=1):
  """Pads as DeepLab's `fixed_padding`, independently of the input's size.

  Args:
    inputs: float [B, H, W, C].
    kernel_size: int, the convolution's kernel size.
    rate: int, its dilation rate.

  Returns:
    float [B, H + p, W + p, C], p = (kernel_size - 1) * rate, split with
    the smaller half first.
  """
  total = (kernel_size - 1) * rate
  begin = total // 2
  return tf.pad(inputs, [[0, 0], [begin, total - begin],
                         [begin, total - begin], [0, 0]])


@tf.keras.utils.register_keras_serializable(package='official_seg')
class ConvBN(tf.keras.layers.Layer):
  """slim.conv2d, or slim.separable_conv2d without pointwise, with its norm.

  DeepLab's units are tf-slim layers under an arg_scope that adds batch
  norm (no conv bias) and ReLU; this is one of them, carrying the slim
  scope its variables have in DeepLab's checkpoints (`slim_variables`).
  A strided convolution pads explicitly and convolves 'VALID', as
  DeepLab's `conv2d_same`/`separable_conv2d_same` do, so that outputs align
  with DeepLab's for any input size. Without batch norm the convolution has
  a bias (DeepLab's logits).
  """

  def __init__(self, scope, filters, kernel_size, strides=1, rate=1,
               depthwise=False, activation='relu', batch_norm=True,
               kernel_regularizer=None, norm_epsilon=1e-3,
               norm_momentum=0.9997, explicit_padding=True, **kwargs):
    """Args mirror slim's; `scope` is the DeepLab variable scope (str).

    Args:
      scope: str, slim scope, e.g. 'entry_flow/conv1_1'.
      filters: int, output channels (ignored when `depthwise`).
      kernel_size: int.
      strides: int.
      rate: int, dilation rate.
      depthwise: bool, a depthwise convolution (multiplier 1).
      activation: 'relu', 'relu6', 'hard_swish', 'hard_sigmoid' (the
        Model Garden's, which are slim mobilenet_v3's) or None, after the
        norm.
      batch_norm: bool; False gives a conv with a bias instead.
      kernel_regularizer: Keras regularizer of a regular convolution's
        kernel. A depthwise kernel gets none, as in DeepLab, whose models
        (slim's `regularize_depthwise=False`, `split_separable_conv2d`)
        never decay them: fine-tuning from a zoo checkpoint then trains
        the weights DeepLab trained under the same loss.
      norm_epsilon: float, batch norm's epsilon.
      norm_momentum: float, batch norm's decay.
      explicit_padding: bool; False pads a strided convolution as TF's
        'SAME' (more at the end on even sizes), as slim's mobilenet does.
      **kwargs: Keras Layer's (name defaults to the scope's last part).
    """
    kwargs.setdefault('name', scope.split('/')[-1])
    super().__init__(**kwargs)
    self.scope = scope
    self._config = dict(
        scope=scope, filters=filters, kernel_size=kernel_size,
        strides=strides, rate=rate, depthwise=depthwise,
        activation=activation, batch_norm=batch_norm,
        kernel_regularizer=tf.keras.regularizers.serialize(
            kernel_regularizer) if kernel_regularizer else None,
        norm_epsilon=norm_epsilon, norm_momentum=norm_momentum,
        explicit_padding=explicit_padding)
    self._explicit = explicit_padding and strides > 1 and kernel_size > 1
    common = dict(kernel_size=kernel_size, strides=strides,
                  dilation_rate=rate, use_bias=not batch_norm,
                  padding='valid' if self._explicit else 'same')
    if depthwise:
      self.conv = tf.keras.layers.DepthwiseConv2D(name='depthwise', **common)
    else:
      self.conv = tf.keras.layers.Conv2D(
          filters, kernel_regularizer=kernel_regularizer, name='conv',
          **common)
    self.norm = (tf.keras.layers.BatchNormalization(
        epsilon=norm_epsilon, momentum=norm_momentum, name='BatchNorm')
                 if batch_norm else None)
    self.activation = tf_utils.get_activation(activation)

  @tf.autograph.experimental.do_not_convert
  def call(self, inputs, training=None):
    if self._explicit:
      inputs = fixed_padding(inputs, self._config['kernel_size'],
                             self._config['rate'])
    x = self.conv(inputs)
    if self.norm is not None:
      x = self.norm(x, training=training)
    return self.activation(x)

  def slim_variables(self, prefix=''):
    """This layer's variables by their DeepLab checkpoint names.

    Args:
      prefix: str, the enclosing slim scope with its '/', e.g.
        'xception_65/'.

    Returns:
      dict of slim name (str) to this layer's `tf.Variable`; empty before
      the layer is built.
    """
    if not self.conv.built:
      return {}
    name = prefix + self.scope
    found = {}
    if isinstance(self.conv, tf.keras.layers.DepthwiseConv2D):
      found[f'{name}/depthwise_weights'] = self.conv.depthwise_kernel
    else:
      found[f'{name}/weights'] = self.conv.kernel
    if self.conv.use_bias:
      found[f'{name}/biases'] = self.conv.bias
    if self.norm is not None:
      for slim_name, keras_name in _BATCH_NORM:
        found[f'{name}/BatchNorm/{slim_name}'] = getattr(self.norm,
                                                          keras_name)
    return found

  def get_config(self):
    config = dict(self._config)
    if config['kernel_regularizer']:
      config['kernel_regularizer'] = tf.keras.regularizers.deserialize(
          config['kernel_regularizer'])
    return dict(super().get_config(), **config)


def separable(scope, filters, rate=1, strides=1, **kwargs):
  """DeepLab's split separable conv: depthwise and 1x1, each with its norm.

  Args:
    scope: str, the slim scope; the layers are '<scope>_depthwise' and
      '<scope>_pointwise'.
    filters: int, output channels.
    rate: int, the depthwise convolution's dilation.
    strides: int, the depthwise convolution's stride.
    **kwargs: `ConvBN`'s (activation, kernel_regularizer, norms).

  Returns:
    [depthwise `ConvBN`, pointwise `ConvBN`].
  """
  return [ConvBN(scope + '_depthwise', None, 3, strides=strides, rate=rate,
                 depthwise=True, **kwargs),
          ConvBN(scope + '_pointwise', filters, 1, **kwargs)]


def slim_variables(layer, prefix=''):
  """The DeepLab names of every `ConvBN` variable under a Keras layer.

  Args:
    layer: a built Keras layer or model.
    prefix: str, the enclosing slim scope with its '/'.

  Returns:
    dict of slim name (str) to `tf.Variable`.
  """
  found = {}
  for sublayer in layer._flatten_layers(include_self=True):  # pylint: disable=protected-access
    if isinstance(sublayer, ConvBN):
      found.update(sublayer.slim_variables(prefix))
  return found


def scaled(depth, filter_scale):
  """A layer's channels at `filter_scale` (1.0: DeepLab's)."""
  return max(1, int(depth * filter_scale))


def dense_units(unit_strides, output_stride, current_stride):
  """(stride, rate) of each unit as DeepLab's `stack_blocks_dense` runs them.

  Once the units have reached `output_stride`, each further one keeps
  stride 1 and is atrous instead, its rate the product of the strides it
  skipped before it.

  Args:
    unit_strides: ints, each unit's nominal stride, in order.
    output_stride: int, the stride the features must not pass.
    current_stride: int, the stride of the first unit's input (the root's).

  Yields:
    (stride, rate) of each unit.
  """
  rate = 1
  for stride in unit_strides:
    if current_stride == output_stride:
      yield 1, rate
      rate *= stride
    else:
      yield stride, 1
      current_stride *= stride


def backbone_input(input_specs):
  """The Keras input of `input_specs` (None: RGB images of any size)."""
  input_specs = input_specs or tf.keras.layers.InputSpec(
      shape=[None, None, None, 3])
  return tf.keras.Input(shape=input_specs.shape[1:])


def stride4_and_deepest(stride4, features, output_stride):
  """The endpoints of a backbone whose decoder reads its stride-4 features.

  Returns:
    dict: level '2' to `stride4`, the output stride's level to `features`.
  """
  return {'2': stride4, str({8: 3, 16: 4, 32: 5}[output_stride]): features}


class SlimBackbone(tf.keras.Model):
  """A DeepLab network as a functional Model Garden-style backbone.

  Its output dict maps levels (str) to features: the decoder's and the
  output stride's. `slim_scope` (with `slim_variables`) gives its variables'
  names in DeepLab's checkpoints. Subclasses build their layers on
  `backbone_input(input_specs)` and pass their constructor's arguments as
  `config`.
  """

  def __init__(self, inputs, endpoints, slim_scope, config, **kwargs):
    """Args:

    Args:
      inputs: the Keras input tensor.
      endpoints: dict of level (str) to its symbolic features.
      slim_scope: str, DeepLab's outer scope, e.g. 'xception_65' or
        'MobilenetV2'; also the model's name.
      config: dict, the subclass's constructor arguments.
      **kwargs: Keras Model's.
    """
    self._output_specs = {key: value.get_shape()
                          for key, value in endpoints.items()}
    super().__init__(inputs=inputs, outputs=endpoints, name=slim_scope,
                     **kwargs)
    self.slim_scope = slim_scope
    self._config_dict = dict(config)

  @property
  def output_specs(self):
    """Level (str) to the `tf.TensorShape` of its features."""
    return self._output_specs

  def get_config(self):
    return dict(self._config_dict)

  @classmethod
  def from_config(cls, config, custom_objects=None):
    return cls(**config)
