"""Tests for the benchmark: FLOP counts, reports, and a tiny run of ours."""

import io

from absl.testing import parameterized
import gin
import tensorflow as tf

from benchmarks import measure
from benchmarks import ours
from benchmarks import profile
from benchmarks import report
from tests import testing_utils


def _conv_graph():
  """A graph with a 3x3 convolution, its gradients and an unused matmul."""
  graph = tf.Graph()
  with graph.as_default():
    images = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3])
    kernel = tf.compat.v1.placeholder(tf.float32, [3, 3, 3, 4])
    depthwise = tf.compat.v1.placeholder(tf.float32, [3, 3, 4, 1])
    conv = tf.nn.conv2d(images, kernel, 1, 'SAME')
    out = tf.nn.depthwise_conv2d(conv, depthwise, [1, 1, 1, 1], 'SAME')
    grads = tf.gradients(tf.reduce_sum(out), [kernel, depthwise])
    unused = tf.linalg.matmul(tf.ones([10, 10]), tf.ones([10, 10]))
  return graph, grads, unused


# 2 * outputs * kernel area * input channels, per convolution.
CONV = 2 * (2 * 8 * 8 * 4) * 9 * 3
DEPTHWISE = 2 * (2 * 8 * 8 * 4) * 9


def _result(trainer, train, **extra):
  result = {'trainer': trainer, 'batch_size': 8, 'crop_size': [257, 257],
            'precision': 'float32', 'train_steps': 20, 'flops_per_step': 4e9,
            'uncounted_flop_ops': 0, 'input_images_per_sec': 80.0,
            'train_images_per_sec': train, 'eval_images_per_sec': 10.0,
            'mean_iou': 0.5, 'peak_rss_mb': 100.0, 'loss_curve': [[0, 1.0]]}
  result.update(extra)
  return result


class MeasureTest(tf.test.TestCase):

  def test_counts_the_ops_the_targets_run(self):
    graph, grads, unused = _conv_graph()
    # The forward conv, its filter gradient, and the depthwise's input and
    # filter gradients; the forward depthwise output is never needed (the
    # gradient of a sum is ones), nor the conv's input gradient.
    expected = 2 * CONV + 2 * DEPTHWISE
    self.assertEqual(measure.graph_flops_and_unknown(graph, grads),
                     (expected, 0))
    everything, _ = measure.graph_flops_and_unknown(graph)
    self.assertGreaterEqual(everything - expected, 2 * 10 * 10 * 10)

  def test_counts_inside_called_functions(self):

    @tf.function
    def inner(x):
      return tf.linalg.matmul(x, x)

    @tf.function
    def outer(x):
      return inner(x) + 1.0

    graph = outer.get_concrete_function(tf.TensorSpec([4, 4])).graph
    self.assertEqual(measure.graph_flops_and_unknown(graph),
                     (2 * 4 * 4 * 4 + 16, 0))

  def test_unknown_shapes_are_reported(self):
    graph = tf.Graph()
    with graph.as_default():
      x = tf.compat.v1.placeholder(tf.float32, [None, 4])
      product = tf.linalg.matmul(x, tf.ones([4, 4]))
    self.assertEqual(measure.graph_flops_and_unknown(graph, [product]), (0, 1))

  def test_matmul_peak_is_a_rate(self):
    self.assertGreater(measure.matmul_peak_gflops(size=64, iterations=2,
                                                  repeats=1), 0)

  def test_emit_and_parse_round_trip(self):
    stream = io.StringIO()
    measure.emit({'a': 1.5}, stream)
    self.assertEqual(measure.parse_result('log\n' + stream.getvalue()),
                     {'a': 1.5})
    with self.assertRaisesRegex(ValueError, 'no BENCHMARK_RESULT'):
      measure.parse_result('Traceback ...')


class ReportTest(tf.test.TestCase):

  def test_median_of_repeats(self):
    merged = report.median_result([
        _result('official_seg', 10.0, peak_rss_mb=300.0),
        _result('official_seg', 30.0),
        _result('official_seg', 12.0, mean_iou=0.7)])
    self.assertEqual(merged['train_images_per_sec'], 12.0)
    self.assertEqual(merged['mean_iou'], 0.5)
    self.assertEqual(merged['peak_rss_mb'], 300.0)
    self.assertEqual(merged['repeats'], [10.0, 30.0, 12.0])

  def test_derived_figures(self):
    result = report.add_derived(_result('official_seg', 16.0),
                                {'float32': 80.0, 'mixed_bfloat16': 160.0})
    # 2 steps/s * 4 GFLOP = 8 GFLOP/s, a tenth of 80.
    self.assertAllClose(result['train_gflops'], 8.0)
    self.assertAllClose(result['fraction_of_peak'], 0.1)
    self.assertAllClose(result['input_over_train'], 5.0)

  def test_ratios_and_table(self):
    peaks = {'float32': 80.0, 'mixed_bfloat16': 160.0}
    results = [report.add_derived(_result('official_seg', 16.0), peaks),
               report.add_derived(_result('model_garden', 10.0,
                                          mean_iou=0.45), peaks)]
    ratio = report.ratios(*results)
    self.assertAllClose(ratio['train_images_per_sec'], 1.6)
    self.assertAllClose(ratio['mean_iou_difference'], 0.05)
    text = report.table(results, ratio)
    self.assertIn('1.60x', text)
    self.assertIn('+0.050', text)
    self.assertLen(text.splitlines(), 4)
    results[0].update(checkpoint_secs=0.5, checkpoint_cost=0.001)
    self.assertIn('a checkpoint takes 0.50 s, 0.10% of training',
                  report.table(results, ratio))

  def test_machine_names_cores(self):
    self.assertGreater(report.machine()['cores'], 0)

  def test_failed_runner_shows_its_error(self):
    trainer = 'official_seg'
    with self.assertRaisesRegex(report.RunnerError,
                                rf'(?s){trainer} benchmark failed.*gin_file'):
      report.run_trainer(trainer, ['--model_dir=/nonexistent'],
                         timeout_secs=120)


def _metadata(nodes):
  """A RunMetadata whose CPU ran `nodes`: (label, microseconds) pairs."""
  metadata = tf.compat.v1.RunMetadata()
  device = metadata.step_stats.dev_stats.add(device='/cpu:0')
  for label, micros in nodes:
    device.node_stats.add(node_name=label.split(' ')[0], timeline_label=label,
                          all_end_rel_micros=micros)
  return metadata


class ProfileTest(tf.test.TestCase):

  def test_op_seconds_sums_types_and_averages_steps(self):
    first = _metadata([('a/conv = Conv2D(x, k)', 3000),
                       ('b/conv = Conv2D(y, k)', 1000),
                       ('relu = Relu(a/conv)', 500), ('_SOURCE', 10)])
    second = _metadata([('a/conv = Conv2D(x, k)', 2000)])
    seconds = profile.op_seconds([first, second])
    self.assertAllClose(dict(seconds), {'Conv2D': 0.003, 'Relu': 0.00025,
                                        '_SOURCE': 0.000005})
    text = profile.table(seconds, top=1)
    self.assertIn('Conv2D', text)
    self.assertNotIn('Relu', text)
    self.assertIn('92.2%', text)  # 3.0 of 3.255 ms.


class OursTest(parameterized.TestCase, tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.data_dir = self.create_tempdir().full_path
    testing_utils.write_tiny_dataset(self.data_dir)

  def test_tiny_run(self):
    params = testing_utils.tiny_bindings(self.data_dir)
    model_dir = self.create_tempdir().full_path
    result = ours.run(['experiments/quickstart.gin'], params, model_dir,
                      train_steps=4, warmup_steps=1, input_batches=2,
                      eval_batches=2)
    for key in ('input_images_per_sec', 'train_images_per_sec',
                'eval_images_per_sec', 'peak_rss_mb'):
      self.assertGreater(result[key], 0, key)
    self.assertBetween(result['mean_iou'], 0.0, 1.0)
    self.assertGreater(result['flops_per_step'], 0)
    self.assertEqual(result['uncounted_flop_ops'], 0)
    # tiny_bindings write a summary every step.
    self.assertEqual([step for step, _ in result['loss_curve']], [0, 1, 2, 3])
    self.assertEqual((result['batch_size'], result['crop_size']), (2, [33, 33]))
    self.assertTrue(tf.io.gfile.glob(model_dir + '/model.ckpt-4.index'))
    # One save every 2 steps (tiny_bindings), timed by the listener.
    self.assertGreater(result['checkpoint_secs'], 0)
    self.assertBetween(result['checkpoint_cost'], 0.0, 1.0)

  def test_profile_of_a_tiny_step(self):
    testing_utils.parse_tiny_quickstart(self.data_dir)
    seconds = profile.profile(2, self.create_tempdir().full_path,
                              warmup_steps=1, traced_steps=1)
    self.assertGreater(seconds['_MklNativeConv2D'] + seconds['Conv2D'], 0)
    self.assertIn('ResourceApplyMomentum', seconds)

  def test_too_few_steps_is_an_error(self):
    timer = ours.StepTimer(warmup_steps=3)
    for _ in range(3):
      timer.after_run(None, None)
    with self.assertRaisesRegex(ValueError, 'Only 3 steps ran.*3 warm-up'):
      timer.steps_per_second()


if __name__ == '__main__':
  tf.test.main()
