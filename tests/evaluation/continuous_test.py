"""Tests for the continuous evaluator's bookkeeping, with a stand-in evaluation."""

import os
import threading
import time

import gin
import tensorflow as tf

from official_seg.evaluation import continuous
from official_seg.evaluation import results


def _write_checkpoint(model_dir, step):
  """Stands in for a trainer's save: files plus the checkpoint state file."""
  prefix = os.path.join(model_dir, f'model.ckpt-{step}')
  for suffix in ('.index', '.data-00000-of-00001'):
    with open(prefix + suffix, 'w') as f:
      f.write('x')
  state = tf.train.get_checkpoint_state(model_dir)
  paths = list(state.all_model_checkpoint_paths) if state else []
  tf.compat.v1.train.update_checkpoint_state(model_dir, prefix, paths + [prefix])
  return prefix


def _delete_checkpoint(prefix):
  for path in tf.io.gfile.glob(prefix + '.*'):
    os.remove(path)


class ContinuousEvalTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.model_dir = self.create_tempdir().full_path
    self.eval_dir = os.path.join(self.model_dir, 'eval')
    self.calls = []

  def _evaluate(self, path):
    self.calls.append(continuous.checkpoint_step(path))
    record = {'global_step': continuous.checkpoint_step(path),
              'checkpoint': path}
    results.write_record(self.eval_dir, record)
    return record

  def _run(self, final_step, evaluate_fn=None, timeout_secs=1):
    return continuous.continuous_eval(
        evaluate_fn or self._evaluate, self.model_dir, self.eval_dir,
        final_step=final_step, min_interval_secs=0, timeout_secs=timeout_secs)

  def _steps_recorded(self):
    return [r['global_step'] for r in results.read_records(self.eval_dir)]

  def test_each_kept_checkpoint_once_in_order_then_exit(self):
    for step in (0, 20, 10, 30):
      _write_checkpoint(self.model_dir, step)
    self.assertEqual(self._run(final_step=30), {0, 10, 20, 30})
    self.assertEqual(self.calls, [0, 10, 20, 30])

  def test_checkpoints_past_the_final_step_are_evaluated_too(self):
    # Asynchronous trainers can save their last checkpoint past TRAIN_STEPS.
    for step in (10, 30, 31):
      _write_checkpoint(self.model_dir, step)
    self.assertEqual(self._run(final_step=30), {10, 30, 31})

  def test_restart_adds_no_duplicate(self):
    for step in (10, 20):
      _write_checkpoint(self.model_dir, step)
    self._run(final_step=30)
    _write_checkpoint(self.model_dir, 30)
    self.assertEqual(self._run(final_step=30), {30})
    self.assertEqual(self._run(final_step=30), set())
    self.assertEqual(self._steps_recorded(), [10, 20, 30])

  def test_checkpoint_deleted_before_evaluation_is_skipped(self):
    first = _write_checkpoint(self.model_dir, 10)
    _write_checkpoint(self.model_dir, 20)
    _delete_checkpoint(first)
    with self.assertLogs(level='WARNING') as logs:
      self.assertEqual(self._run(final_step=20), {20})
    self.assertIn('model.ckpt-10', '\n'.join(logs.output))
    self.assertEqual(self._steps_recorded(), [20])

  def test_checkpoint_deleted_while_loading_is_skipped(self):
    doomed = _write_checkpoint(self.model_dir, 10)
    _write_checkpoint(self.model_dir, 20)

    def evaluate(path):
      if path == doomed:
        _delete_checkpoint(path)
        raise ValueError(f'The passed save_path is not a valid checkpoint: {path}')
      return self._evaluate(path)

    self.assertEqual(self._run(final_step=20, evaluate_fn=evaluate), {20})
    self.assertEqual(self._steps_recorded(), [20])

  def test_error_on_an_existing_checkpoint_propagates(self):
    _write_checkpoint(self.model_dir, 10)

    def evaluate(path):
      raise ValueError(f'broken graph for {path}')

    with self.assertRaisesRegex(ValueError, 'broken graph'):
      self._run(final_step=10, evaluate_fn=evaluate)

  def test_waits_for_the_first_checkpoint(self):
    self.assertEqual(self._run(final_step=10, timeout_secs=1), set())
    writer = threading.Timer(1.0, _write_checkpoint, (self.model_dir, 10))
    writer.start()
    start = time.time()
    self.assertEqual(self._run(final_step=10, timeout_secs=30), {10})
    self.assertLess(time.time() - start, 30)
    writer.join()

  def test_kept_checkpoints_of_a_scheme_model_dir(self):
    # The state file of a gs:// model dir holds names relative to it, which
    # TensorFlow joins back into gs:// paths; os.path.isabs calls those
    # relative. TensorFlow's in-memory file system has the same path form.
    model_dir = 'ram://continuous_test/model'
    tf.io.gfile.makedirs(model_dir)
    paths = [f'{model_dir}/model.ckpt-{step}' for step in (4, 0, 2)]
    tf.compat.v1.train.update_checkpoint_state(
        model_dir, paths[-1], all_model_checkpoint_paths=paths)
    self.assertEqual(continuous.kept_checkpoints(model_dir),
                     [f'{model_dir}/model.ckpt-{step}' for step in (0, 2, 4)])

  def test_step_parsing(self):
    self.assertEqual(continuous.checkpoint_step('/a/model.ckpt-1234'), 1234)
    with self.assertRaisesRegex(ValueError, 'no -<step>'):
      continuous.checkpoint_step('/a/model.ckpt')


if __name__ == '__main__':
  tf.test.main()
