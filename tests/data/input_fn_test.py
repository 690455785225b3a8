"""Tests for the input_fn: shards, static shapes, exact eval batches, errors."""

import collections
import os
import re

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf
# AutoGraph's entry point, whose calls the pipeline must not make.
from tensorflow.python.autograph.impl import api as autograph_api

from official_seg import validation
from official_seg.data import corrupt_records
from official_seg.data import dataset_info
from official_seg.data import encode
from official_seg.data import image_classes
from official_seg.data import input_fn as input_lib
from official_seg.data import preprocess
from official_seg.data import split_metadata
from official_seg.data import tfexample
from official_seg.datasets import synthetic
from official_seg.runtime import estimator
from official_seg.runtime import gin_config
from official_seg.semi_supervised import views
from tests import testing_utils


def _signatures(dataset):
  """Sorted (height, width, label sum) of the valid examples of a dataset."""
  out = []
  for features, labels in dataset:
    for valid, height, width, label in zip(
        features['valid'].numpy(), features['height'].numpy(),
        features['width'].numpy(), labels.numpy()):
      if valid:
        out.append((int(height), int(width), int(label[label != 255].sum())))
  return sorted(out)


def _corrupt_shards(data_dir, good_record):
  """Adds a shard with two undecodable examples and one truncated shard.

  Returns:
    The good examples the two shards still hold: 1 + 2.
  """
  bad = tfexample.make_example(
      b'not an image', b'not a png', 'bad.jpg', 'jpeg', 3, 3).SerializeToString()
  with tf.io.TFRecordWriter(
      os.path.join(data_dir, 'val-00002-of-00004.tfrecord')) as writer:
    for record in (bad, good_record, bad):
      writer.write(record)
  path = os.path.join(data_dir, 'val-00003-of-00004.tfrecord')
  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(3):
      writer.write(good_record)
  with open(path, 'rb') as f:
    data = f.read()
  with open(path, 'wb') as f:  # Cut inside the third record.
    f.write(data[:len(data) - 10])
  return 3


class InputFnTest(testing_utils.TinyDataTestCase):

  def setUp(self):
    super().setUp()
    testing_utils.parse_tiny_quickstart(self.data_dir)

  def test_train_batches_have_static_shapes(self):
    dataset = testing_utils.make_input_fn(True)({'batch_size': 3})
    features, labels = next(iter(dataset))
    self.assertEqual(features['image'].shape, (3, 33, 33, 3))
    self.assertEqual(labels.shape, (3, 33, 33, 1))
    self.assertEqual(dataset.element_spec[1].shape, (3, 33, 33, 1))

  def test_eval_reads_each_image_once_and_pads_the_last_batch(self):
    dataset = testing_utils.make_input_fn(False)({'batch_size': 2})
    self.assertEqual(dataset.element_spec[0]['image'].shape, (2, 41, 41, 3))
    batches = list(dataset)
    self.assertLen(batches, 3)
    valid = np.concatenate([f['valid'].numpy() for f, _ in batches])
    self.assertAllEqual(valid, [1, 1, 1, 1, 1, 0])
    padding_labels = batches[-1][1][1].numpy()
    self.assertTrue((padding_labels == 255).all())
    heights = np.concatenate([f['height'].numpy() for f, _ in batches])
    self.assertTrue(((heights[:5] >= 24) & (heights[:5] <= 40)).all())

  def _build(self, is_training, batch_size=2, data_dir=None, **kwargs):
    dataset = dataset_info.DatasetInfo()
    parser = estimator.make_parser(is_training, dataset)
    split = dataset.train_split if is_training else dataset.eval_split
    with gin.config_scope('train' if is_training else 'eval'):
      return input_lib.build_dataset(batch_size, parser,
                                     data_dir or dataset.data_dir, split,
                                     **kwargs)

  def test_same_seed_same_training_batches(self):
    def first_batches(seed):
      dataset = self._build(True, seed=seed).take(3)
      return [np.concatenate([f['image'].numpy().ravel(), l.numpy().ravel()])
              for f, l in dataset]

    first = first_batches(5)
    self.assertAllEqual(first, first_batches(5))
    self.assertNotAllEqual(first, first_batches(6))

  def test_input_pipelines_read_disjoint_shards_covering_the_split(self):
    data_dir = self.create_tempdir().full_path
    testing_utils.write_tiny_dataset(data_dir, num_train=2, num_val=7,
                                     num_shards=4)
    files = input_lib.list_shards(data_dir, 'val')
    everything = _signatures(self._build(False, data_dir=data_dir))
    for num_pipelines in (2, 3, 6):
      parts = []
      for index in range(num_pipelines):
        context = tf.distribute.InputContext(num_pipelines, index, 2)
        own, record_shard = input_lib.pipeline_shards(files, context)
        if num_pipelines <= 4:
          self.assertEqual((own, record_shard), (files[index::num_pipelines],
                                                 None))
        else:  # Fewer shards than pipelines: every-n-th record instead.
          self.assertEqual(record_shard, (num_pipelines, index))
        parts.append(_signatures(self._build(
            False, input_context=context, data_dir=data_dir)))
        self.assertNotEmpty(parts[-1])
      self.assertEqual(sorted(sum(parts, [])), everything)

  def test_cache_decoded_gives_the_same_examples(self):
    everything = _signatures(self._build(False))
    self.assertEqual(_signatures(self._build(False, cache_decoded=True)),
                     everything)
    features, _ = next(iter(self._build(True, cache_decoded=True, seed=1)))
    self.assertEqual(features['image'].shape, (2, 33, 33, 3))

  def test_corrupt_examples_stop_by_default_and_are_skipped_on_request(self):
    good = next(iter(tf.data.TFRecordDataset(
        input_lib.list_shards(self.data_dir, 'val')[0]))).numpy()
    expected = 5 + _corrupt_shards(self.data_dir, good)
    with self.assertRaises(tf.errors.InvalidArgumentError):
      list(self._build(False))
    self.assertLen(_signatures(self._build(False, skip_corrupt=True)), expected)

  def test_skipped_examples_are_counted_in_the_report(self):
    good = next(iter(tf.data.TFRecordDataset(
        input_lib.list_shards(self.data_dir, 'val')[0]))).numpy()
    _corrupt_shards(self.data_dir, good)
    report = os.path.join(self.create_tempdir().full_path, 'report.txt')
    shard = os.path.join(self.data_dir, 'val-00002-of-00004.tfrecord')
    decoded = corrupt_records.skip_corrupt_examples(
        tf.data.TFRecordDataset(shard), tfexample.Decoder().decode,
        'the corrupt shard', output_stream=f'file://{report}')
    self.assertLen(list(decoded), 1)
    with open(report) as f:
      lines = f.read().splitlines()
    self.assertEqual(lines, [
        'Skipped 1 corrupt example(s) so far reading the corrupt shard',
        'Skipped 2 corrupt example(s) in total reading the corrupt shard'])

  def test_ade20k_gin_resizes_large_images_to_fit_its_eval_crop(self):
    data_dir = self.create_tempdir().full_path
    # No ignore band: 255 is no ADE20K class (its ignore label is 0).
    synthetic.write_dataset(data_dir, {'val': 2}, num_shards=1,
                            image_format='png', min_size=560, max_size=700,
                            band=0)
    gin.clear_config()
    gin_config.parse(['experiments/quickstart.gin', 'datasets/ade20k.gin'],
                     [f"DATA_DIR = '{data_dir}'", 'EVAL_BATCH_SIZE = 2'],
                     finalize=False)
    features, labels = next(iter(
        testing_utils.make_input_fn(False)({'batch_size': 2})))
    self.assertEqual(labels.shape, (2, 513, 513, 1))
    sides = np.concatenate([features['height'], features['width']])
    self.assertEqual(sides.max(), 513)
    self.assertAllEqual((sides - 1) % 16, np.zeros_like(sides))

  def test_missing_shards_name_the_pattern(self):
    empty = self.create_tempdir().full_path
    with self.assertRaisesRegex(validation.MissingFileError,
                                f'{empty}/train-.....-of-.....\\.tfrecord'):
      self._build(True, data_dir=empty)


  def _two_streams(self, split='val', unlabeled_batch_size=4, probability=0.5):
    dataset = dataset_info.DatasetInfo()
    parser = views.UnlabeledParser(dataset.ignore_label, crop_size=(17, 17),
                                   cutout_fraction=6 / 17)
    stream = views.UnlabeledStream(split, unlabeled_batch_size, parser,
                                   probability, labeled_batch_size=4)
    return input_lib.make_input_fn(
        dataset, True, estimator.make_parser(True, dataset), unlabeled=stream)

  def test_unlabeled_stream_is_zipped_in_split_like_the_labeled_one(self):
    input_fn = self._two_streams(unlabeled_batch_size=6)
    for per_call, unlabeled_per_call in ((4, 6), (2, 3)):
      batches = input_fn({'batch_size': per_call})
      for key, spec in batches.element_spec[0].items():
        self.assertTrue(spec.shape.is_fully_defined(), key)
      features, labels = next(iter(batches))
      self.assertEqual(labels.shape, (per_call, 33, 33, 1))
      self.assertEqual(features['image'].shape, (per_call, 33, 33, 3))
      self.assertEqual(features['monitor/unlabeled_label'].shape,
                       (unlabeled_per_call, 17, 17, 1))
      self.assertCountEqual(
          [key for key in features if key.startswith('unlabeled/')],
          ['unlabeled/' + key for key in (
              'image', 'strong_image', 'weak_valid', 'strong_valid',
              'mix_index', 'mix_mask', 'height', 'width', 'valid')])
      self.assertCountEqual(
          [key for key in features if key.startswith('monitor/')],
          ['monitor/unlabeled_label', 'monitor/unlabeled_strong_label'])
      self.assertEqual(features['unlabeled/mix_index'].shape,
                       (unlabeled_per_call,))
      self.assertEqual(features['unlabeled/strong_image'].shape,
                       (unlabeled_per_call, 17, 17, 3))

  def test_autograph_converts_nothing_of_either_stream(self):
    # Its conversions cost seconds of CPU at every run's start.
    with testing_utils.recorded_calls(autograph_api, 'converted_call') as calls:
      self._two_streams(unlabeled_batch_size=2)({'batch_size': 2})
      testing_utils.make_input_fn(False)({'batch_size': 2})
    self.assertEmpty([getattr(args[0], '__name__', args[0])
                      for args, _, _ in calls[:5]])

  def test_unlabeled_batch_the_replicas_cannot_split_says_so(self):
    with self.assertRaisesRegex(
        ValueError, r'unlabeled_stream.batch_size \(3, macro UNLABELED_BATCH_SIZE\).* 2 replicas'):
      self._two_streams(unlabeled_batch_size=3)({'batch_size': 2})

  def test_unlabeled_split_without_shards_names_pattern_and_macro(self):
    with self.assertRaisesRegex(
        validation.MissingFileError, "UNLABELED_SPLIT = 'nothing'.*"
        f"{self.data_dir}/nothing-.....-of-.....\\.tfrecord"):
      self._two_streams(split='nothing')({'batch_size': 4})


  def test_unlabeled_scope_binds_the_parser_and_its_jitter(self):
    gin.parse_config(['unlabeled/UnlabeledParser.crop_size = (9, 9)',
                      'unlabeled/UnlabeledParser.cutout_fraction = 0'])
    with gin.config_scope('unlabeled'):
      parser = views.UnlabeledParser(255)
    stream = views.UnlabeledStream('val', 2, parser, 0.0, 2)
    dataset = dataset_info.DatasetInfo()
    input_fn = input_lib.make_input_fn(
        dataset, True, estimator.make_parser(True, dataset), unlabeled=stream)
    features, _ = next(iter(input_fn({'batch_size': 2})))
    self.assertEqual(features['unlabeled/image'].shape, (2, 9, 9, 3))
    self.assertGreater(np.abs(features['unlabeled/strong_image'] -
                              features['unlabeled/image']).max(), 0.1)
    gin.parse_config(['unlabeled/color_jitter.brightness = 0',
                      'unlabeled/color_jitter.contrast = None',
                      'unlabeled/color_jitter.saturation = None',
                      'unlabeled/color_jitter.hue = 0'])
    features, _ = next(iter(input_fn({'batch_size': 2})))
    self.assertAllClose(features['unlabeled/strong_image'],
                        features['unlabeled/image'], atol=1e-4)

class RepeatFactorThresholdTest(tf.test.TestCase, parameterized.TestCase):
  """build_dataset repeats training images by the split's repeat factors."""

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.data_dir = self.create_tempdir().full_path
    # Four images of heights 10-13, each of classes 0 and 1; the first
    # holds class 2 too. One shard: an epoch ends before the next starts.
    tally, examples = split_metadata.Tally(), []
    for index in range(4):
      label = np.ones((10 + index, 12), np.uint8)
      label[0, :3] = 0
      label[5, 5] = 2 if index == 0 else 1
      tally.add(*label.shape, np.bincount(label.ravel(), minlength=256),
                f'{index}.png')
      examples.append(tfexample.make_example(
          tf.io.encode_png(np.zeros(label.shape + (3,), np.uint8)).numpy(),
          tf.io.encode_png(label[..., None]).numpy(), f'{index}.png', 'png',
          *label.shape))
    tfexample.write_shards(examples, self.data_dir, 'train', 1)
    split_metadata.write_tally(self.data_dir, 'train', tally)
    self.parser = preprocess.Parser(True, 255, 3, crop_size=(16, 16),
                                    random_flip=False)

  @parameterized.named_parameters(
      ('records', {}), ('cached', {'cache_decoded': True}))
  def test_images_repeat_by_their_factor_in_a_one_shot_iterator(self, kwargs):
    # Class 2 is in 1 of 4 images: at threshold 1 that image repeats
    # sqrt(1 / 0.25) = 2 times an epoch; class 0 and 1 are in all.
    with tf.Graph().as_default():
      dataset = input_lib.build_dataset(
          1, self.parser, self.data_dir, 'train', shuffle_buffer_size=1,
          seed=0, repeat_factor_threshold=1.0, **kwargs)
      heights = tf.compat.v1.data.make_one_shot_iterator(
          dataset).get_next()[0]['height']
      with tf.compat.v1.Session() as session:
        got = [int(session.run(heights)[0]) for _ in range(15)]
    self.assertEqual(collections.Counter(got), {10: 6, 11: 3, 12: 3, 13: 3})

  def test_a_missing_image_classes_file_is_named_with_its_command(self):
    path = image_classes.path(self.data_dir, 'train')
    os.remove(path)
    with self.assertRaisesRegex(
        validation.MissingFileError,
        '^build_dataset.repeat_factor_threshold = 0.1 needs '
        f'{re.escape(path)} .*dataset_stats .*--write_image_classes'):
      input_lib.build_dataset(1, self.parser, self.data_dir, 'train',
                              repeat_factor_threshold=0.1)
    # Evaluation reads each image once whatever the setting.
    eval_parser = preprocess.Parser(False, 255, 3, crop_size=(16, 16))
    input_lib.build_dataset(1, eval_parser, self.data_dir, 'train',
                            repeat_factor_threshold=0.1)



class ChannelsAndDepthTest(tf.test.TestCase):
  """A split of 16-bit, 5-channel images read with the parser's format."""

  def test_eval_batches_hold_the_images_normalized_values(self):
    gin.clear_config()
    data_dir = self.create_tempdir().full_path
    rng = np.random.default_rng(5)
    images = [rng.integers(0, 65536, (4, 3, 5)).astype(np.uint16)
              for _ in range(2)]
    examples = []
    for index, pixels in enumerate(images):
      stored = encode.stored_pixels(pixels, 'x')
      examples.append(tfexample.make_example(
          stored.data, tf.io.encode_png(np.zeros((4, 3, 1), np.uint8)).numpy(),
          f'{index}', stored.image_format, 4, 3, 5))
    tfexample.write_shards(examples, data_dir, 'val', 1)
    parser = preprocess.Parser(False, 255, 3, crop_size=(4, 3),
                               mean_rgb=[0.0], stddev_rgb=[255.0],
                               image_channels=5, image_bit_depth=16)
    features, _ = next(iter(input_lib.build_dataset(2, parser, data_dir,
                                                    'val')))
    self.assertAllClose(features['image'], np.stack(images) / 65535,
                        atol=1e-6)


if __name__ == '__main__':
  tf.test.main()
