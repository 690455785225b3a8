"""End to end: the train_and_eval binary trains, evaluates and records, or fails clearly."""

import glob
import os
import subprocess

import tensorflow as tf

from tests import testing_utils

_REPO = testing_utils.REPO


def _run_binary(model_dir, bindings, mode='train_and_eval', gin_file=None):
  kwargs = {'gin_file': gin_file} if gin_file else {}
  return testing_utils.run_binary(model_dir, bindings, mode, **kwargs)


class TrainAndEvalTest(testing_utils.TinyDataTestCase):

  def setUp(self):
    super().setUp()
    self.model_dir = os.path.join(self.create_tempdir().full_path, 'model')

  def test_trains_evaluates_and_records(self):
    bindings = testing_utils.tiny_bindings(self.data_dir, train_steps=4)
    proc = _run_binary(self.model_dir, bindings)
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])

    self.assertEqual(tf.train.latest_checkpoint(self.model_dir),
                     os.path.join(self.model_dir, 'model.ckpt-4'))
    records = testing_utils.eval_records(self.model_dir)
    self.assertNotEmpty(records)
    final = max(records, key=lambda r: r['global_step'])
    self.assertEqual(final['global_step'], 4)
    self.assertEqual(final['num_images'], 5)
    self.assertTrue(final['checkpoint'].endswith('model.ckpt-4'))
    self.assertCountEqual(final['per_class_iou'],
                          ['background', 'disk', 'box', 'triangle'])
    for key in ('mean_iou', 'pixel_accuracy', 'loss'):
      self.assertIsInstance(final[key], float)
    steps = [r['global_step'] for r in records]
    self.assertEqual(len(steps), len(set(steps)))
    # In step order, the last line the final step; the untrained step-0
    # checkpoint is not evaluated by train_and_eval.
    self.assertEqual(steps, sorted(steps))
    self.assertEqual(steps[-1], 4)
    self.assertNotIn(0, steps)
    self.assertEqual(
        sorted(os.listdir(os.path.join(self.model_dir, 'eval', 'records'))),
        [f'step-{step:012d}.json' for step in steps])

    configs = glob.glob(os.path.join(self.model_dir, 'operative_config-*.gin'))
    self.assertNotEmpty(configs)
    operative = open(configs[0]).read()
    self.assertIn('build_model.backbone = @backbones.MobileNet', operative)
    self.assertIn(f"'{self.data_dir}'", operative)
    self.assertIn('mean IoU', proc.stdout)
    self.assertIn('triangle', proc.stdout)

    # --mode=eval evaluates the latest checkpoint again and prints its table,
    # but metrics.jsonl keeps one line per step.
    proc = _run_binary(self.model_dir, bindings, mode='eval')
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    self.assertIn('Evaluation at step 4', proc.stdout)
    self.assertLen(testing_utils.eval_records(self.model_dir), len(records))

  def test_trainer_and_evaluator_processes_share_a_model_dir(self):
    bindings = testing_utils.tiny_bindings(self.data_dir, train_steps=4, extra=[
        'build_run_config.keep_checkpoint_max = 10',
        'continuous_eval.min_interval_secs = 1',
        'continuous_eval.timeout_secs = 300'])
    evaluator = subprocess.Popen(
        testing_utils.binary_command(self.model_dir, bindings, 'continuous_eval'), cwd=_REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    trainer = _run_binary(self.model_dir, bindings, mode='train')
    self.assertEqual(trainer.returncode, 0, trainer.stderr[-3000:])
    _, evaluator_err = evaluator.communicate(timeout=600)
    self.assertEqual(evaluator.returncode, 0, evaluator_err[-3000:])

    state = tf.train.get_checkpoint_state(self.model_dir)
    kept = sorted(int(p.rsplit('-', 1)[1])
                  for p in state.all_model_checkpoint_paths)
    self.assertEqual(kept, [0, 2, 4])
    steps = [r['global_step']
             for r in testing_utils.eval_records(self.model_dir)]
    self.assertEqual(sorted(steps), kept)
    self.assertTrue(os.path.exists(
        os.path.join(self.model_dir, 'best', 'best.json')))


if __name__ == '__main__':
  tf.test.main()
