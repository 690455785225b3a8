"""A 3-channel checkpoint's input kernel adapted to N channels, and restored so."""

import json
import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg.training import input_channels
from official_seg.training import warm_start


def _reference(kernel, channels):
  """segmentation_models_pytorch's change_conv_in_channels, channel by channel."""
  height, width, _, out = kernel.shape
  if channels == 1:
    return kernel[:, :, 0:1] + kernel[:, :, 1:2] + kernel[:, :, 2:3]
  adapted = np.zeros((height, width, channels, out), kernel.dtype)
  for i in range(channels):
    adapted[:, :, i] = kernel[:, :, i % 3]
  return adapted * (3 / channels)


class _Module:
  """What warm start reads of a model's module: its variables."""

  def __init__(self, variables):
    self.variables = variables


class _TinyModel:
  """A model of one convolution, as warm start sees a `SegmentationModel`."""

  def __init__(self, channels):
    with tf.compat.v1.variable_scope('backbone'):
      self.kernel = tf.compat.v1.get_variable('conv/kernel',
                                              [3, 3, channels, 4])
      self.bias = tf.compat.v1.get_variable('conv/bias', [4])
    self.variables = [self.kernel, self.bias]
    self.checkpoint_items = {'backbone': _Module(self.variables)}


class InputChannelsTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.kernel = np.random.default_rng(6).normal(
        size=(3, 3, 3, 4)).astype(np.float32)

  @parameterized.parameters(1, 2, 4, 5, 7)
  def test_adapted_kernel_equals_the_reference(self, channels):
    self.assertAllClose(input_channels.adapt_kernel(self.kernel, channels),
                        _reference(self.kernel, channels), rtol=1e-6)

  @parameterized.parameters(
      ([3, 3, 5, 4], [3, 3, 3, 4], True), ([3, 3, 1, 4], [3, 3, 3, 4], True),
      ([3, 3, 5, 4], [3, 3, 3, 8], False), ([1, 1, 5, 4], [3, 3, 3, 4], False),
      ([3, 3, 5, 4], [3, 3, 4, 4], False), ([5, 4], [3, 4], False))
  def test_only_kernels_of_three_input_channels_are_adaptable(
      self, model_shape, checkpoint_shape, expected):
    self.assertEqual(input_channels.adaptable(model_shape, checkpoint_shape),
                     expected)

  @parameterized.parameters((1, input_channels.SUM_RULE),
                            (5, input_channels.CYCLIC_RULE))
  def test_warm_start_adapts_the_kernel_and_reports_it(self, channels, rule):
    root = self.create_tempdir().full_path
    prefix = os.path.join(root, 'rgb', 'model.ckpt')
    bias = np.arange(4, dtype=np.float32)
    with tf.Graph().as_default():
      model = _TinyModel(3)
      with tf.compat.v1.Session() as session:
        session.run([model.kernel.assign(self.kernel), model.bias.assign(bias)])
        tf.compat.v1.train.Saver().save(session, prefix)
    model_dir = os.path.join(root, 'run')
    with tf.Graph().as_default():
      model = _TinyModel(channels)
      scaffold = warm_start.warm_start(model, model_dir, prefix)()
      creator = tf.compat.v1.train.ChiefSessionCreator(scaffold=scaffold)
      with tf.compat.v1.train.MonitoredSession(creator) as session:
        kernel, restored_bias = session.run([model.kernel, model.bias])
    self.assertAllClose(kernel, _reference(self.kernel, channels), rtol=1e-6)
    self.assertAllEqual(restored_bias, bias)
    with open(os.path.join(model_dir, warm_start.REPORT_NAME)) as f:
      report = json.load(f)
    self.assertEqual(report['adapted'], {'backbone/conv/kernel': {
        'key': 'backbone/conv/kernel', 'model_shape': [3, 3, channels, 4],
        'checkpoint_shape': [3, 3, 3, 4], 'rule': rule}})
    self.assertEqual(report['restored'],
                     {'backbone/conv/bias': 'backbone/conv/bias'})


if __name__ == '__main__':
  tf.test.main()
