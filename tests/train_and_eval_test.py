"""A trainer and an evaluator process share a model dir; every mode: quickstart_e2e_test."""

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
