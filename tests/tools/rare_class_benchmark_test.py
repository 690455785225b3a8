"""tools/rare_class_benchmark.py: the table of recorded runs, and an arm it cannot run."""

import os

import gin
import tensorflow as tf

from benchmarks import rare_class
from benchmarks import rare_class_report
from official_seg.datasets import rare
from tests import tool_testing

rare_class_benchmark = tool_testing.load('rare_class_benchmark')


class RareClassBenchmarkTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.data_dir = self.create_tempdir().full_path
    rare.write_dataset(self.data_dir, {'train': 4, 'val': 2}, num_shards=1,
                       min_size=32, max_size=40)
    self.work_dir = self.create_tempdir().full_path
    self.flags = dict(data_dir=self.data_dir, arms=['cross_entropy', 'dice'],
                      seeds=['0'], train_steps=3, work_dir=self.work_dir)

  def test_with_every_run_recorded_it_prints_their_table(self):
    # The spec the tool makes of these flags: the default gin files,
    # --data_dir's binding.
    spec = rare_class.Spec(
        list(rare_class_benchmark.DEFAULT_GIN_FILES),
        [f'DATA_DIR = {self.data_dir!r}'], ['cross_entropy', 'dice'], [0], 3)
    key = rare_class.experiment_key(spec, rare_class.dataset_facts(spec))
    records = [dict(arm=arm, seed=0, mean_iou=miou, rare_iou=rare_iou,
                    rare_class='crack', experiment=key)
               for arm, miou, rare_iou in (('cross_entropy', 0.8, 0.1),
                                           ('dice', 0.7, 0.3))]
    output = os.path.join(self.work_dir, 'rare_class.jsonl')
    rare_class.write_records(output, records)
    result = tool_testing.run(rare_class_benchmark, **self.flags)
    self.assertEqual(result.status, 0, result.stderr)
    self.assertIn(rare_class_report.report(records), result.stdout)
    self.assertIn('| dice | 1 | 0.700 | -0.100 | 0.300 | +0.200 |',
                  result.stdout)
    self.assertIn(f'Records: {output}', result.stdout)
    self.assertEqual(os.listdir(self.work_dir), ['rare_class.jsonl'])

  def test_an_arm_it_cannot_run_is_one_line_and_exit_2(self):
    result = tool_testing.run(rare_class_benchmark,
                              **dict(self.flags, arms=['dice+lovasz']))
    self.assertEqual(result.status, 2)
    self.assertEqual(result.stderr.strip().splitlines(), [
        'Invalid configuration:', "Arm 'dice+lovasz': it names two losses; "
        'join parts with "+", one loss at most.'])
    self.assertEmpty(os.listdir(self.work_dir))


if __name__ == '__main__':
  tf.test.main()
