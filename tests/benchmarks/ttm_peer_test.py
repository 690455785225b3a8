"""Tests for ttm_peer: the registered recipe on our data, and its mean IoU."""

import io

from absl.testing import parameterized
import gin
import numpy as np
from official.core import exp_factory
from official.core import task_factory
# Registers the Model Garden segmentation task with task_factory.
from official.vision.tasks import semantic_segmentation  # pylint: disable=unused-import
from PIL import Image
import tensorflow as tf

from benchmarks import time_to_miou
from benchmarks import ttm_peer
from official_seg.data import tfexample
from official_seg.runtime import gin_config
from tests import testing_utils

NUM_CLASSES = 4
IGNORE_LABEL = 255
EVAL_CROP = 41  # tiny_bindings' EVAL_CROP_SIZE.


def _parse(data_dir, gin_files=(), extra=()):
  gin.clear_config()
  # The backbone's batch-norm momentum as quickstart's ASPP and head have it:
  # the peer's model config takes one value for all modules.
  extra = ['backbones.DilatedResNet.norm_momentum = 0.9', *extra]
  gin_config.parse(['experiments/quickstart.gin'] + list(gin_files),
                   testing_utils.tiny_bindings(data_dir, extra=extra),
                   finalize=False)


def _flat(config, prefix=''):
  """{'a.b.c': value} of a nested config dict."""
  out = {}
  for key, value in config.items():
    if isinstance(value, dict):
      out.update(_flat(value, f'{prefix}{key}.'))
    else:
      out[prefix + key] = value
  return out


def _val_examples(data_dir):
  """NumPy reference input: (uint8 image, label) of each val record, by PIL."""
  examples = []
  files = tf.io.gfile.glob(tfexample.shard_pattern(data_dir, 'val'))
  for record in tf.data.TFRecordDataset(files):
    feature = tf.train.Example.FromString(record.numpy()).features.feature
    decode = lambda key: np.array(Image.open(io.BytesIO(
        feature[key].bytes_list.value[0])))
    examples.append((decode(tfexample.IMAGE_ENCODED),
                     decode(tfexample.LABEL_ENCODED)))
  return examples


def _reference_confusion(model, examples, mean, stddev):
  """Each image normalized, padded bottom-right to the eval crop with the
  mean pixel, predicted alone; its label's pixels counted by bincount."""
  confusion = np.zeros([NUM_CLASSES, NUM_CLASSES], np.int64)
  for image, label in examples:
    height, width = label.shape
    normalized = (image.astype(np.float32) - mean) / stddev
    padded = np.zeros([1, EVAL_CROP, EVAL_CROP, 3], np.float32)
    padded[0, :height, :width] = normalized
    logits = model(padded, training=False)['logits']
    logits = tf.image.resize(logits, [EVAL_CROP, EVAL_CROP], 'bilinear')
    logits = logits.numpy()[0, :height, :width].astype(np.float64)
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    predicted = np.argmax(probabilities / probabilities.sum(-1, keepdims=True),
                          -1)
    valid = label != IGNORE_LABEL
    confusion += np.bincount(
        label[valid].astype(np.int64) * NUM_CLASSES + predicted[valid],
        minlength=NUM_CLASSES**2).reshape(NUM_CLASSES, NUM_CLASSES)
  return confusion


def _reference_mean_iou(confusion):
  true_positive = np.diag(confusion).astype(np.float64)
  union = confusion.sum(0) + confusion.sum(1) - true_positive
  return np.mean(true_positive[union > 0] / union[union > 0])


class RecipeConfigTest(parameterized.TestCase, tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.data_dir = self.create_tempdir().full_path

  @parameterized.parameters(
      ((), 'mnv2_deeplabv3_pascal', 'mobilenet', 3),
      (('backbones/dilated_resnet50_os16.gin',), 'seg_deeplabv3_pascal',
       'dilated_resnet', 4))
  def test_only_the_listed_fields_differ_from_the_recipe(
      self, gin_files, name, kind, level):
    _parse(self.data_dir, gin_files)
    config, base = ttm_peer.recipe_config(max_steps=7, eval_every_steps=3)
    self.assertEqual(base, name)
    recipe = exp_factory.get_exp_config(name)
    ours, theirs = _flat(config.as_dict()), _flat(recipe.as_dict())
    self.assertEqual(set(ours), set(theirs))
    differ = {key for key in ours if ours[key] != theirs[key]}
    overridden = lambda key: any(key == field or key.startswith(field + '.')
                                 for field in ttm_peer.RECIPE_OVERRIDES)
    self.assertEqual([key for key in sorted(differ) if not overridden(key)],
                     [])
    # The recipe's own optimization, batch norm, augmentation and loss.
    self.assertEqual(config.trainer.optimizer_config.as_dict(),
                     recipe.trainer.optimizer_config.as_dict())
    norm = config.task.model.norm_activation
    self.assertEqual(
        (norm.norm_momentum, norm.norm_epsilon, norm.activation),
        (recipe.task.model.norm_activation.norm_momentum,
         recipe.task.model.norm_activation.norm_epsilon,
         recipe.task.model.norm_activation.activation))
    for field in ('aug_scale_min', 'aug_scale_max', 'aug_rand_hflip'):
      self.assertEqual(getattr(config.task.train_data, field),
                       getattr(recipe.task.train_data, field), field)
    self.assertEqual(config.task.losses.l2_weight_decay,
                     recipe.task.losses.l2_weight_decay)
    # Ours where listed.
    self.assertEqual(
        (config.task.model.num_classes, config.task.losses.ignore_label,
         config.task.train_data.global_batch_size,
         config.task.train_data.output_size, config.task.init_checkpoint,
         config.trainer.train_steps, config.trainer.steps_per_loop),
        (NUM_CLASSES, IGNORE_LABEL, 2, [33, 33], None, 7, 3))
    self.assertEqual(config.task.model.backbone.type, kind)
    self.assertEqual((config.task.model.decoder.aspp.level,
                      config.task.model.head.level), (level, level))
    self.assertIn(self.data_dir, config.task.train_data.input_path)

  def test_the_experiment_backbone_width_and_stride(self):
    _parse(self.data_dir)
    backbone = ttm_peer.recipe_config(7, 3)[0].task.model.backbone.mobilenet
    self.assertEqual((backbone.filter_size_scale, backbone.output_stride),
                     (0.35, 8))


class PeerMeanIouTest(testing_utils.TinyDataTestCase):

  def test_peer_mean_iou_equals_numpy_reference(self):
    # MobileNetV1's untrained features give one class everywhere even
    # through the random classifier below; MobileNetV2's vary.
    _parse(self.data_dir, extra=testing_utils.MOBILENET_V2)
    config, _ = ttm_peer.recipe_config(7, 3)
    # Seeded: some random initializations still give one class everywhere.
    tf.keras.utils.set_random_seed(0)
    model = task_factory.get_task(config.task).build_model()
    # The untrained model's deepest features are nearly zero, and so its
    # logits: every class ties. A large random classifier spreads them, so
    # the predictions differ across pixels.
    classifier = model.head.trainable_variables[-2]
    self.assertEqual(classifier.name,
                     'segmentation_model/segmentation_head/'
                     'segmentation_output/kernel:0')
    scale = 1.0 / float(tf.reduce_max(tf.abs(model(
        tf.random.stateless_normal([1, 33, 33, 3], [3, 4]),
        training=False)['logits'])))
    classifier.assign(
        scale * tf.random.stateless_normal(classifier.shape, [1, 2]))
    evaluator = time_to_miou.KerasEvaluator(model, NUM_CLASSES, IGNORE_LABEL)
    # 5 images in batches of 2: the last batch is padded.
    confusion = evaluator(ttm_peer.eval_dataset(config))
    image = config.task.train_data.image_feature
    expected = _reference_confusion(model, _val_examples(self.data_dir),
                                    np.array(image.mean, np.float32),
                                    np.array(image.stddev, np.float32))
    self.assertGreater(np.count_nonzero(expected.sum(0)), 1)
    self.assertAllEqual(confusion, expected)
    self.assertAllClose(time_to_miou.mean_iou(confusion),
                        _reference_mean_iou(expected))


if __name__ == '__main__':
  tf.test.main()
