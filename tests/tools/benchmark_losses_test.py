"""tools/benchmark_losses.py: its main() in-process, each loss against cross-entropy."""

import json

from absl import flags
import tensorflow as tf

from tests import testing_utils
from tests import tool_testing

benchmark_losses = tool_testing.load('benchmark_losses')


class BenchmarkLossesTest(tf.test.TestCase):

  def test_times_each_loss_against_cross_entropy_and_reports_ratios(self):
    # --step=loss: the losses alone, no model to build. The whole step's
    # arms are tools/ab_step.py's (benchmarks/ab.py), tested there.
    run = tool_testing.run(
        benchmark_losses, gin_file=['experiments/quickstart.gin'],
        gin_param=testing_utils.tiny_bindings('/nonexistent'), step='loss',
        blocks=2, block_steps=1, warmup_blocks=1)
    self.assertEqual(run.status, 0, run.stderr[-3000:])
    result = json.loads(run.stdout.splitlines()[-1])
    rates = result['steps_per_second']
    self.assertCountEqual(rates, ('cross_entropy',) + benchmark_losses.LOSSES)
    self.assertTrue(all(rate > 0 for rate in rates.values()))
    for name, row in result['losses'].items():
      self.assertAllClose(row['ratio'],
                          rates[name] / rates['cross_entropy'])
      self.assertLen(row['paired_ratios'], 2)
      self.assertIn(f'{name}: ', run.stdout)
    # Each arm runs its own loss: the sort of the Lovász extension, the
    # power of the focal term.
    self.assertIn('TopKV2', result['losses']['lovasz']['new_op_types'])
    self.assertIn('Pow', result['losses']['focal']['new_op_types'])

  def test_a_loss_of_no_file_is_refused(self):
    with self.assertRaisesRegex(flags.IllegalFlagValueError,
                                '--losses must name some of focal, dice'):
      tool_testing.run(benchmark_losses,
                       gin_file=['experiments/quickstart.gin'],
                       losses=['focal', 'hinge'], step='loss')


if __name__ == '__main__':
  tf.test.main()
