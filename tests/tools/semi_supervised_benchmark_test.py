"""tools/semi_supervised_benchmark.py: its JSON, and a used folder's exit 2."""

import json
import os

import tensorflow as tf

from official_seg.datasets import synthetic
from tests import testing_utils
from tests import tool_testing

semi_supervised_benchmark = tool_testing.load('semi_supervised_benchmark')

# The model is not the subject: no pictures are summarized.
_CHEAP = ['host_call.image_summary_steps = 0']


class SemiSupervisedBenchmarkTest(testing_utils.TinyDataTestCase):

  def setUp(self):
    super().setUp()
    synthetic.write_dataset(self.data_dir, {'labeled': 3}, num_shards=1,
                            **testing_utils.TINY_SIZES)
    self.work_dir = self.create_tempdir().full_path
    self.flags = dict(
        gin_file=['experiments/quickstart.gin'],
        gin_param=testing_utils.tiny_bindings(self.data_dir, extra=_CHEAP),
        labeled_split='labeled', unlabeled_split='train',
        arms=['labeled_only'], seeds=['0'], train_steps=1,
        work_dir=self.work_dir)

  def test_writes_each_run_and_its_summary(self):
    result = tool_testing.run(semi_supervised_benchmark, **self.flags)
    self.assertEqual(result.status, 0, result.stderr)
    output = os.path.join(self.work_dir, 'semi_supervised.json')
    self.assertIn(f'Wrote {output}', result.stdout)
    with open(output, encoding='utf-8') as stream:
      written = json.load(stream)
    model_dir = os.path.join(self.work_dir, 'labeled_only-seed0')
    last = testing_utils.eval_records(model_dir)[-1]
    [record] = written['records']
    self.assertEqual((record['arm'], record['seed'], record['model_dir']),
                     ('labeled_only', 0, model_dir))
    self.assertEqual(record['mean_iou'], last['mean_iou'])
    self.assertEqual(last['global_step'], 1)
    self.assertEqual(written['train_steps'], 1)
    self.assertEqual(list(written['summary']), ['labeled_only'])
    self.assertEqual(written['summary']['labeled_only']['mean_iou_mean'],
                     last['mean_iou'])

  def test_a_used_work_folder_is_one_line_and_exit_2(self):
    used = os.path.join(self.work_dir, 'labeled_only-seed0')
    os.makedirs(used)
    with open(os.path.join(used, 'checkpoint'), 'w', encoding='utf-8') as f:
      f.write('model_checkpoint_path: "model.ckpt-8000"\n')
    result = tool_testing.run(semi_supervised_benchmark, **self.flags)
    self.assertEqual(result.status, 2)
    self.assertEqual(
        result.stderr.strip().splitlines(),
        ['Invalid configuration:', f'{used} is not empty; give the '
         'benchmark a new work folder.'])
    self.assertEqual(sorted(os.listdir(self.work_dir)), ['labeled_only-seed0'])


if __name__ == '__main__':
  tf.test.main()
