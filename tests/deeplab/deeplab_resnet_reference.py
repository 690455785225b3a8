"""An independent tf-slim ResNet-v1 beta (50, 101), written from DeepLab's research code.

Follows tensorflow/models research/deeplab: core/resnet_v1_beta.py
(`bottleneck` with its unit rate, `root_block_fn_for_beta_variant`,
`resnet_v1_beta` with pool1, `resnet_v1_beta_block`, block4 from multi_grid,
the scopes 'resnet_v1_50' and 'resnet_v1_101'), core/feature_extractor.py
(batch norm decay 0.95 and epsilon 1e-5 for ResNets; the decoder's end
point 'block1/unit_2/bottleneck_v1/conv3'), at evaluation. `Block`,
`stack_blocks_dense`, `conv2d_same` and `subsample` are tf-slim's own
(tf_slim.nets.resnet_utils), which DeepLab imports. Batch norm is slim's own
implementation, as in `deeplab_reference`. Used by tests only, to write
checkpoints with DeepLab's variable names and to compute DeepLab's features.
"""

import tensorflow as tf

# tf-slim with its TensorFlow 2.15 patch applied.
from tests.deeplab.deeplab_reference import slim
from tf_slim.nets import resnet_utils  # pylint: disable=g-bad-import-order

SCOPES = {'resnet_v1_50_beta': 'resnet_v1_50',
          'resnet_v1_101_beta': 'resnet_v1_101'}
_BLOCK3_UNITS = {'resnet_v1_50_beta': 6, 'resnet_v1_101_beta': 23}
DECODER_END_POINT = 'block1/unit_2/bottleneck_v1/conv3'


@slim.add_arg_scope
def bottleneck(inputs, depth, depth_bottleneck, stride, unit_rate=1, rate=1,
               outputs_collections=None, scope=None):
  """DeepLab's ResNet-v1 bottleneck unit with its unit rate."""
  with tf.compat.v1.variable_scope(scope, 'bottleneck_v1', [inputs]) as sc:
    depth_in = slim.utils.last_dimension(inputs.get_shape(), min_rank=4)
    if depth == depth_in:
      shortcut = resnet_utils.subsample(inputs, stride, 'shortcut')
    else:
      shortcut = slim.conv2d(inputs, depth, [1, 1], stride=stride,
                             activation_fn=None, scope='shortcut')
    residual = slim.conv2d(inputs, depth_bottleneck, [1, 1], stride=1,
                           scope='conv1')
    residual = resnet_utils.conv2d_same(residual, depth_bottleneck, 3, stride,
                                        rate=rate * unit_rate, scope='conv2')
    residual = slim.conv2d(residual, depth, [1, 1], stride=1,
                           activation_fn=None, scope='conv3')
    output = tf.nn.relu(shortcut + residual)
    return slim.utils.collect_named_outputs(outputs_collections, sc.name,
                                            output)


def _blocks(model_variant, width, multi_grid):
  def block(scope, base_depth, num_units, stride):
    unit = dict(depth=width(base_depth * 4), depth_bottleneck=width(base_depth),
                stride=1, unit_rate=1)
    return resnet_utils.Block(scope, bottleneck, [unit] * (num_units - 1) +
                              [dict(unit, stride=stride)])
  return [block('block1', 64, 3, 2), block('block2', 128, 4, 2),
          block('block3', 256, _BLOCK3_UNITS[model_variant], 2),
          resnet_utils.Block('block4', bottleneck, [
              dict(depth=width(2048), depth_bottleneck=width(512), stride=1,
                   unit_rate=rate) for rate in multi_grid])]


def resnet_v1_beta(inputs, model_variant, output_stride, scale=1.0,
                   multi_grid=(1, 1, 1)):
  """(features, end_points) of DeepLab's resnet_v1_*_beta at evaluation;
  `scale` multiplies every layer's channels (1.0: DeepLab's)."""
  width = lambda depth: max(1, int(depth * scale))
  blocks = _blocks(model_variant, width, multi_grid)
  with tf.compat.v1.variable_scope(SCOPES[model_variant],
                                   values=[inputs]) as sc:
    collection = sc.original_name_scope + '_end_points'
    with slim.arg_scope([slim.conv2d], activation_fn=tf.nn.relu,
                        normalizer_fn=slim.batch_norm), \
        slim.arg_scope([slim.batch_norm], decay=0.95, epsilon=1e-5,
                       scale=True, is_training=False,
                       updates_collections=None), \
        slim.arg_scope([slim.conv2d, bottleneck,
                        resnet_utils.stack_blocks_dense],
                       outputs_collections=collection):
      net = resnet_utils.conv2d_same(inputs, width(64), 3, stride=2,
                                     scope='conv1_1')
      net = resnet_utils.conv2d_same(net, width(64), 3, stride=1,
                                     scope='conv1_2')
      net = resnet_utils.conv2d_same(net, width(128), 3, stride=1,
                                     scope='conv1_3')
      net = slim.max_pool2d(net, 3, stride=2, padding='SAME', scope='pool1')
      net = resnet_utils.stack_blocks_dense(net, blocks, output_stride // 4)
      return net, slim.utils.convert_collection_to_dict(collection)
