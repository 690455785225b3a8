"""Tests for peer: the Model Garden trainer, its mean IoU and a tiny run."""

import math
import os

from official.vision.evaluation import segmentation_metrics
import tensorflow as tf

from benchmarks import peer
from benchmarks import peer_config as peer_config_lib
from tests import testing_utils

NUM_CLASSES = 4


class RunPeerTest(testing_utils.TinyDataTestCase):

  num_train = 8

  def setUp(self):
    super().setUp()
    self.model_dir = self.create_tempdir().full_path

  def test_mean_iou_counts_every_evaluation_batch(self):
    # 5 images, batches of 2: the first is not last.
    testing_utils.parse_tiny_quickstart(self.data_dir)
    config = peer_config_lib.peer_config()
    _, task, trainer = peer.build_trainer(config, self.model_dir)
    logs = trainer.evaluate(tf.constant(-1, tf.int32))
    reference = segmentation_metrics.PerClassIoU(
        num_classes=NUM_CLASSES, rescale_predictions=True)
    for images, labels in task.build_inputs(config.task.validation_data):
      reference.update_state(labels,
                             trainer.model(images, training=False)['logits'])
    self.assertAllClose(logs['mean_iou'],
                        tf.reduce_mean(reference.result()))

  def test_run_measures_the_model_garden_trainer(self):
    result = peer.run(['experiments/quickstart.gin'],
                      testing_utils.tiny_bindings(self.data_dir),
                      self.model_dir, train_steps=3, warmup_steps=1,
                      input_batches=2)
    for key in ('input_images_per_sec', 'train_images_per_sec',
                'eval_images_per_sec', 'flops_per_step', 'peak_rss_mb'):
      self.assertGreater(result[key], 0, key)
    self.assertBetween(result['mean_iou'], 0.0, 1.0)
    # One point after the warm-up loop, one after the timed loop.
    self.assertEqual([step for step, _ in result['loss_curve']], [1, 3])
    self.assertTrue(all(math.isfinite(loss) and loss > 0
                        for _, loss in result['loss_curve']))
    self.assertEqual(
        (result['trainer'], result['batch_size'], result['crop_size'],
         result['precision'], result['train_steps']),
        ('model_garden', 2, [33, 33], 'float32', 3))
    self.assertTrue(os.path.exists(os.path.join(self.model_dir,
                                                'params.yaml')))
    self.assertEqual(tf.keras.mixed_precision.global_policy().name, 'float32')

  def test_warmup_must_leave_timed_steps(self):
    testing_utils.parse_tiny_quickstart(self.data_dir)
    with self.assertRaisesRegex(ValueError, '--warmup_steps=3'):
      peer.run_peer(peer_config_lib.peer_config(), 3, 3, 2, None,
                    self.model_dir)


if __name__ == '__main__':
  tf.test.main()
