"""An independent tf-slim DeepLabV3 with MobileNetV2, written from DeepLab's and slim's research code.

Follows tensorflow/models research/slim/nets/mobilenet: mobilenet_v2.py
(`V2_DEF`: ReLU6, 'SAME' padding, expansion 6 rounded to multiples of 8,
the first block unexpanded), mobilenet.py (`mobilenet_base`: depths through
`_make_divisible`, atrous rates once the output stride is reached),
conv_blocks.py (`expanded_conv`: expand, depthwise, linear project,
residual at stride 1 with equal depths); and research/deeplab
core/feature_extractor.py (`_mobilenet_v2`: scope MobilenetV2, final end
point layer_18, divisible_by and min_depth 8 at depth multiplier 1, else 1).
Batch norm is slim's own at inference (see deeplab_reference.py, whose
ASPP and logits this reuses). Used by tests only.
"""

import tensorflow as tf

from tests.deeplab import deeplab_reference

slim = deeplab_reference.slim

# V2_DEF's spec up to layer_18: (kind, stride, depth); the first
# expanded_conv expands by 1 (no expansion layer), the others by 6.
_SPEC = [('conv', 2, 32), ('expanded', 1, 16), ('expanded', 2, 24),
         ('expanded', 1, 24), ('expanded', 2, 32), ('expanded', 1, 32),
         ('expanded', 1, 32), ('expanded', 2, 64), ('expanded', 1, 64),
         ('expanded', 1, 64), ('expanded', 1, 64), ('expanded', 1, 96),
         ('expanded', 1, 96), ('expanded', 1, 96), ('expanded', 2, 160),
         ('expanded', 1, 160), ('expanded', 1, 160), ('expanded', 1, 320)]


def make_divisible(v, divisor, min_value=None):
  """slim's mobilenet `_make_divisible`."""
  if min_value is None:
    min_value = divisor
  new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
  if new_v < 0.9 * v:
    new_v += divisor
  return new_v


def _expanded_conv(net, depth, factor, stride, rate, scope):
  """conv_blocks.expanded_conv; (output, depthwise output)."""
  with tf.compat.v1.variable_scope(scope):
    input_depth = net.shape[3]
    inner = make_divisible(input_depth * factor, 8 if factor > 1 else 1)
    x = net
    if inner > input_depth:
      x = slim.conv2d(x, inner, [1, 1], scope='expand')
    x = slim.separable_conv2d(x, None, [3, 3], depth_multiplier=1,
                              stride=stride, rate=rate, scope='depthwise')
    depthwise = x
    x = slim.conv2d(x, depth, [1, 1], activation_fn=tf.identity,
                    scope='project')
    if stride == 1 and depth == input_depth:
      x += net
    return x, depthwise


def mobilenet_v2(images, output_stride, depth_multiplier=1.0):
  """(layer_18's features, {'layer_N/depthwise_output': tensor})."""
  divisible_by = 8 if depth_multiplier == 1.0 else 1
  end_points = {}
  with tf.compat.v1.variable_scope('MobilenetV2'), slim.arg_scope(
      [slim.conv2d, slim.separable_conv2d], normalizer_fn=slim.batch_norm,
      activation_fn=tf.nn.relu6, padding='SAME'), slim.arg_scope(
          [slim.batch_norm], center=True, scale=True, is_training=False,
          updates_collections=None):
    current, rate, net = 1, 1, images
    for i, (kind, stride, depth) in enumerate(_SPEC):
      depth = make_divisible(depth * depth_multiplier, divisible_by,
                             divisible_by)
      if current == output_stride:
        layer_stride, layer_rate = 1, rate
        rate *= stride
      else:
        layer_stride, layer_rate = stride, 1
        current *= stride
      if kind == 'conv':
        net = slim.conv2d(net, depth, [3, 3], stride=layer_stride,
                          scope='Conv')
      else:
        # slim's default scope names, written out: a second call with
        # reuse (the other output stride) would number default names anew.
        scope = 'expanded_conv' + (f'_{i - 1}' if i > 1 else '')
        net, end_points[f'layer_{i + 1}/depthwise_output'] = _expanded_conv(
            net, depth, 6 if i > 1 else 1, layer_stride, layer_rate, scope)
  return net, end_points


def deeplab_v3(images, output_stride, num_classes, depth_multiplier=1.0,
               atrous_rates=(), decoder=False, depth=256):
  """DeepLab's logits (the zoo's MobileNetV2 models: no atrous branches, no
  decoder; `decoder` reads layer_4/depthwise_output)."""
  features, end_points = mobilenet_v2(images, output_stride,
                                      depth_multiplier)
  low = end_points['layer_4/depthwise_output'] if decoder else None
  return deeplab_reference.logits(features, low, atrous_rates, num_classes,
                                  depth)
