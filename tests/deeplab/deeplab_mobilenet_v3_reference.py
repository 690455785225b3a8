"""An independent tf-slim DeepLab with MobileNetV3, written from DeepLab's and slim's research code.

Follows tensorflow/models research/slim/nets/mobilenet: mobilenet_v3.py
(`V3_LARGE`, `V3_SMALL`, `mbv3_op`, `hard_swish`, `squeeze_excite` with
factor 4, ReLU and relu6(x + 3) * 0.16667), mobilenet.py (`mobilenet_base`,
`depth_multiplier` with slim's default divisible_by and min_depth of 8),
conv_blocks.py (`expanded_conv` with `expansion_transform`, `squeeze_excite`,
`expand_input_by_factor`); research/deeplab core/feature_extractor.py
(`mobilenet_v3_large_seg`/`_small_seg`: the last stage halved, expansions
336/480/480 and 144/288/288, final end points layer_17 and layer_13,
decoder end points at stride 8, scope MobilenetV3, `mobilenet_v2_arg_scope`'s
batch norm), model.py (`extract_features` with
aspp_with_squeeze_and_excitation, `refine_by_decoder` with
decoder_use_sum_merge and decoder_output_is_logits) and core/utils.py
(`q_sigmoid`, `scale_dimension`). Used by tests only.
"""

import numpy as np
import tensorflow as tf

from tests.deeplab import deeplab_mobilenet_reference
from tests.deeplab import deeplab_reference

slim = deeplab_reference.slim


def _hard_swish(x):
  return x * tf.nn.relu6(x + np.float32(3)) * np.float32(1. / 6.)


def _q_sigmoid(x):
  return tf.nn.relu6(x + 3) * 0.16667


def _op(ef, n, k, s=1, act=tf.nn.relu, se=False):
  """mbv3_op's parameters: expansion factor, outputs, kernel, stride."""
  return dict(kind='expanded', ef=ef, num_outputs=n, kernel_size=k, stride=s,
              act=act, se=se)


def _conv(n, k, s=1):
  return dict(kind='conv', num_outputs=n, kernel_size=k, stride=s,
              act=_hard_swish)


_H = _hard_swish
# V3_LARGE's and V3_SMALL's spec lists, without the pooling and classifier
# that DeepLab's final end points leave out.
V3_LARGE = [
    _conv(16, 3, 2), _op(1, 16, 3), _op(4, 24, 3, 2), _op(3, 24, 3, 1),
    _op(3, 40, 5, 2, se=True), _op(3, 40, 5, 1, se=True),
    _op(3, 40, 5, 1, se=True), _op(6, 80, 3, 2, _H), _op(2.5, 80, 3, 1, _H),
    _op(184 / 80., 80, 3, 1, _H), _op(184 / 80., 80, 3, 1, _H),
    _op(6, 112, 3, 1, _H, True), _op(6, 112, 3, 1, _H, True),
    _op(6, 160, 5, 2, _H, True), _op(6, 160, 5, 1, _H, True),
    _op(6, 160, 5, 1, _H, True), _conv(960, 1)]
V3_SMALL = [
    _conv(16, 3, 2), _op(1, 16, 3, 2, se=True), _op(72. / 16, 24, 3, 2),
    _op(88. / 24, 24, 3, 1), _op(4, 40, 5, 2, _H, True),
    _op(6, 40, 5, 1, _H, True), _op(6, 40, 5, 1, _H, True),
    _op(3, 48, 5, 1, _H, True), _op(3, 48, 5, 1, _H, True),
    _op(6, 96, 5, 2, _H, True), _op(6, 96, 5, 1, _H, True),
    _op(6, 96, 5, 1, _H, True), _conv(576, 1)]
# feature_extractor.py's halving, (layer index, expansion) of each variant.
_SEG = {'large': (V3_LARGE, [(13, 336), (14, 480), (15, 480), (16, None)]),
        'small': (V3_SMALL, [(9, 144), (10, 288), (11, 288), (12, None)])}
DECODER_END_POINT = {'large': 'layer_7/depthwise_output',
                     'small': 'layer_4/depthwise_output'}


def seg_spec(model_id):
  """mobilenet_v3_{large,small}_seg's conv defs."""
  spec, changes = _SEG[model_id]
  spec = [dict(layer) for layer in spec]
  for layer, expansion in changes:
    spec[layer]['num_outputs'] /= 2
    if expansion is not None:
      spec[layer]['ef'] = expansion / spec[layer - 1]['num_outputs']
  return spec


def _squeeze_excite(x):
  with tf.compat.v1.variable_scope('squeeze_excite'):
    channels = x.shape[3]
    pooled = tf.nn.avg_pool(x, (1, x.shape[1], x.shape[2], 1),
                            strides=(1, 1, 1, 1), padding='VALID')
    squeeze = slim.conv2d(pooled, deeplab_mobilenet_reference.make_divisible(channels / 4, 8), [1, 1],
                          normalizer_fn=None, activation_fn=tf.nn.relu,
                          scope='Conv')
    excite = slim.conv2d(squeeze, channels, [1, 1], normalizer_fn=None,
                         activation_fn=_q_sigmoid, scope='Conv_1')
    return x * excite


def _expanded_conv(net, layer, stride, rate, scope, end_points, name):
  with tf.compat.v1.variable_scope(scope), slim.arg_scope(
      [slim.conv2d, slim.separable_conv2d], activation_fn=layer['act']):
    inner = deeplab_mobilenet_reference.make_divisible(net.shape[3] * layer['ef'], 8)
    x = net
    if inner > net.shape[3]:
      x = slim.conv2d(x, inner, [1, 1], scope='expand')
    x = slim.separable_conv2d(x, None, layer['kernel_size'],
                              depth_multiplier=1, stride=stride, rate=rate,
                              scope='depthwise')
    end_points[f'{name}/depthwise_output'] = x
    if layer['se']:
      x = _squeeze_excite(x)
    x = slim.conv2d(x, layer['num_outputs'], [1, 1], activation_fn=None,
                    scope='project')
    if stride == 1 and x.shape[3] == net.shape[3]:
      x += net
    return x


def mobilenet_v3(images, model_id, output_stride, depth_multiplier=1.0):
  """(final end point's features, end_points) of DeepLab's MobileNetV3."""
  end_points = {}
  with tf.compat.v1.variable_scope('MobilenetV3'), slim.arg_scope(
      [slim.conv2d, slim.separable_conv2d], normalizer_fn=slim.batch_norm,
      activation_fn=tf.nn.relu, padding='SAME'), slim.arg_scope(
          [slim.batch_norm], center=True, scale=True, decay=0.997,
          is_training=False, updates_collections=None):
    current, rate, net = 1, 1, images
    convs, blocks = 0, 0
    for i, layer in enumerate(seg_spec(model_id)):
      depth = deeplab_mobilenet_reference.make_divisible(layer['num_outputs'] * depth_multiplier, 8, 8)
      layer = dict(layer, num_outputs=depth)
      if current == output_stride:
        layer_stride, layer_rate = 1, rate
        rate *= layer['stride']
      else:
        layer_stride, layer_rate = layer['stride'], 1
        current *= layer['stride']
      if layer['kind'] == 'conv':
        net = slim.conv2d(net, depth, layer['kernel_size'],
                          stride=layer_stride, activation_fn=layer['act'],
                          scope='Conv' + (f'_{convs}' if convs else ''))
        convs += 1
      else:
        scope = 'expanded_conv' + (f'_{blocks}' if blocks else '')
        net = _expanded_conv(net, layer, layer_stride, layer_rate, scope,
                             end_points, f'layer_{i + 1}')
        blocks += 1
  return net, end_points


def _scale_dimension(dim, scale):
  return int((float(dim) - 1.0) * scale + 1.0)


def _resize(features, size):
  return tf.compat.v1.image.resize_bilinear(features, size,
                                            align_corners=True)


def deeplab(images, model_id, num_classes, depth_multiplier=1.0,
            output_stride=32, depth=128, pooling_crop=(769, 769),
            pooling_stride=(4, 5)):
  """DeepLab's logits at stride 8 with the zoo's MobileNetV3 flags; the
  crop is the images' size, as at DeepLab's evaluation."""
  crop = images.shape.as_list()[1:3]
  features, end_points = mobilenet_v3(images, model_id, output_stride,
                                      depth_multiplier)
  with slim.arg_scope([slim.conv2d], activation_fn=tf.nn.relu,
                      normalizer_fn=slim.batch_norm, padding='SAME',
                      stride=1), slim.arg_scope(
                          [slim.batch_norm], decay=0.9997, epsilon=1e-5,
                          scale=True, is_training=False,
                          updates_collections=None):
    pool = [_scale_dimension(size, 1. / output_stride)
            for size in pooling_crop]
    image_feature = slim.avg_pool2d(features, pool, pooling_stride,
                                    padding='VALID')
    image_feature = slim.conv2d(image_feature, depth, 1,
                                activation_fn=_q_sigmoid, normalizer_fn=None,
                                scope='image_pooling')
    image_feature = _resize(image_feature, [
        _scale_dimension(size, 1. / output_stride) for size in crop])
    net = slim.conv2d(features, depth, 1, scope='aspp0') * image_feature
  with slim.arg_scope([slim.conv2d], activation_fn=None, normalizer_fn=None,
                      padding='SAME', stride=1):
    with tf.compat.v1.variable_scope('decoder'):
      size = [_scale_dimension(dim, 1. / 8) for dim in crop]
      projected = _resize(slim.conv2d(end_points[DECODER_END_POINT[
          model_id]], num_classes, 1, scope='feature_projection0'), size)
      return slim.conv2d(_resize(net, size), num_classes, 1,
                         scope='decoder_conv0') + projected
