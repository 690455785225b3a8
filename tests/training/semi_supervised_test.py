"""Tests of the semi-supervised step: gradients, updates, losses, monitors."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg.data import dataset_info
from official_seg.modeling import model as model_lib
from official_seg.training import pseudo_labels
from official_seg.training import semi_supervised

_CROP = 33
_MODEL = ['build_model.backbone = @backbones.MobileNet',
          'backbones.MobileNet.filter_size_scale = 0.35',
          'backbones.MobileNet.output_stride = 8',
          'decoders.ASPP.num_filters = 8',
          'decoders.ASPP.dilation_rates = [2, 4]']


def _features(labeled=2, unlabeled=2, seed=0):
  """Random labeled and unlabeled batches in the input_fn's layout."""
  rng = np.random.RandomState(seed)
  size = [_CROP, _CROP]

  def image(count):
    return tf.constant(rng.normal(size=[count] + size + [3]), tf.float32)

  def label(count):
    values = rng.randint(0, 4, size=[count] + size + [1])
    values[:, :3] = 255
    return tf.constant(values, tf.int32)

  valid = np.ones([unlabeled] + size + [1], np.float32)
  valid[:, -4:] = 0
  strong_valid = valid.copy()
  strong_valid[:, 5:10, 5:10] = 0
  features = {
      'image': image(labeled),
      'unlabeled/image': image(unlabeled),
      'unlabeled/strong_image': image(unlabeled),
      'unlabeled/weak_valid': tf.constant(valid),
      'unlabeled/strong_valid': tf.constant(strong_valid),
      'unlabeled/label': label(unlabeled),
      'unlabeled/strong_label': label(unlabeled),
      'unlabeled/mix_index': tf.range(unlabeled),
      'unlabeled/mix_mask': tf.zeros([unlabeled] + size + [1]),
  }
  return features, label(labeled)


class SemiSupervisedStepTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    gin.parse_config(_MODEL)
    self.dataset = dataset_info.DatasetInfo(num_classes=4)

  def _step(self, options):
    features, labels = _features()
    model = model_lib.build_model(num_classes=4)
    step = semi_supervised.build_step(
        model, features, labels, True, self.dataset, options,
        tf.constant(0, tf.int64))
    return model, features, step

  @parameterized.named_parameters(
      ('decoder', None), ('cam_fusion', semi_supervised.CamFusion()),
      ('weakly', semi_supervised.CamFusion(weakly=True)))
  def test_no_gradient_reaches_the_weak_view(self, fusion):
    with tf.Graph().as_default():
      model, features, step = self._step(
          semi_supervised.SemiSupervisedOptions(cam_fusion=fusion))
      loss = tf.add_n(list(step.losses.values()))
      weak, strong, labeled = tf.gradients(
          loss, [features['unlabeled/image'],
                 features['unlabeled/strong_image'], features['image']])
      self.assertIsNone(weak)
      self.assertIsNotNone(strong)
      self.assertIsNotNone(labeled)
      # Every pass's batch-norm statistics are updated (as PseudoSeg).
      for images in (features['unlabeled/image'], features['image']):
        updates = set(model.get_updates_for(images))
        self.assertNotEmpty(updates)
        self.assertContainsSubset(updates, set(step.update_ops))
      expected = {'segmentation', 'consistency'}
      if fusion:
        expected |= {'classifier', 'refinement'}
        self.assertNotEmpty(step.variables)
      self.assertEqual(set(step.losses), expected)
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        losses, scalars = session.run([step.losses, step.scalars])
    for name, value in losses.items():
      self.assertTrue(np.isfinite(value), name)
    self.assertGreater(losses['consistency'], 0.0)
    for name in ('kept_share', 'pseudo_accuracy', 'strong_accuracy',
                 'pseudo_balanced_accuracy', 'strong_balanced_accuracy'):
      self.assertBetween(scalars['semi/' + name], 0.0, 1.0)
    self.assertEqual(scalars['semi/kept_share'], 1.0)  # No threshold.

  def test_rampup_scales_the_consistency_loss(self):
    options = semi_supervised.SemiSupervisedOptions(unlabeled_weight=2.0,
                                                    rampup_steps=10)
    with tf.Graph().as_default():
      global_step = tf.compat.v1.placeholder(tf.int64, [])
      features, labels = _features()
      model = model_lib.build_model(num_classes=4)
      step = semi_supervised.build_step(model, features, labels, True,
                                        self.dataset, options, global_step)
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        for value, expected in ((0, np.exp(-5.0)), (5, np.exp(-1.25)),
                                (10, 1.0), (20, 1.0)):
          losses, scalars = session.run([step.losses, step.scalars],
                                        {global_step: value})
          self.assertAllClose(scalars['semi/unlabeled_weight'],
                              2.0 * expected)
          self.assertAllClose(
              losses['consistency'],
              2.0 * expected * scalars['semi/consistency_loss'], rtol=1e-5)

  def test_threshold_keeps_the_confident_share(self):
    """The kept share is the share of valid pixels at or above threshold."""
    labeler = pseudo_labels.PseudoLabeler(soft=False, threshold=0.26)
    options = semi_supervised.SemiSupervisedOptions(labeler=labeler)
    with tf.Graph().as_default():
      features, labels = _features()
      model = model_lib.build_model(num_classes=4)
      step = semi_supervised.build_step(
          model, features, labels, True, self.dataset, options,
          tf.constant(0, tf.int64))
      weak = model(features['unlabeled/image'], training=True)['logits']
      probabilities = tf.nn.softmax(tf.image.resize(weak, [_CROP, _CROP]))
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        scalars, probabilities, valid = session.run(
            [step.scalars, probabilities,
             features['unlabeled/strong_valid']])
    valid = valid[..., 0]
    confident = probabilities.max(-1) >= 0.26
    expected = np.sum(confident * valid) / np.sum(valid)
    self.assertBetween(expected, 0.01, 0.99)
    self.assertAllClose(scalars['semi/kept_share'], expected, atol=1e-6)


if __name__ == '__main__':
  tf.test.main()
