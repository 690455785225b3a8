"""An independent tf-slim DeepLabV3+ with Xception, written from DeepLab's research code.

Follows tensorflow/models research/deeplab: core/xception.py (xception_41/65/
71, `xception_module`, `separable_conv2d_same`, `stack_blocks_dense`),
core/utils.py (`split_separable_conv2d`), model.py (`extract_features`,
`refine_by_decoder`, `get_branch_logits`) at evaluation with the whole
feature map pooled. Batch norm runs slim's own implementation
(`updates_collections=None`): its Keras-backed one imports
`tf_keras.legacy_tf_layers`, which tf_keras 2.15.1 no longer has; at
inference both compute the same normalisation with the same variables.
Used by tests only, to write checkpoints with DeepLab's
variable names and to compute the logits DeepLab's graph gives.
"""

import tensorflow as tf
from tensorflow.python.framework import ops  # pylint: disable=g-direct-tensorflow-import

# tf-slim 1.1.0 (its last release) tests `isinstance(x, ops.Tensor)`, a name
# TensorFlow 2.15 no longer defines there; it is the public tf.Tensor.
if not hasattr(ops, 'Tensor'):
  ops.Tensor = tf.Tensor
import tf_slim as slim  # pylint: disable=g-import-not-at-top,wrong-import-position

# DeepLab's xception block lists: (scope, depths, skip, activation inside,
# units, stride); copied from the paper's table as DeepLab codes it.
_ENTRY = [('entry_flow/block1', [128] * 3, 'conv', False, 1, 2),
          ('entry_flow/block2', [256] * 3, 'conv', False, 1, 2),
          ('entry_flow/block3', [728] * 3, 'conv', False, 1, 2)]
_ENTRY_71 = [('entry_flow/block1', [128] * 3, 'conv', False, 1, 2),
             ('entry_flow/block2', [256] * 3, 'conv', False, 1, 1),
             ('entry_flow/block3', [256] * 3, 'conv', False, 1, 2),
             ('entry_flow/block4', [728] * 3, 'conv', False, 1, 1),
             ('entry_flow/block5', [728] * 3, 'conv', False, 1, 2)]
_EXIT = [('exit_flow/block1', [728, 1024, 1024], 'conv', False, 1, 2),
         ('exit_flow/block2', [1536, 1536, 2048], 'none', True, 1, 1)]
BLOCKS = {
    'xception_41': _ENTRY + [('middle_flow/block1', [728] * 3, 'sum', False,
                              8, 1)] + _EXIT,
    'xception_65': _ENTRY + [('middle_flow/block1', [728] * 3, 'sum', False,
                              16, 1)] + _EXIT,
    'xception_71': _ENTRY_71 + [('middle_flow/block1', [728] * 3, 'sum',
                                 False, 16, 1)] + _EXIT,
}
DECODER_END_POINT = {
    'xception_41': 'entry_flow/block2/unit_1/xception_module/'
                   'separable_conv2_pointwise',
    'xception_65': 'entry_flow/block2/unit_1/xception_module/'
                   'separable_conv2_pointwise',
    'xception_71': 'entry_flow/block3/unit_1/xception_module/'
                   'separable_conv2_pointwise',
}


def _fixed_padding(inputs, kernel_size, rate=1):
  effective = kernel_size + (kernel_size - 1) * (rate - 1)
  begin = (effective - 1) // 2
  end = effective - 1 - begin
  return tf.pad(inputs, [[0, 0], [begin, end], [begin, end], [0, 0]])


def _separable_conv2d_same(inputs, depth, stride, rate, activation_fn, scope):
  """core/xception.py with regularize_depthwise=False: split depthwise/pointwise."""
  padding = 'SAME'
  if stride != 1:
    inputs = _fixed_padding(inputs, 3, rate)
    padding = 'VALID'
  outputs = slim.separable_conv2d(inputs, None, 3, depth_multiplier=1,
                                  stride=stride, rate=rate, padding=padding,
                                  activation_fn=activation_fn,
                                  scope=scope + '_depthwise')
  return slim.conv2d(outputs, depth, 1, activation_fn=activation_fn,
                     scope=scope + '_pointwise')


def _xception_module(inputs, depths, skip, inside, stride, rate, unit_rates,
                     end_points):
  # DeepLab's scope is (None, 'xception_module'): the same name, one a unit.
  with tf.compat.v1.variable_scope('xception_module') as scope:
    residual = inputs
    for i in range(3):
      if not inside:
        residual = tf.nn.relu(residual)
      residual = _separable_conv2d_same(
          residual, depths[i], stride if i == 2 else 1, rate * unit_rates[i],
          tf.nn.relu if inside else None, f'separable_conv{i + 1}')
      end_points[f'{scope.name}/separable_conv{i + 1}_pointwise'] = residual
    if skip == 'conv':
      shortcut = slim.conv2d(inputs, depths[-1], 1, stride=stride,
                             activation_fn=None, scope='shortcut')
      return residual + shortcut
    if skip == 'sum':
      return residual + inputs
    return residual


def xception(inputs, model_variant, output_stride, scale=1.0,
             multi_grid=(1, 1, 1)):
  """(features, end_points) of DeepLab's xception at evaluation; `scale`
  multiplies every layer's channels (1.0: DeepLab's)."""
  width = lambda depth: max(1, int(depth * scale))
  end_points = {}
  with tf.compat.v1.variable_scope(model_variant):
    with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                        activation_fn=tf.nn.relu,
                        normalizer_fn=slim.batch_norm):
      with slim.arg_scope([slim.batch_norm], decay=0.9997, epsilon=1e-3,
                          scale=True, is_training=False,
                          updates_collections=None):
        net = _fixed_padding(inputs, 3)
        net = slim.conv2d(net, width(32), 3, stride=2, padding='VALID',
                          scope='entry_flow/conv1_1')
        net = slim.conv2d(net, width(64), 3, stride=1,
                          scope='entry_flow/conv1_2')
        target = output_stride // 2
        current, rate = 1, 1
        for scope, depths, skip, inside, units, stride in BLOCKS[
            model_variant]:
          grid = multi_grid if scope == 'exit_flow/block2' else (1, 1, 1)
          depths = [width(depth) for depth in depths]
          with tf.compat.v1.variable_scope(scope):
            for i in range(units):
              with tf.compat.v1.variable_scope(f'unit_{i + 1}'):
                if current == target:
                  net = _xception_module(net, depths, skip, inside, 1, rate,
                                         grid, end_points)
                  rate *= stride
                else:
                  net = _xception_module(net, depths, skip, inside, stride, 1,
                                         grid, end_points)
                  current *= stride
  return net, end_points


def _split_separable_conv2d(inputs, filters, rate, scope):
  outputs = slim.separable_conv2d(inputs, None, 3, depth_multiplier=1,
                                  rate=rate, scope=scope + '_depthwise')
  return slim.conv2d(outputs, filters, 1, scope=scope + '_pointwise')


def _resize(features, size):
  return tf.compat.v1.image.resize_bilinear(features, size,
                                            align_corners=True)


def deeplab_v3_plus(images, model_variant, output_stride, atrous_rates,
                    num_classes, decoder=True, scale=1.0, depth=256):
  """DeepLab's logits at stride 4 (or at the output stride without decoder);
  `depth` is DeepLab's aspp_convs_filters and decoder_filters."""
  features, end_points = xception(images, model_variant, output_stride,
                                  scale)
  low = (end_points[f'{model_variant}/{DECODER_END_POINT[model_variant]}']
         if decoder else None)
  return logits(features, low, atrous_rates, num_classes, depth)


def logits(features, low, atrous_rates, num_classes, depth=256):
  """model.py on a backbone's features: ASPP, the decoder on `low` (None:
  no decoder), then logits/semantic."""
  with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                      activation_fn=tf.nn.relu,
                      normalizer_fn=slim.batch_norm, padding='SAME', stride=1):
    with slim.arg_scope([slim.batch_norm], decay=0.9997, epsilon=1e-5,
                        scale=True, is_training=False,
                        updates_collections=None):
      size = tf.shape(features)[1:3]
      pooled = tf.reduce_mean(features, axis=[1, 2], keepdims=True)
      pooled = slim.conv2d(pooled, depth, 1, scope='image_pooling')
      branches = [_resize(pooled, size), slim.conv2d(features, depth, 1,
                                                     scope='aspp0')]
      for i, rate in enumerate(atrous_rates, 1):
        branches.append(_split_separable_conv2d(features, depth, rate,
                                                f'aspp{i}'))
      net = slim.conv2d(tf.concat(branches, 3), depth, 1,
                        scope='concat_projection')
      if low is not None:
        with tf.compat.v1.variable_scope('decoder'):
          projected = slim.conv2d(low, 48, 1, scope='feature_projection0')
          low_size = tf.shape(low)[1:3]
          net = tf.concat([_resize(net, low_size),
                           _resize(projected, low_size)], 3)
          net = _split_separable_conv2d(net, depth, 1, 'decoder_conv0')
          net = _split_separable_conv2d(net, depth, 1, 'decoder_conv1')
  with tf.compat.v1.variable_scope('logits'):
    return slim.conv2d(net, num_classes, 1, activation_fn=None,
                       normalizer_fn=None, scope='semantic')
