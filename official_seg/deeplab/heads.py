"""DeepLab's own ASPP, decoder and logits, with its layers, order and resizing."""

import gin
import tensorflow as tf

from official_seg.deeplab import slim_layers
from official_seg.modeling import inference

# DeepLab's model.py builds ASPP and decoder with batch norm epsilon 1e-5.
_EPSILON = 1e-5


@gin.configurable(module='decoders')
@tf.keras.utils.register_keras_serializable(package='official_seg')
class DeepLabASPP(tf.keras.layers.Layer):
  """DeepLab's `extract_features` head: image pooling, ASPP, projection.

  Unlike the Model Garden's ASPP: the branches are concatenated in
  DeepLab's order (image pooling, 1x1, atrous), an atrous branch can be
  DeepLab's split separable convolution (batch norm and ReLU after its
  depthwise part too), and batch norm has DeepLab's epsilon. Pooling is
  over the whole feature map (DeepLab's evaluation at full crop).
  """

  def __init__(self, level, dilation_rates=(6, 12, 18), num_filters=256,
               separable=True, dropout_rate=0.1, kernel_regularizer=None,
               **kwargs):
    """Args:

    Args:
      level: int, the backbone level it reads.
      dilation_rates: ints, DeepLab's atrous_rates (empty: no atrous
        branches, as DeepLab's MobileNetV2 models).
      num_filters: int, DeepLab's aspp_convs_filters.
      separable: bool, DeepLab's aspp_with_separable_conv.
      dropout_rate: float, dropped after the projection in training
        (DeepLab's keep_prob 0.9).
      kernel_regularizer: Keras regularizer of every kernel.
      **kwargs: Keras Layer's.
    """
    kwargs.setdefault('name', 'aspp')
    super().__init__(**kwargs)
    self._config = dict(level=level, dilation_rates=tuple(dilation_rates),
                        num_filters=num_filters, separable=separable,
                        dropout_rate=dropout_rate)
    norm = dict(norm_epsilon=_EPSILON, kernel_regularizer=kernel_regularizer)
    self.image_pooling = slim_layers.ConvBN('image_pooling', num_filters, 1,
                                            **norm)
    self.branches = [[slim_layers.ConvBN('aspp0', num_filters, 1, **norm)]]
    for i, rate in enumerate(dilation_rates, 1):
      if separable:
        self.branches.append(slim_layers.separable(
            f'aspp{i}', num_filters, rate=rate, **norm))
      else:
        self.branches.append([slim_layers.ConvBN(
            f'aspp{i}', num_filters, 3, rate=rate, **norm)])
    self.projection = slim_layers.ConvBN('concat_projection', num_filters, 1,
                                         **norm)
    self.dropout = tf.keras.layers.Dropout(dropout_rate)

  @tf.autograph.experimental.do_not_convert
  def call(self, inputs, training=None):
    """{level: features} to {level: [B, h, w, num_filters]}."""
    level = str(self._config['level'])
    features = inputs[level] if isinstance(inputs, dict) else inputs
    pooled = tf.reduce_mean(features, axis=[1, 2], keepdims=True)
    pooled = self.image_pooling(pooled, training=training)
    outputs = [inference.resize_aligned(pooled, tf.shape(features)[1:3])]
    for branch in self.branches:
      x = features
      for layer in branch:
        x = layer(x, training=training)
      outputs.append(x)
    x = self.projection(tf.concat(outputs, axis=-1), training=training)
    return {level: self.dropout(x, training=training)}

  def get_config(self):
    return dict(super().get_config(), **self._config)


@gin.configurable(module='heads', denylist=['num_classes'])
@tf.keras.utils.register_keras_serializable(package='official_seg')
class DeepLabHead(tf.keras.layers.Layer):
  """DeepLab's decoder (`refine_by_decoder`) and `logits/semantic`.

  With `low_level`, the backbone's features there are projected to
  `low_level_num_filters`, the ASPP output is resized to them with aligned
  corners and concatenated before them, and two split separable
  convolutions follow (DeepLab's decoder_use_separable_conv, which every zoo
  model with a decoder uses); the logits are a 1x1 convolution with a bias.
  Without `low_level` (DeepLabV3), the logits read the ASPP output.
  """

  def __init__(self, num_classes, level, low_level=2,
               low_level_num_filters=48, num_filters=256,
               kernel_regularizer=None, **kwargs):
    """Args:

    Args:
      num_classes: int.
      level: int, the decoder level it reads.
      low_level: int or None, the backbone level of the decoder's features
        (2: stride 4, DeepLab's decoder_output_stride 4).
      low_level_num_filters: int, the projection's channels (48).
      num_filters: int, DeepLab's decoder_filters.
      kernel_regularizer: Keras regularizer of every kernel.
      **kwargs: Keras Layer's.
    """
    kwargs.setdefault('name', 'segmentation_head')
    super().__init__(**kwargs)
    self._config = dict(num_classes=num_classes, level=level,
                        low_level=low_level,
                        low_level_num_filters=low_level_num_filters,
                        num_filters=num_filters)
    norm = dict(norm_epsilon=_EPSILON, kernel_regularizer=kernel_regularizer)
    self.convs = []
    if low_level is not None:
      self.projection = slim_layers.ConvBN(
          'decoder/feature_projection0', low_level_num_filters, 1, **norm)
      for i in range(2):
        scope = f'decoder/decoder_conv{i}'
        self.convs += slim_layers.separable(scope, num_filters, **norm)
    self.logits = slim_layers.ConvBN(
        'logits/semantic', num_classes, 1, activation=None, batch_norm=False,
        kernel_regularizer=kernel_regularizer, name='segmentation_output')

  @tf.autograph.experimental.do_not_convert
  def call(self, inputs, training=None):
    """(backbone levels, decoder levels) to logits [B, h, w, num_classes]."""
    backbone_output, decoder_output = inputs
    x = decoder_output[str(self._config['level'])]
    if self._config['low_level'] is not None:
      low = backbone_output[str(self._config['low_level'])]
      low = self.projection(low, training=training)
      x = tf.concat([inference.resize_aligned(x, tf.shape(low)[1:3]), low],
                    axis=-1)
      for layer in self.convs:
        x = layer(x, training=training)
    return self.logits(x, training=training)

  def get_config(self):
    return dict(super().get_config(), **self._config)


def _window_sums(size, window, stride, dtype):
  """[outputs, size]: row i is 1 over the positions of the i-th VALID window.

  Args:
    size: int32 scalar, the axis' length.
    window: int32 scalar, at most `size`.
    stride: int, the step between windows.
    dtype: the matrix's dtype.

  Returns:
    [(size - window) // stride + 1, size] of `dtype`, ones and zeros.
  """
  starts = tf.range(0, size - window + 1, stride)[:, None]
  positions = tf.range(size)[None, :]
  return tf.cast((positions >= starts) & (positions < starts + window), dtype)


def average_pool(features, window, strides):
  """VALID average pooling whose window shrinks to a smaller map.

  Args:
    features: [B, h, w, C].
    window: (height, width) ints, the window.
    strides: (height, width) ints.

  Returns:
    [B, h', w', C], slim's avg_pool2d(features, window, strides, 'VALID')
    where the window fits the map; along an axis where it does not, the
    window is the whole axis (one output).
  """
  # Window sums as two matrix products: tf.nn.avg_pool2d takes no window
  # computed from a map whose size is known only when it runs, and a
  # depthwise convolution of a ones filter fails at unequal strides on
  # CPUs whose kernels are Eigen's (those without oneDNN's AVX-512 path).
  size = tf.shape(features)[1:3]
  window = tf.minimum(tf.constant(window), size)
  rows = _window_sums(size[0], window[0], strides[0], features.dtype)
  cols = _window_sums(size[1], window[1], strides[1], features.dtype)
  summed = tf.einsum('jw,biwc->bijc', cols,
                     tf.einsum('ih,bhwc->biwc', rows, features))
  return summed / tf.cast(tf.reduce_prod(window), features.dtype)


@gin.configurable(module='decoders')
@tf.keras.utils.register_keras_serializable(package='official_seg')
class DeepLabLRASPP(tf.keras.layers.Layer):
  """DeepLab's ASPP of its MobileNetV3 models, image pooling as a gate.

  DeepLab's aspp_with_squeeze_and_excitation with image_se_uses_qsigmoid and
  no concat projection or atrous branches: a 1x1 convolution with batch norm
  and ReLU ('aspp0') multiplied by the image pooling branch, which averages
  windows of `image_pooling_crop_size` image pixels at
  `image_pooling_stride`, applies a 1x1 convolution with a bias and hard
  sigmoid ('image_pooling') and is resized with aligned corners to the map.
  A window larger than the map (an image smaller than the crop, where
  DeepLab's pooling fails) pools the whole axis.
  """

  def __init__(self, level, num_filters=128, image_pooling_crop_size=(769, 769),
               image_pooling_stride=(4, 5), kernel_regularizer=None, **kwargs):
    """Args:

    Args:
      level: int, the backbone level it reads (5: output stride 32).
      num_filters: int, DeepLab's aspp_convs_filters.
      image_pooling_crop_size: (height, width), DeepLab's
        image_pooling_crop_size in image pixels (its training crop).
      image_pooling_stride: (height, width), DeepLab's image_pooling_stride
        in feature pixels.
      kernel_regularizer: Keras regularizer of every kernel.
      **kwargs: Keras Layer's.
    """
    kwargs.setdefault('name', 'aspp')
    super().__init__(**kwargs)
    self._config = dict(level=level, num_filters=num_filters,
                        image_pooling_crop_size=tuple(image_pooling_crop_size),
                        image_pooling_stride=tuple(image_pooling_stride))
    self.branch = slim_layers.ConvBN('aspp0', num_filters, 1,
                                     norm_epsilon=_EPSILON,
                                     kernel_regularizer=kernel_regularizer)
    self.image_pooling = slim_layers.ConvBN(
        'image_pooling', num_filters, 1, activation='hard_sigmoid',
        batch_norm=False, kernel_regularizer=kernel_regularizer)

  @tf.autograph.experimental.do_not_convert
  def call(self, inputs, training=None):
    """{level: features} to {level: [B, h, w, num_filters]}."""
    level = str(self._config['level'])
    features = inputs[level] if isinstance(inputs, dict) else inputs
    # DeepLab's scale_dimension of the crop at the output stride.
    window = [(size - 1) // 2**int(level) + 1
              for size in self._config['image_pooling_crop_size']]
    pooled = average_pool(features, window,
                          self._config['image_pooling_stride'])
    gate = inference.resize_aligned(self.image_pooling(pooled),
                          tf.shape(features)[1:3])
    return {level: self.branch(features, training=training) * gate}

  def get_config(self):
    return dict(super().get_config(), **self._config)


@gin.configurable(module='heads', denylist=['num_classes'])
@tf.keras.utils.register_keras_serializable(package='official_seg')
class DeepLabLRASPPHead(tf.keras.layers.Layer):
  """DeepLab's sum-merge decoder whose output is the logits (MobileNetV3's).

  DeepLab's decoder_use_sum_merge with decoder_output_is_logits: the
  decoder's features, resized with aligned corners to the backbone's
  `low_level` map, through a 1x1 convolution to `num_classes`
  ('decoder/decoder_conv0'), plus a 1x1 convolution of the low-level
  features ('decoder/feature_projection0'); both have biases, neither batch
  norm nor activation, and there is no 'logits/semantic'.
  """

  def __init__(self, num_classes, level, low_level=3, kernel_regularizer=None,
               **kwargs):
    """Args:

    Args:
      num_classes: int (DeepLab's decoder_filters).
      level: int, the decoder level it reads.
      low_level: int, the backbone level of the decoder's features (3:
        stride 8, DeepLab's decoder_output_stride 8).
      kernel_regularizer: Keras regularizer of every kernel.
      **kwargs: Keras Layer's.
    """
    kwargs.setdefault('name', 'segmentation_head')
    super().__init__(**kwargs)
    self._config = dict(num_classes=num_classes, level=level,
                        low_level=low_level)
    logits = dict(activation=None, batch_norm=False,
                  kernel_regularizer=kernel_regularizer)
    self.projection = slim_layers.ConvBN('decoder/feature_projection0',
                                         num_classes, 1, **logits)
    self.conv = slim_layers.ConvBN('decoder/decoder_conv0', num_classes, 1,
                                   **logits)

  @tf.autograph.experimental.do_not_convert
  def call(self, inputs, training=None):
    """(backbone levels, decoder levels) to logits [B, h, w, num_classes]."""
    backbone_output, decoder_output = inputs
    x = decoder_output[str(self._config['level'])]
    # DeepLab resizes both to scale_dimension(crop, 1 / 8), which is the
    # size of the low-level map ('SAME' convolutions give ceil(H / 8)).
    low = backbone_output[str(self._config['low_level'])]
    x = inference.resize_aligned(x, tf.shape(low)[1:3])
    return self.conv(x) + self.projection(low)

  def get_config(self):
    return dict(super().get_config(), **self._config)
