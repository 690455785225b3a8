"""Shared helpers of the DeepLab import tests: the command, random reference weights, our restored outputs."""

import os

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

# The command, whose import_checkpoint the DeepLab tests call.
from official_seg.commands import import_deeplab_checkpoint as import_tool  # pylint: disable=unused-import
from official_seg.modeling import model as model_lib

# Sessions that run a graph once or twice: Grappler's rewrites cost more
# than they save, and the unrewritten graph computes the same values.
SESSION_CONFIG = tf.compat.v1.ConfigProto(
    graph_options=tf.compat.v1.GraphOptions(
        rewrite_options=rewriter_config_pb2.RewriterConfig(
            disable_meta_optimizer=True)))


def session():
  """A `tf.compat.v1.Session` of the default graph, without Grappler."""
  return tf.compat.v1.Session(config=SESSION_CONFIG)


def random_images(seed, batch, height, width):
  """float32 [batch, height, width, 3] images in [-1, 1], DeepLab's range."""
  return np.random.default_rng(seed).uniform(
      -1.0, 1.0, (batch, height, width, 3)).astype(np.float32)


def randomize(sess, rng):
  """Random weights and batch-norm statistics that keep activations O(1)."""
  feed = {}
  for variable in tf.compat.v1.global_variables():
    shape = variable.shape.as_list()
    name = variable.op.name
    if name.endswith('moving_variance'):
      value = rng.uniform(0.5, 2.0, shape)
    elif name.endswith('gamma'):
      value = rng.uniform(0.5, 1.5, shape)
    elif name.endswith(('beta', 'moving_mean', 'biases')):
      value = rng.normal(0.0, 0.2, shape)
    elif len(shape) == 4:
      fan_in = shape[0] * shape[1] * (1 if 'depthwise' in name else shape[2])
      value = rng.normal(0.0, np.sqrt(1.0 / fan_in), shape)
    else:
      value = np.zeros(shape)
    feed[variable.initializer.inputs[1]] = value.astype(
        variable.dtype.as_numpy_dtype)
  # One run: a `load` per variable adds ops to the graph each time.
  sess.run(tf.compat.v1.global_variables_initializer(), feed)


def save_randomized(directory, outputs):
  """Randomizes the graph's variables and saves them as a DeepLab checkpoint.

  Args:
    directory: str, where `model.ckpt` is written.
    outputs: a structure of the graph's tensors.

  Returns:
    (prefix, the values of `outputs`).
  """
  with session() as sess:
    randomize(sess, np.random.default_rng(0))
    prefix = tf.compat.v1.train.Saver().save(
        sess, os.path.join(directory, 'model.ckpt'))
    return prefix, sess.run(outputs)


def our_outputs(checkpoint, images, backbone=False, num_classes=4):
  """Our model of the parsed gin files, restored by name as Estimator restores.

  Args:
    checkpoint: str, our checkpoint's prefix.
    images: float32 [B, H, W, 3].
    backbone: bool, whether to return the head's backbone level instead of
      the logits.
    num_classes: int, the dataset's (datasets/synthetic.gin's by default).

  Returns:
    The logits, or the backbone features, on `images`.
  """
  with tf.Graph().as_default():
    model = model_lib.build_model(num_classes=num_classes)
    outputs = model(tf.constant(images), training=False, with_features=True)
    saver = tf.compat.v1.train.Saver(model.variables)
    with session() as sess:
      saver.restore(sess, checkpoint)
      if backbone:
        level = str(model_lib.feature_level(model.backbone))
        return sess.run(outputs['backbone_features'][level])
      return sess.run(outputs['logits'])
