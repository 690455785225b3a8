"""build_estimator: the batch split over replicas, precision, platforms."""

import glob
import os
from unittest import mock

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import dataset_info
from official_seg.runtime import components as components_lib
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.runtime import gin_config
from official_seg.runtime import run_config as run_config_lib
from tests import testing_utils

_TWO_CPUS = "tf.distribute.MirroredStrategy.devices = ['/cpu:0', '/cpu:1']"


class BatchSplitTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  @parameterized.parameters((8, 1, 8), (8, 2, 4), (12, 4, 3))
  def test_even_split(self, global_batch, replicas, expected):
    self.assertEqual(estimator_lib.per_replica_batch_size(
        global_batch, replicas, 'TRAIN_BATCH_SIZE'), expected)

  def test_uneven_split_names_both_numbers(self):
    with self.assertRaisesRegex(ValueError,
                                r'TRAIN_BATCH_SIZE=10 .* 4 replicas'):
      estimator_lib.per_replica_batch_size(10, 4, 'TRAIN_BATCH_SIZE')

  def test_estimator_with_a_strategy_checks_the_batch(self):
    data_dir = self.create_tempdir().full_path
    testing_utils.parse_tiny_quickstart(data_dir, extra=[
        'TRAIN_BATCH_SIZE = 3',
        'build_run_config.train_distribute = @tf.distribute.MirroredStrategy()',
        "tf.distribute.MirroredStrategy.devices = ['/cpu:0', '/cpu:1']",
    ])
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    with self.assertRaisesRegex(ValueError, r'=3 .* 2 replicas'):
      estimator_lib.build_estimator(config)


class MakeParserTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_the_training_parser_takes_the_crop_sampling_bound_in_gin(self):
    gin.parse_config(['train/Parser.crop_size = [5, 5]',
                      'CropSampling.foreground_share = 1.0',
                      'CropSampling.foreground_classes = [2]'])
    parser = estimator_lib.make_parser(
        True, dataset_info.DatasetInfo(num_classes=3))
    # One pixel of class 2 in 20x20: a uniform 5x5 crop holds it with
    # probability (5 / 16) ** 2; every crop centred on class 2 does.
    label = np.zeros((20, 20, 1), np.uint8)
    label[17, 3] = 2
    decoded = {'image': tf.zeros((20, 20, 3), tf.uint8),
               'label': tf.constant(label), 'filename': tf.constant('a')}
    for seed in range(8):
      _, crop = parser(decoded, tf.constant([seed, 0], tf.int64))
      self.assertIn(2, crop.numpy())


  def test_parsers_take_the_datasets_channels_and_depth(self):
    gin.parse_config(['eval/Parser.crop_size = [5, 5]', 'Parser.mean_rgb = [0]',
                      'Parser.stddev_rgb = [1]'])
    parser = estimator_lib.make_parser(False, dataset_info.DatasetInfo(
        num_classes=3, image_channels=5, image_bit_depth=16))
    self.assertEqual((parser.image_channels, parser.image_bit_depth),
                     (5, 16))

  def test_unlabeled_stream_of_other_images_stops_in_one_line(self):
    dataset = dataset_info.DatasetInfo(num_classes=3, image_channels=1)
    with self.assertRaisesRegex(
        validation.ConfigurationError,
        r'^Semi-supervised training reads 8-bit RGB images .*'
        r'IMAGE_CHANNELS = 1 and IMAGE_BIT_DEPTH = 8\.'):
      estimator_lib.unlabeled_stream(dataset, 2, split='u', batch_size=2)


class EstimatorPlatformTest(testing_utils.TinyDataTestCase):
  """build_estimator on the bfloat16, TPU and multi-GPU platform files."""

  def setUp(self):
    super().setUp()
    self.model_dir = self.create_tempdir().full_path

  def test_mixed_precision_and_accumulation_build_with_a_strategy(self):
    for platform in ('float16.gin', 'bfloat16.gin'):
      testing_utils.parse_tiny_platform(
          self.data_dir, platform,
          extra=['UpdateOptions.accumulation_steps = 2'])
      config = run_config_lib.build_run_config(self.model_dir).replace(
          train_distribute=tf.distribute.MirroredStrategy(
              ['/cpu:0', '/cpu:1']))
      self.assertIsInstance(estimator_lib.build_estimator(config).estimator,
                            tf.estimator.Estimator)

  def test_the_tpu_platforms_cpu_stand_in_takes_accumulation(self):
    # Without --tpu its model_fn builds the one-device train op.
    testing_utils.parse_tiny_platform(
        self.data_dir, 'tpu.gin',
        extra=['UpdateOptions.accumulation_steps = 2'])
    config = run_config_lib.build_run_config(self.model_dir)
    self.assertIsNone(config.cluster)
    self.assertIsInstance(estimator_lib.build_estimator(config).estimator,
                          tf.compat.v1.estimator.tpu.TPUEstimator)

  def test_accumulation_refuses_parameter_servers(self):
    with_ps = mock.Mock(num_ps_replicas=1)
    estimator_lib.check_accumulation(1, with_ps)
    estimator_lib.check_accumulation(2, tf.estimator.RunConfig())
    with self.assertRaisesRegex(
        ValueError, r'accumulation_steps=2 .*parameter servers'):
      estimator_lib.check_accumulation(2, with_ps)

  def test_float16_on_the_tpu_platform_names_bfloat16(self):
    testing_utils.parse_tiny_platform(
        self.data_dir, 'tpu.gin',
        extra=["ModelFnOptions.precision = 'mixed_float16'"])
    config = run_config_lib.build_run_config(self.model_dir)
    with self.assertRaisesRegex(ValueError, "use 'mixed_bfloat16'"):
      estimator_lib.build_estimator(config)

  def test_tpu_batch_split_names_both_numbers(self):
    testing_utils.parse_tiny_platform(self.data_dir, 'tpu.gin')
    # A run config on a TPU of 8 cores; no TPU is contacted.
    config = mock.Mock(spec=tf.compat.v1.estimator.tpu.RunConfig,
                       cluster='a TPU')
    config.tpu_config.num_shards = 8
    with self.assertRaisesRegex(ValueError,
                                r'train_batch_size=2 .* 8 replicas'):
      estimator_lib.build_estimator(config)

  def test_multi_gpu_splits_the_global_batch_over_replicas(self):
    testing_utils.parse_tiny_platform(self.data_dir, 'multi_gpu.gin',
                                      extra=[_TWO_CPUS])
    config = run_config_lib.build_run_config(self.model_dir)
    self.assertEqual(config.train_distribute.num_replicas_in_sync, 2)
    _, train_fn, eval_fn = estimator_lib.build_estimator(config)[:3]
    self.assertEqual(train_fn({}).element_spec[0]['image'].shape[0], 1)
    self.assertEqual(eval_fn({}).element_spec[0]['image'].shape[0], 2)


class SemiSupervisedEstimatorTest(testing_utils.TinyDataTestCase):

  def test_pseudoseg_trains_and_evaluates_through_estimator(self):
    testing_utils.parse_tiny_semi_supervised(self.data_dir, 'pseudoseg.gin')
    model_dir = self.create_tempdir().full_path
    config = run_config_lib.build_run_config(model_dir)
    estimator, train_fn, eval_fn = estimator_lib.build_estimator(config)[:3]
    self.assertIsInstance(estimator, tf.estimator.Estimator)
    features, _ = next(iter(train_fn({})))
    # UNLABELED_BATCH_SIZE follows TRAIN_BATCH_SIZE (2).
    self.assertEqual(features['unlabeled/strong_image'].shape[0], 2)
    estimator.train(train_fn, max_steps=2)
    result = estimator.evaluate(eval_fn, steps=None)
    self.assertEqual(result['global_step'], 2)
    self.assertEqual(result['num_images'], 5)
    self.assertBetween(result['mean_iou'], 0.0, 1.0)
    names = tf.train.load_checkpoint(model_dir).get_variable_to_shape_map()
    for layer in ('image_classifier/', 'cam_refinement/'):
      self.assertNotEmpty([n for n in names if n.startswith(layer)], layer)
    tags = testing_utils.scalar_tags(model_dir)
    for tag in ('semi/consistency_loss', 'semi/kept_share',
                'semi/pseudo_accuracy', 'semi/strong_balanced_accuracy',
                'loss/classifier', 'loss/refinement',
                'pictures/unlabeled_pseudo_label',
                'semi/class_share_distance', 'semi/labeled_loss_rise',
                'semi/class_share_distance_average'):
      self.assertIn(tag, tags)

  def test_unlabeled_batch_the_replicas_cannot_split_fails_at_build(self):
    testing_utils.parse_tiny_semi_supervised(
        self.data_dir, 'fixmatch.gin', 'multi_gpu.gin',
        extra=[_TWO_CPUS, 'UNLABELED_BATCH_SIZE = 3'])
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    with self.assertRaisesRegex(ValueError, r'unlabeled_stream.batch_size '
                                r'\(3, macro UNLABELED_BATCH_SIZE\).* 2 '):
      estimator_lib.build_estimator(config)


# The seed setting of docs/scarce_labels.md's "Repeatable runs".
SEEDED = ['SEED = 7', 'build_run_config.tf_random_seed = %SEED',
          'build_dataset.seed = %SEED', 'build_run_config.save_summary_steps = 1']


def _losses(model_dir):
  """Estimator's 'loss' summary of every step, in step order."""
  losses = {}
  for path in glob.glob(os.path.join(model_dir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == 'loss':
          losses[event.step] = value.simple_value
  return [losses[step] for step in sorted(losses)]


class SeededRunTest(testing_utils.TinyDataTestCase):
  """The seed setting makes a CPU run repeat its losses exactly."""

  def _run(self, mode, steps=6):
    if mode:
      testing_utils.parse_tiny_semi_supervised(self.data_dir, mode,
                                               extra=SEEDED)
    else:
      testing_utils.parse_tiny_quickstart(self.data_dir, extra=SEEDED)
    model_dir = self.create_tempdir().full_path
    config = run_config_lib.build_run_config(model_dir)
    estimator, train_fn = estimator_lib.build_estimator(config)[:2]
    estimator.train(train_fn, max_steps=steps)
    losses = _losses(model_dir)
    self.assertLen(losses, steps)
    return losses

  def test_supervised_run_repeats(self):
    first, second = self._run(None), self._run(None)
    self.assertEqual(first, second)
    self.assertLen(set(first), len(first))  # It trains: the losses move.

  def test_fixmatch_run_with_cutmix_repeats(self):
    first, second = self._run('fixmatch.gin'), self._run('fixmatch.gin')
    self.assertEqual(first, second)
    self.assertLen(set(first), len(first))


class OutputKindTest(tf.test.TestCase, parameterized.TestCase):
  """The sigmoid output kind with semi-supervised training stops the run."""

  def setUp(self):
    super().setUp()
    gin.clear_config()

  @parameterized.parameters(('experiments/quickstart_fixmatch.gin', True),
                            ('experiments/quickstart.gin', False))
  def test_semi_supervised_needs_softmax(self, experiment_file, refused):
    gin_config.parse([experiment_file, 'heads/sigmoid.gin'],
                     ["DATA_DIR = '/nonexistent'"], finalize=False)
    options = model_fn_lib.ModelFnOptions()
    components = components_lib.Components()
    if not refused:
      estimator_lib.check_output_kind(options, components)
      return
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'cannot train semi-supervised'):
      estimator_lib.check_output_kind(options, components)


if __name__ == '__main__':
  tf.test.main()
