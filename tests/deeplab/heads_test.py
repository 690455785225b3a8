"""DeepLab's MobileNetV3 head on maps smaller than its pooling window, and its average pooling."""

import json
import os
import subprocess
import sys

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official_seg.deeplab import heads
from tests import testing_utils

# Pools the features saved at argv[1] at unequal strides with TensorFlow's
# own (Eigen's) CPU kernels, which CPUs without oneDNN's AVX-512 path run,
# and prints the result as JSON.
_ON_EIGEN_KERNELS = """
import json, sys
import numpy as np
from official_seg.deeplab import heads
x = np.load(sys.argv[1])
print(json.dumps(heads.average_pool(x, (3, 4), (2, 3)).numpy().tolist()))
"""


def _numpy_pool(x, window, strides):
  """VALID average pooling, a window longer than an axis taking all of it."""
  window = [min(w, n) for w, n in zip(window, x.shape[1:3])]
  rows = range(0, x.shape[1] - window[0] + 1, strides[0])
  cols = range(0, x.shape[2] - window[1] + 1, strides[1])
  return np.stack([np.stack([
      x[:, i:i + window[0], j:j + window[1]].mean(axis=(1, 2))
      for j in cols], axis=1) for i in rows], axis=1)


class AveragePoolTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.features = np.random.default_rng(0).normal(
        size=(2, 7, 9, 3)).astype(np.float32)

  def test_equals_tensorflows_where_the_window_fits(self):
    self.assertAllClose(
        heads.average_pool(self.features, (3, 4), (2, 3)),
        tf.nn.avg_pool2d(self.features, (3, 4), (2, 3), 'VALID'), atol=1e-6)

  @parameterized.parameters(((20, 4), (4, 5)), ((25, 25), (4, 5)))
  def test_a_window_longer_than_the_map_takes_the_whole_axis(self, window,
                                                              strides):
    pooled = heads.average_pool(self.features, window, strides)
    self.assertAllClose(pooled, _numpy_pool(self.features, window, strides),
                        atol=1e-6)

  def test_the_map_size_may_be_known_only_when_it_runs(self):
    pool = tf.function(
        lambda x: heads.average_pool(x, (25, 4), (4, 5)),
        input_signature=[tf.TensorSpec([None, None, None, 3])])
    self.assertAllClose(pool(self.features),
                        _numpy_pool(self.features, (25, 4), (4, 5)),
                        atol=1e-6)

  def test_unequal_strides_run_on_tensorflows_own_cpu_kernels(self):
    # A depthwise convolution at strides (2, 3), its first form, ran on
    # hosts with oneDNN's AVX-512 kernels and failed on those without.
    path = os.path.join(self.get_temp_dir(), 'features.npy')
    np.save(path, self.features)
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS='0', TF_CPP_MIN_LOG_LEVEL='2')
    result = subprocess.run(
        [sys.executable, '-c', _ON_EIGEN_KERNELS, path],
        cwd=testing_utils.REPO,
        env=env, capture_output=True, text=True, check=False,
        timeout=testing_utils.BINARY_TIMEOUT_SECS)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    pooled = np.array(json.loads(result.stdout.splitlines()[-1]))
    self.assertAllClose(pooled, _numpy_pool(self.features, (3, 4), (2, 3)),
                        atol=1e-6)

  def test_converts_to_tflite_builtins_and_pools_in_its_interpreter(self):
    # The phone's path of DeepLab's MobileNetV3 models: the pooling at the
    # export's static size, with TFLite's builtin kernels only.
    inputs = tf.keras.Input(self.features.shape[1:], batch_size=1)
    model = tf.keras.Model(inputs, tf.keras.layers.Lambda(
        lambda x: heads.average_pool(x, (3, 4), (2, 3)))(inputs))
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    interpreter = tf.lite.Interpreter(model_content=converter.convert())
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]['index'],
                           self.features[:1])
    interpreter.invoke()
    pooled = interpreter.get_tensor(
        interpreter.get_output_details()[0]['index'])
    self.assertAllClose(pooled, _numpy_pool(self.features[:1], (3, 4), (2, 3)),
                        atol=1e-6)


class DeepLabLRASPPTest(tf.test.TestCase):

  def test_a_map_smaller_than_the_window_is_gated_by_its_mean(self):
    # DeepLab's 769-pixel crop is a 25x25 window at output stride 32; on a
    # 3x4 map the gate is the image pooling branch of the whole map's mean.
    features = np.random.default_rng(1).normal(
        size=(2, 3, 4, 8)).astype(np.float32)
    aspp = heads.DeepLabLRASPP(level=5, num_filters=6)
    outputs = aspp({'5': tf.constant(features)}, training=False)['5']
    branch = aspp.branch.conv.kernel.numpy()[0, 0]
    pooling = aspp.image_pooling.conv
    gate_input = (features.mean(axis=(1, 2)) @ pooling.kernel.numpy()[0, 0]
                  + pooling.bias.numpy())
    # slim's hard sigmoid; batch norm at its initial statistics.
    gate = np.clip(gate_input + 3, 0, 6) * 0.16667
    expected = (np.maximum(features @ branch / np.sqrt(1 + 1e-5), 0)
                * gate[:, None, None, :])
    self.assertAllClose(outputs, expected, atol=1e-5)


if __name__ == '__main__':
  tf.test.main()
