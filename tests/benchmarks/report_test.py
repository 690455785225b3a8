"""Tests for report: medians of repeats, derived figures, table, runner."""

import tensorflow as tf

from benchmarks import report


def _result(trainer, train, **extra):
  result = {'trainer': trainer, 'batch_size': 8, 'crop_size': [257, 257],
            'precision': 'float32', 'train_steps': 20, 'flops_per_step': 4e9,
            'uncounted_flop_ops': 0, 'input_images_per_sec': 80.0,
            'train_images_per_sec': train, 'eval_images_per_sec': 10.0,
            'mean_iou': 0.5, 'peak_rss_mb': 100.0, 'loss_curve': [[0, 1.0]]}
  result.update(extra)
  return result


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

  def test_memory_bound_limit(self):
    result = report.add_derived(
        _result('official_seg', 16.0, bytes_per_step=3e9),
        {'float32': 80.0, 'mixed_bfloat16': 160.0}, bandwidth_gbps=12.0)
    # 3 GB at 12 GB/s is 0.25 s; a step takes 0.5 s (2 steps/s).
    self.assertAllClose(result['memory_bound_step_secs'], 0.25)
    self.assertAllClose(result['fraction_of_memory_bound'], 0.5)
    self.assertIn(' 50.0 ', report.table([result]))
    # The Model Garden's result counts no bytes: no limit, an empty cell.
    peer = report.add_derived(_result('model_garden', 16.0), {'float32': 80.0})
    self.assertNotIn('fraction_of_memory_bound', peer)
    self.assertLen(report.table([result, peer]).splitlines(), 3)

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

  def test_paired_ratio_is_the_median_of_each_repeats_ratio(self):
    peaks = {'float32': 80.0, 'mixed_bfloat16': 160.0}
    ours = report.median_result([_result('official_seg', rate)
                                 for rate in (10.0, 12.0, 15.0)])
    peer = report.median_result([_result('model_garden', rate)
                                 for rate in (8.0, 15.0, 12.0)])
    results = [report.add_derived(r, peaks) for r in (ours, peer)]
    ratio = report.ratios(*results)
    # Medians 12 and 12; repeat by repeat 1.25, 0.8 and 1.25.
    self.assertAllClose(ratio['train_images_per_sec'], 1.0)
    self.assertAllClose(ratio['train_images_per_sec_paired'], 1.25)
    self.assertIn('1.25x', report.table(results, ratio).splitlines()[-1])

  def test_machine_names_cores(self):
    self.assertGreater(report.machine()['cores'], 0)

  def test_failed_runner_shows_its_error(self):
    trainer = 'official_seg'
    with self.assertRaisesRegex(report.RunnerError,
                                rf'(?s){trainer} benchmark failed.*gin_file'):
      report.run_trainer(trainer, ['--model_dir=/nonexistent'],
                         timeout_secs=120)


if __name__ == '__main__':
  tf.test.main()
