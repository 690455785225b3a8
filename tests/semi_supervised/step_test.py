"""Tests of the semi-supervised step: gradients, updates, losses, monitors."""

import re

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import dataset_info
from official_seg.modeling import model as model_lib
from official_seg.modeling import losses
from official_seg.runtime import components as components_lib
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.runtime import run_config as run_config_lib
from official_seg.semi_supervised import pseudo_labels
from official_seg.semi_supervised import step as step_lib
from official_seg.training import averaging
from official_seg.training import summaries
from official_seg.training import warm_start
from tests import testing_utils

_CROP = 33
_IGNORE = 255
_MODEL = ['build_model.backbone = @backbones.MobileNet',
          'backbones.MobileNet.filter_size_scale = 0.35',
          'backbones.MobileNet.output_stride = 8',
          'decoders.ASPP.num_filters = 8',
          'decoders.ASPP.dilation_rates = [2, 4]']
_BRANCH = ('image_classifier/', 'cam_refinement/')


def _class_lists(labels, num_classes=4):
  """NumPy: which foreground classes occur in each label map."""
  return np.array([[float((label == c).any()) for c in range(1, num_classes)]
                   for label in labels], np.float32)


def _arrays(labeled=2, unlabeled=2, seed=0, size=_CROP):
  """Random labeled and unlabeled batches in the input_fn's layout (NumPy)."""
  rng = np.random.RandomState(seed)
  shape = [size, size]

  def image(count):
    return rng.normal(size=[count] + shape + [3]).astype(np.float32)

  def label(count):
    values = rng.randint(0, 4, size=[count] + shape + [1])
    values[:, :3] = _IGNORE
    return values.astype(np.int32)

  valid = np.ones([unlabeled] + shape + [1], np.float32)
  valid[:, -4:] = 0
  strong_valid = valid.copy()
  strong_valid[:, 5:10, 5:10] = 0
  truth, strong_truth = label(unlabeled), label(unlabeled)
  features = {
      'image': image(labeled),
      'unlabeled/image': image(unlabeled),
      'unlabeled/strong_image': image(unlabeled),
      'unlabeled/weak_valid': valid,
      'unlabeled/strong_valid': strong_valid,
      'unlabeled/class_labels': _class_lists(truth),
      'unlabeled/strong_class_labels': _class_lists(strong_truth),
      'unlabeled/mix_index': np.arange(unlabeled, dtype=np.int32),
      'unlabeled/mix_mask': np.zeros([unlabeled] + shape + [1], np.float32),
      'monitor/unlabeled_label': truth,
      'monitor/unlabeled_strong_label': strong_truth,
  }
  return features, label(labeled)


def _features(**kwargs):
  features, labels = _arrays(**kwargs)
  return ({k: tf.constant(v) for k, v in features.items()},
          tf.constant(labels))


def _softmax(logits):
  shifted = np.exp(logits - logits.max(-1, keepdims=True))
  return shifted / shifted.sum(-1, keepdims=True)


def _cross_entropy(logits, targets):
  """NumPy: -sum_c targets * log softmax(logits), per pixel."""
  shifted = logits - logits.max(-1, keepdims=True)
  log_probabilities = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
  return -(targets * log_probabilities).sum(-1)


class _FixedLogits(tf.keras.Model):
  """A real Keras model whose logits are a known affine map of the pixels.

  Full-resolution logits make every resize in the step the identity, so the
  step's losses have a closed form a NumPy reference computes exactly.
  """

  def __init__(self, kernel, bias):
    super().__init__()
    self.conv = tf.keras.layers.Conv2D(
        kernel.shape[-1], 1, kernel_initializer=tf.constant_initializer(
            kernel), bias_initializer=tf.constant_initializer(bias))

  @property
  def head(self):
    """The output layer, as `SegmentationModel.head`."""
    return self.conv

  def call(self, inputs, training=None, with_features=False):
    del training, with_features  # One fixed map.
    return {'logits': self.conv(inputs)}


class SemiSupervisedStepTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    gin.parse_config(_MODEL)
    self.dataset = dataset_info.DatasetInfo(num_classes=4)

  def _model(self, fusion):
    return model_lib.build_model(
        num_classes=4,
        cam_attention_dim=fusion.attention_dim if fusion else None)

  def _step(self, options, features=None, labels=None):
    if features is None:
      features, labels = _features()
    model = self._model(options.cam_fusion)
    step = step_lib.build_step(
        model, features, labels, True, self.dataset, options,
        tf.constant(0, tf.int64), losses.segmentation_loss)
    return model, features, labels, step

  @parameterized.named_parameters(
      ('decoder', None), ('cam_fusion', step_lib.CamFusion()),
      ('weakly', step_lib.CamFusion(weakly=True)))
  def test_no_gradient_from_the_weak_view_or_the_ground_truth(self, fusion):
    """No gradient reaches the weak view; poisoned 'monitor/' labels change none.

    Features under 'monitor/' reach the monitors only, never a loss.
    """
    arrays, labels = _arrays()
    monitor = [key for key in arrays if key.startswith('monitor/')]
    self.assertLen(monitor, 2)
    with tf.Graph().as_default():
      features = {key: tf.compat.v1.placeholder_with_default(value,
                                                             value.shape)
                  for key, value in arrays.items()}
      model, _, _, step = self._step(
          step_lib.SemiSupervisedOptions(cam_fusion=fusion),
          features, tf.constant(labels))
      expected = {'segmentation', 'consistency'}
      if fusion:
        expected |= {'classifier', 'refinement'}
      self.assertEqual(set(step.losses), expected)
      # Only the fusion has sources of its own to score.
      written = step.sampled_scalars()
      self.assertEqual('semi/cam_class_recall' in written, bool(fusion))
      # The no-class warning where the classifier picks the maps.
      self.assertEqual(
          [type(check).__name__ for check in step.host_checks],
          ['SemiSupervisedWarnings'] + (
              ['NoClassWarning'] if fusion and not fusion.weakly else []))
      loss = tf.add_n(list(step.losses.values()))
      weak, strong, labeled = tf.gradients(
          loss, [features['unlabeled/image'],
                 features['unlabeled/strong_image'], features['image']])
      self.assertIsNone(weak)
      self.assertIsNotNone(strong)
      self.assertIsNotNone(labeled)
      pairs = [(v, g) for v, g in zip(model.trainable_variables,
                                      tf.gradients(loss,
                                                   model.trainable_variables))
               if g is not None]
      variables, gradients = zip(*pairs)
      if fusion:
        self.assertNotEmpty([v for v in variables
                             if v.name.startswith(_BRANCH)])
      accuracy = written['semi/pseudo_accuracy']
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        clean, clean_accuracy = session.run([gradients, accuracy])
        # Class 1 everywhere: other class lists and other pixels.
        poisoned = {features[key]: np.ones_like(arrays[key])
                    for key in monitor}
        dirty, dirty_accuracy = session.run([gradients, accuracy], poisoned)
    # The poison reached the monitors, so it was fed where they read.
    self.assertNotAllClose(clean_accuracy, dirty_accuracy)
    for variable, before, after in zip(variables, clean, dirty):
      self.assertAllClose(before, after, rtol=1e-6, atol=1e-7,
                          msg=variable.name)

  def test_every_pass_updates_batch_norm_as_the_rule_says(self):
    """Each pass of BATCH_NORM_PASSES updates the layers it runs through."""
    fusion = step_lib.CamFusion()
    with tf.Graph().as_default():
      model, features, labels, step = self._step(
          step_lib.SemiSupervisedOptions(cam_fusion=fusion))
      sources = {'labeled': features['image'].op,
                 'strong': features['unlabeled/strong_image'].op,
                 'weak': features['unlabeled/image'].op,
                 'labels': labels.op}
      counts = {}
      for update in step.update_ops:
        ancestors = _ancestors(update)
        layer = 'refinement' if 'cam_refinement' in update.name else 'model'
        reached = tuple(sorted(name for name, op in sources.items()
                               if op in ancestors))
        counts[layer, reached] = counts.get((layer, reached), 0) + 1
      moving = [v for v in model.variables
                if 'moving_' in v.name and not v.name.startswith(_BRANCH)]
    self.assertNotEmpty(moving)
    # Mean and variance of every layer: once for the labeled and strong
    # batch, once for the weak one; the refinement's once for its labeled
    # pass and once for its weak pass. Nothing else.
    self.assertEqual(counts, {
        ('model', ('labeled', 'strong')): len(moving),
        ('model', ('weak',)): len(moving),
        ('refinement', ('labeled', 'labels', 'strong')): 2,
        ('refinement', ('weak',)): 2,
    })
    self.assertEqual(step_lib.BATCH_NORM_PASSES,
                     ('labeled_and_strong', 'weak', 'refinement_labeled',
                      'refinement_weak'))

  def test_classifier_weight_scales_its_loss_against_numpy(self):
    """CamFusion.classifier_weight: w times sigmoid cross-entropy; 0 trains
    nothing through the classifier."""
    with tf.Graph().as_default():
      arrays, labels = _arrays()
      features = {k: tf.constant(v) for k, v in arrays.items()}
      model = self._model(step_lib.CamFusion())

      def step(weight):
        options = step_lib.SemiSupervisedOptions(
            cam_fusion=step_lib.CamFusion(classifier_weight=weight))
        # Inference-mode batch norm: the labeled rows of the joint pass
        # equal a pass over the labeled images alone.
        return step_lib.build_step(
            model, features, tf.constant(labels), False, self.dataset,
            options, tf.constant(0, tf.int64), losses.segmentation_loss)

      weighted, off = step(0.25), step(0.0)
      outputs = model(features['image'], training=False, with_features=True)
      deepest = step_lib._levels(model, outputs)[0]  # pylint: disable=protected-access
      logits = model.image_classifier(deepest)
      classifier = [v for v in model.trainable_variables
                    if v.name.startswith('image_classifier/')]
      gradients = tf.gradients(off.losses['classifier'],
                               model.trainable_variables)
      kept = tf.gradients(weighted.losses['classifier'], classifier)
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        loss, zero, logits = session.run([weighted.losses['classifier'],
                                          off.losses['classifier'], logits])
        zeros = session.run([g for g in gradients if g is not None])
        kept = session.run(kept)
    targets = _class_lists(labels)
    # Numerically stable sigmoid cross-entropy, written out.
    expected = np.mean(np.maximum(logits, 0) - logits * targets +
                       np.log1p(np.exp(-np.abs(logits))))
    self.assertAllClose(loss, 0.25 * expected, rtol=1e-5)
    self.assertEqual(zero, 0.0)
    for gradient in zeros:
      self.assertAllEqual(gradient, np.zeros_like(gradient))
    self.assertGreater(max(np.abs(g).max() for g in kept), 0.0)

  def test_a_negative_classifier_weight_is_a_configuration_error(self):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                r'CamFusion.classifier_weight = -0.1: '
                                'expected a number >= 0'):
      step_lib.CamFusion(classifier_weight=-0.1)

  def test_refinement_loss_is_its_own_configurable(self):
    """segmentation_loss's bindings leave the refinement loss alone."""
    fusion = step_lib.CamFusion()
    options = step_lib.SemiSupervisedOptions(cam_fusion=fusion)
    weighted = step_lib.SemiSupervisedOptions(
        cam_fusion=step_lib.CamFusion(
            refinement_loss=step_lib.RefinementLoss(
                class_weights=(0.1, 3.0, 0.5, 2.0))))
    with tf.Graph().as_default():
      features, labels = _features()
      model = self._model(fusion)
      build = lambda o: step_lib.build_step(  # pylint: disable=g-long-lambda
          model, features, labels, True, self.dataset, o,
          tf.constant(0, tf.int64), losses.segmentation_loss).losses
      plain = build(options)
      gin.bind_parameter('segmentation_loss.class_weights',
                         [0.1, 3.0, 0.5, 2.0])
      gin.bind_parameter('segmentation_loss.top_k_percent_pixels', 0.5)
      bound = build(options)
      own = build(weighted)
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        plain, bound, own = session.run([plain, bound, own])
    self.assertNotAllClose(plain['segmentation'], bound['segmentation'])
    self.assertAllClose(plain['refinement'], bound['refinement'], rtol=1e-6)
    self.assertNotAllClose(plain['refinement'], own['refinement'])


def _ancestors(op):
  """Every op `op` depends on, through inputs and control inputs."""
  seen, pending = set(), [op]
  while pending:
    current = pending.pop()
    if current in seen:
      continue
    seen.add(current)
    pending.extend(t.op for t in current.inputs)
    pending.extend(current.control_inputs)
  return seen


def _numpy_labeler(labeler, probabilities):
  """(targets, kept) of a `PseudoLabeler`, written out in NumPy."""
  if labeler.soft:
    sharp = probabilities ** (1 / labeler.temperature)
    targets = sharp / sharp.sum(-1, keepdims=True)
    confidence = targets.max(-1)
  else:
    targets = np.eye(probabilities.shape[-1])[probabilities.argmax(-1)]
    confidence = probabilities.max(-1)
  return targets, (confidence >= labeler.threshold).astype(np.float32)


class ExactStepTest(tf.test.TestCase, parameterized.TestCase):
  """The step's losses and monitors against NumPy, CutMix on."""

  _SIZE = 9

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.dataset = dataset_info.DatasetInfo(num_classes=4)
    rng = np.random.RandomState(4)
    self.kernel = rng.normal(size=(1, 1, 3, 4)).astype(np.float32) * 2
    self.bias = rng.normal(size=4).astype(np.float32)
    arrays, self.labels = _arrays(labeled=2, unlabeled=3, seed=2,
                                  size=self._SIZE)
    # A non-identity mix: boxes of partners (1 -> 0, 0 -> 2) pasted into
    # views 0 and 2; view 1 is its own.
    arrays['unlabeled/mix_index'] = np.array([1, 1, 0], np.int32)
    mask = np.zeros((3, self._SIZE, self._SIZE, 1), np.float32)
    mask[0, 1:6, 2:8] = 1
    mask[2, 4:9, 0:3] = 1
    arrays['unlabeled/mix_mask'] = mask
    self.arrays = arrays

  def _logits(self, images):
    return images @ self.kernel[0, 0] + self.bias

  def _run(self, options, global_steps=(0,)):
    with tf.Graph().as_default():
      step_value = tf.compat.v1.placeholder(tf.int64, [])
      model = _FixedLogits(self.kernel, self.bias)
      step = step_lib.build_step(
          model, {k: tf.constant(v) for k, v in self.arrays.items()},
          tf.constant(self.labels), True, self.dataset, options, step_value,
          losses.segmentation_loss)
      # The written monitors as the host_call builds them, in its cond.
      scalars = dict(step.scalars, **summaries.sampled(
          tf.equal(step_value % 5, 0), step.sampled_scalars))
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        return [session.run([step.losses, scalars], {step_value: s})
                for s in global_steps]

  def _reference(self, labeler):
    """NumPy: segmentation and consistency losses, kept share, accuracy."""
    a = self.arrays
    labeled = self._logits(a['image'])
    labels = self.labels[..., 0]
    valid_labeled = labels != _IGNORE
    onehot = np.eye(4)[np.where(valid_labeled, labels, 0)]
    segmentation = (_cross_entropy(labeled, onehot) * valid_labeled).sum() / (
        valid_labeled.sum() + 1e-5)
    targets, kept = _numpy_labeler(labeler,
                                   _softmax(self._logits(a['unlabeled/image'])))
    # The strong view holds the partner's box: the targets follow it.
    index, inside = a['unlabeled/mix_index'], a['unlabeled/mix_mask'] > 0
    targets = np.where(inside, targets[index], targets)
    kept = np.where(inside[..., 0], kept[index], kept)
    valid = a['unlabeled/strong_valid'][..., 0]
    strong = self._logits(a['unlabeled/strong_image'])
    consistency = (_cross_entropy(strong, targets) * kept * valid).sum() / (
        valid.sum())
    # Gradients on the 1x1 kernel and bias: inputs times d loss / d logits.
    labeled_delta = (_softmax(labeled) - onehot) * valid_labeled[..., None] / (
        valid_labeled.sum() + 1e-5)
    strong_delta = (_softmax(strong) - targets) * (kept * valid)[..., None] / (
        valid.sum())
    gradients = [np.concatenate([
        np.einsum('bhwi,bhwc->ic', images, delta).ravel(),
        delta.sum((0, 1, 2))]) for images, delta in (
            (a['image'], labeled_delta),
            (a['unlabeled/strong_image'], strong_delta))]
    agreement = gradients[0] @ gradients[1] / (
        np.linalg.norm(gradients[0]) * np.linalg.norm(gradients[1]))
    truth = a['monitor/unlabeled_strong_label'][..., 0]
    counted = (valid > 0) & (truth != _IGNORE)
    right = (targets.argmax(-1) == truth) & counted
    shares = [np.bincount(classes.ravel(), weights.ravel(), 4)
              for classes, weights in ((targets.argmax(-1), kept * valid),
                                       (np.where(valid_labeled, labels, 0),
                                        valid_labeled.astype(float)))]
    shares = [share / share.sum() for share in shares]
    labeled_targets, labeled_kept = _numpy_labeler(labeler, _softmax(labeled))
    hit = (labeled_targets.argmax(-1) == labels) * labeled_kept * valid_labeled
    weight = labeled_kept * valid_labeled
    present = [c for c in range(4) if weight[labels == c].sum() > 0]
    return {'segmentation': segmentation, 'consistency': consistency,
            'kept_share': (kept * valid).sum() / valid.sum(),
            'pseudo_accuracy': right.sum() / counted.sum(),
            'class_share_distance': 0.5 * np.abs(shares[0] - shares[1]).sum(),
            'gradient_agreement': agreement,
            'labeled_pseudo_accuracy': np.mean(
                [hit[labels == c].sum() / weight[labels == c].sum()
                 for c in present])}

  @parameterized.named_parameters(
      ('fixmatch', pseudo_labels.PseudoLabeler(soft=False, threshold=0.6)),
      ('pseudoseg', pseudo_labels.PseudoLabeler(soft=True, temperature=0.5)))
  def test_losses_with_cutmix_against_numpy(self, labeler):
    expected = self._reference(labeler)
    self.assertBetween(expected['kept_share'], 0.05, 1.0)
    options = step_lib.SemiSupervisedOptions(labeler=labeler)
    [(losses, scalars)] = self._run(options)
    self.assertAllClose(losses['segmentation'], expected['segmentation'],
                        rtol=1e-5)
    self.assertAllClose(losses['consistency'], expected['consistency'],
                        rtol=1e-5)
    self.assertAllClose(scalars['semi/consistency_loss'],
                        expected['consistency'], rtol=1e-5)
    self.assertAllClose(scalars['semi/kept_share'], expected['kept_share'],
                        rtol=1e-6)
    self.assertAllClose(scalars['semi/pseudo_accuracy'],
                        expected['pseudo_accuracy'], rtol=1e-6)
    for name in ('class_share_distance', 'labeled_pseudo_accuracy'):
      self.assertBetween(expected[name], 0.05, 0.95, name)
      self.assertAllClose(scalars['semi/' + name], expected[name], rtol=1e-5)
    self.assertBetween(abs(expected['gradient_agreement']), 0.05, 0.95)
    self.assertAllClose(scalars['semi/gradient_agreement'],
                        expected['gradient_agreement'], rtol=1e-4)
    # Without the mix the targets differ: the box changes the loss.
    unmixed = dict(self.arrays)
    unmixed['unlabeled/mix_mask'] = np.zeros_like(unmixed['unlabeled/mix_mask'])
    self.arrays, mixed = unmixed, self.arrays
    self.assertNotAllClose(self._reference(labeler)['consistency'],
                           expected['consistency'])
    self.arrays = mixed

  def test_without_warnings_their_signals_are_not_computed(self):
    labeler = pseudo_labels.PseudoLabeler(soft=False, threshold=0.6)
    [(_, scalars)] = self._run(step_lib.SemiSupervisedOptions(
        labeler=labeler, warnings=None))
    self.assertIn('semi/kept_share', scalars)
    for name in ('gradient_agreement', 'class_share_distance',
                 'labeled_pseudo_accuracy'):
      self.assertNotIn('semi/' + name, scalars)

  def test_rampup_scales_the_consistency_loss(self):
    labeler = pseudo_labels.PseudoLabeler(soft=False, threshold=0.6)
    options = step_lib.SemiSupervisedOptions(
        labeler=labeler, unlabeled_weight=2.0, rampup_steps=10)
    consistency = self._reference(labeler)['consistency']
    results = self._run(options, global_steps=(0, 5, 10, 20))
    for (losses, scalars), ramp in zip(
        results, (np.exp(-5.0), np.exp(-1.25), 1.0, 1.0)):
      self.assertAllClose(scalars['semi/unlabeled_weight'], 2.0 * ramp)
      self.assertAllClose(losses['consistency'], 2.0 * ramp * consistency,
                          rtol=1e-5)


class PseudoProbabilitiesTest(tf.test.TestCase, parameterized.TestCase):
  """The labeler's input: decoder alone, fused, or fused where a class was drawn."""

  def setUp(self):
    super().setUp()
    gin.clear_config()
    # Decoder and CAM logits of 2 images; image 0's CAM drew class 1, image
    # 1's drew none.
    self.decoder, self.cam = np.random.RandomState(5).normal(
        scale=[[[[[2.0]]]], [[[[3.0]]]]], size=(2, 2, 4, 5, 3)).astype(
            np.float32)
    self.drawn = np.array([[1, 0], [0, 0]], np.float32)

  def _fused(self):
    """NumPy: PseudoSeg's calibrated fusion (one RMS scale for both)."""
    both = np.concatenate([self.decoder, self.cam]).astype(np.float64)
    scale = 1.0 / np.sqrt(np.mean(both ** 2) + 1e-8)
    return 0.5 * (_softmax(self.decoder * scale) + _softmax(self.cam * scale))

  @parameterized.parameters(False, True)
  def test_against_numpy(self, decoder_where_no_class):
    fusion = step_lib.CamFusion(
        decoder_where_no_class=decoder_where_no_class)
    like = tf.zeros([2, 4, 5, 1])
    got = step_lib.pseudo_probabilities(
        tf.constant(self.decoder), (tf.constant(self.cam),
                                    tf.constant(self.drawn)), like, fusion)
    expected = self._fused()
    if decoder_where_no_class:
      expected[1] = _softmax(self.decoder[1].astype(np.float64))
    self.assertAllClose(got, expected, atol=1e-6)
    self.assertNotAllClose(self._fused()[1],
                           _softmax(self.decoder[1].astype(np.float64)))
    self.assertAllClose(
        step_lib.pseudo_probabilities(tf.constant(self.decoder), None,
                                             like),
        _softmax(self.decoder.astype(np.float64)), atol=1e-6)


class BranchInTheModelTest(tf.test.TestCase):
  """PseudoSeg's classifier and refinement are layers of the model."""

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.model_dir = self.create_tempdir().full_path

  def _spec(self, decay=None):
    testing_utils.parse_tiny_semi_supervised(self.model_dir, 'pseudoseg.gin')
    options = model_fn_lib.ModelFnOptions(moving_average_decay=decay)
    model_fn = model_fn_lib.make_model_fn(dataset_info.DatasetInfo(), options,
                                          components_lib.Components())
    config = run_config_lib.build_run_config(self.model_dir)
    features, labels = _features()
    return model_fn(features, labels, tf.estimator.ModeKeys.TRAIN,
                    {'use_tpu': False}, config)

  def test_weight_decay_and_moving_averages_cover_the_branch(self):
    with tf.Graph().as_default():
      spec = self._spec(decay=0.99)
      names = {v.op.name for v in tf.compat.v1.global_variables()}
      branch = [v for v in tf.compat.v1.trainable_variables()
                if v.op.name.startswith(_BRANCH)]
      loss_inputs = {op.name for op in _ancestors(spec.loss.op)}
    kernels = [v.op.name for v in branch if v.op.name.endswith('kernel')]
    self.assertLen(kernels, 4)  # Classifier, key, query, output conv.
    for kernel in kernels:
      self.assertNotEmpty([name for name in loss_inputs
                           if name.startswith(kernel + '/Regularizer')],
                          kernel)
    for variable in branch:
      self.assertIn(f'{variable.op.name}/{averaging.AVERAGE_NAME}', names)

  def _branch_model(self):
    """A model with the branch, every variable built by one step."""
    gin.parse_config(_MODEL)
    model = model_lib.build_model(num_classes=4, cam_attention_dim=8)
    options = step_lib.SemiSupervisedOptions(
        cam_fusion=step_lib.CamFusion(attention_dim=8))
    features, labels = _features()
    step_lib.build_step(model, features, labels, True,
                               dataset_info.DatasetInfo(num_classes=4),
                               options, tf.constant(0, tf.int64),
                               losses.segmentation_loss)
    return model

  def test_resume_check_names_the_branch(self):
    with tf.Graph().as_default():
      gin.parse_config(_MODEL)
      model = model_lib.build_model(num_classes=4)
      model(tf.zeros([1, _CROP, _CROP, 3]))
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        tf.compat.v1.train.Saver().save(session,
                                        f'{self.model_dir}/model.ckpt')
    with tf.Graph().as_default():
      model = self._branch_model()
      with self.assertRaisesRegex(warm_start.IncompatibleCheckpointError,
                                  '8 variable.*image_classifier/logits'):
        warm_start.check_resume_compatible(model, self.model_dir)

  def test_warm_start_restores_the_branch(self):
    with tf.Graph().as_default():
      model = self._branch_model()
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        prefix = tf.compat.v1.train.Saver().save(
            session, f'{self.model_dir}/init.ckpt')
      report, _ = warm_start.restore_plan(model, prefix)
      rules = [(re.compile('^cam_refinement/'), 'test')]
      excluded, _ = warm_start.restore_plan(model, prefix, rules=rules)
    branch = [v.op.name for v in model.variables
              if v.op.name.startswith(_BRANCH)]
    self.assertLen(branch, 8)  # Dense kernel and bias, 3 kernels, BN's 3.
    self.assertContainsSubset(branch, report['restored'])
    self.assertContainsSubset(
        [n for n in branch if n.startswith('cam_refinement/')],
        excluded['excluded'])


if __name__ == '__main__':
  tf.test.main()
