"""Tests for ours: a tiny measured run of official_seg, and its step timer."""

from absl.testing import parameterized
import tensorflow as tf

from benchmarks import ours
from tests import testing_utils


class OursTest(testing_utils.TinyDataTestCase, parameterized.TestCase):

  num_train = 8

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

  def test_too_few_steps_is_an_error(self):
    timer = ours.StepTimer(warmup_steps=3)
    for _ in range(3):
      timer.after_run(None, None)
    with self.assertRaisesRegex(ValueError, 'Only 3 steps ran.*3 warm-up'):
      timer.steps_per_second()


if __name__ == '__main__':
  tf.test.main()
