"""Tests for the slim-scoped layers of DeepLab's models: weight decay as DeepLab's."""

import numpy as np
import tensorflow as tf

from official_seg.deeplab import slim_layers


class ConvWeightDecayTest(tf.test.TestCase):

  def _losses(self, depthwise):
    layer = slim_layers.ConvBN('block/conv', 4, 3, depthwise=depthwise,
                             kernel_regularizer=tf.keras.regularizers.L2(0.5))
    layer(tf.ones([1, 5, 5, 4]), training=False)
    kernel = (layer.conv.depthwise_kernel if depthwise
              else layer.conv.kernel).numpy()
    return [float(loss) for loss in layer.losses], kernel

  def test_regular_kernels_are_decayed(self):
    found, kernel = self._losses(depthwise=False)
    self.assertLen(found, 1)
    self.assertAllClose(found[0], 0.5 * np.sum(kernel.astype(np.float64)**2),
                        rtol=1e-5)

  def test_depthwise_kernels_are_not_decayed_as_in_deeplab(self):
    found, _ = self._losses(depthwise=True)
    self.assertEmpty(found)


if __name__ == '__main__':
  tf.test.main()
