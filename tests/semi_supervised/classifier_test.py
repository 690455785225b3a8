"""Tests of the image classifier, its CAM and the CAM's refinement."""

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf
from official.vision.modeling import backbones

from official_seg.modeling import losses
from official_seg.semi_supervised import classifier

NUM_CLASSES = 4  # Background and three foreground classes.
ATTENTION_DIM = 4
EPSILON = 1e-3  # The refinement's batch-norm epsilon.


def _numpy_grad_cam_normalise(cams, labels):
  """Labels' mask, then each map over its spatial maximum (0 if that is 0)."""
  cams = cams * labels[:, None, None, :]
  peak = cams.max(axis=(1, 2), keepdims=True)
  return np.where(peak > 0, cams / np.where(peak > 0, peak, 1.0), 0.0)


def _softmax(x):
  x = x - x.max(-1, keepdims=True)
  e = np.exp(x)
  return e / e.sum(-1, keepdims=True)


def _refinement_reference(deep, shallow, cam, valid, weights, training):
  """compute_self_att_v2 in NumPy, with keys masked where `valid` is 0.

  `shallow` has twice the CAM's size: bilinear resizing (half-pixel
  centres) to half the size is the mean of each 2x2 block.
  """
  b, h, w, _ = cam.shape
  blocks = shallow.reshape(b, h, 2, w, 2, -1).mean(axis=(2, 4))
  hyper = np.concatenate([deep, blocks], -1).reshape(b, h * w, -1)
  keys, queries = hyper @ weights['key'], hyper @ weights['query']
  logits = queries @ keys.transpose(0, 2, 1) / np.sqrt(ATTENTION_DIM)
  logits = np.where(valid.reshape(b, 1, h * w) > 0, logits, -np.inf)
  values = cam.reshape(b, h * w, -1)
  scores = _softmax(logits) @ values + values
  scores = np.concatenate([2 - scores.max(-1, keepdims=True), scores], -1)
  out = scores @ weights['output']
  if training:
    mean, var = out.mean(axis=(0, 1)), out.var(axis=(0, 1))
  else:
    mean, var = weights['moving_mean'], weights['moving_variance']
  out = (out - mean) / np.sqrt(var + EPSILON) + weights['beta']
  return out.reshape(b, h, w, -1)


def _inputs(seed=0):
  """Deep features [2,3,3,5], shallow [2,6,6,4], CAM [2,3,3,3], valid."""
  rng = np.random.RandomState(seed)
  deep = rng.normal(size=[2, 3, 3, 5]).astype(np.float32)
  shallow = rng.normal(size=[2, 6, 6, 4]).astype(np.float32)
  cam = rng.uniform(size=[2, 3, 3, NUM_CLASSES - 1]).astype(np.float32)
  valid = np.ones([2, 3, 3, 1], np.float32)
  valid[0, 2, :] = 0  # A padded bottom row.
  valid[1, 0, 1] = valid[1, 1, 1] = 0  # A cutout.
  return deep, shallow, cam, valid


def _fixed_weights(seed=1):
  rng = np.random.RandomState(seed)
  return {
      'key': rng.normal(scale=0.5, size=[9, ATTENTION_DIM]),
      'query': rng.normal(scale=0.5, size=[9, ATTENTION_DIM]),
      'output': rng.normal(scale=0.5, size=[NUM_CLASSES, NUM_CLASSES]),
      'beta': rng.normal(scale=0.1, size=[NUM_CLASSES]),
      'moving_mean': rng.normal(scale=0.1, size=[NUM_CLASSES]),
      'moving_variance': rng.uniform(0.5, 2.0, size=[NUM_CLASSES]),
  }


def _refinement(deep, shallow, cam, valid, weights):
  """A built CamRefinement carrying `weights`."""
  layer = classifier.CamRefinement(NUM_CLASSES, attention_dim=ATTENTION_DIM)
  layer([deep, shallow], cam, valid, training=False)
  layer.key.set_weights([weights['key'][None, None]])
  layer.query.set_weights([weights['query'][None, None]])
  layer.output_conv.set_weights([weights['output'][None, None]])
  layer.batch_norm.set_weights([weights['beta'], weights['moving_mean'],
                                weights['moving_variance']])
  return layer


class ImageLabelsAndLossTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  @parameterized.parameters(255, 2)
  def test_image_labels_against_numpy(self, ignore_label):
    rng = np.random.RandomState(0)
    labels = rng.choice([0, 1, 2, 3, 255], size=[4, 5, 6, 1]).astype(np.int32)
    labels[1] = rng.choice([0, 255], size=[5, 6, 1])  # Background only.
    labels[2] = 0
    labels[2, 0, 0] = 3  # One pixel is enough.
    expected = np.array(
        [[np.any((labels[b] == c) & (labels[b] != ignore_label))
          for c in range(1, NUM_CLASSES)] for b in range(4)], np.float32)
    got = classifier.image_labels(tf.constant(labels), NUM_CLASSES,
                                  ignore_label)
    self.assertEqual(got.dtype, tf.float32)
    self.assertAllEqual(got, expected)
    self.assertAllEqual(expected[1:3], [[0, 0, 0], [0, 0, 1]])

  def test_classification_loss_against_numpy(self):
    rng = np.random.RandomState(0)
    logits = rng.normal(scale=3.0, size=[3, NUM_CLASSES - 1])
    targets = rng.randint(0, 2, size=[3, NUM_CLASSES - 1]).astype(np.float64)
    sigmoid = 1 / (1 + np.exp(-logits))
    expected = -np.mean(targets * np.log(sigmoid) +
                        (1 - targets) * np.log(1 - sigmoid))
    got = classifier.classification_loss(tf.constant(logits, tf.float32),
                                         tf.constant(targets, tf.float32))
    self.assertEqual(got.dtype, tf.float32)
    self.assertEqual(got.shape, ())
    self.assertAllClose(got, expected, rtol=1e-5)

  def test_feature_levels_deepest_first(self):
    features = {str(level): tf.fill([1, 1, 1, 1], float(level))
                for level in (2, 3, 4, 5)}
    levels = classifier.feature_levels(features, 2)
    self.assertEqual([float(f[0, 0, 0, 0]) for f in levels], [5.0, 4.0])
    for count in (0, 5):
      with self.assertRaisesRegex(ValueError, f"count={count}.*'2', '3'"):
        classifier.feature_levels(features, count)


class GradCamTest(tf.test.TestCase, parameterized.TestCase):
  """The einsum CAM against Grad-CAM computed with per-class gradients."""

  def setUp(self):
    super().setUp()
    gin.clear_config()
    rng = np.random.RandomState(0)
    self.images = rng.uniform(size=[2, 11, 11, 3]).astype(np.float32)
    self.labels = np.array([[1, 1, 1], [1, 0, 1]], np.float32)
    kernel = rng.normal(size=[6, NUM_CLASSES - 1]).astype(np.float32)
    # Non-negative (ReLU) features and a negative column: class 3's map is
    # 0 everywhere, the case where normalising would divide by 0.
    kernel[:, 2] = -np.abs(kernel[:, 2])
    self.kernel = kernel

  def _backbone(self):
    # A seeded kernel: Keras draws an unseeded initializer's seed from
    # Python's random module, so the features, and whether each class's map
    # has a peak to check, would follow what the process ran before.
    return tf.keras.layers.Conv2D(
        6, 3, strides=2, activation='relu',
        kernel_initializer=tf.keras.initializers.GlorotUniform(seed=0))

  def _model(self):
    backbone = self._backbone()
    head = classifier.ImageClassifier(NUM_CLASSES)
    features = backbone(tf.constant(self.images))
    head(features)
    head._dense.set_weights([self.kernel, np.ones([NUM_CLASSES - 1])])  # pylint: disable=protected-access
    return backbone, head

  def _check(self, features, gradients, cam):
    """Grad-CAM from `gradients` [C-1, B, h, w, K] against `cam`."""
    weights = gradients.mean(axis=(2, 3))  # [C-1, B, K]
    grad_cam = np.maximum(np.einsum('bhwk,cbk->bhwc', features, weights), 0)
    expected = _numpy_grad_cam_normalise(grad_cam, self.labels)
    self.assertEqual(cam.shape, (2, 5, 5, NUM_CLASSES - 1))
    self.assertAllClose(cam, expected, rtol=1e-5, atol=1e-6)
    # Not a trivial map: present classes peak at 1 and vary below it, the
    # absent class (image 1, class 2) and the all-negative class are 0.
    self.assertAllClose(cam[0, ..., :2].max(axis=(0, 1)), [1.0, 1.0])
    self.assertGreater(np.ptp(cam[0, ..., 0]), 0.1)
    self.assertAllEqual(cam[1, ..., 1], np.zeros([5, 5]))
    self.assertAllEqual(cam[..., 2], np.zeros([2, 5, 5]))

  def test_equals_grad_cam_eagerly(self):
    backbone, head = self._model()
    with tf.GradientTape(persistent=True) as tape:
      features = backbone(tf.constant(self.images))
      logits = head(features)
      class_logits = [logits[:, c] for c in range(NUM_CLASSES - 1)]
    gradients = np.stack([tape.gradient(l, features).numpy()
                          for l in class_logits])
    cam = head.cam(features, tf.constant(self.labels))
    self.assertEqual(cam.dtype, tf.float32)
    self._check(features.numpy(), gradients, cam.numpy())

  def test_equals_grad_cam_in_a_graph(self):
    with tf.Graph().as_default():
      backbone = self._backbone()
      head = classifier.ImageClassifier(NUM_CLASSES)
      features = backbone(tf.constant(self.images))
      logits = head(features)
      # PseudoSeg's way: tf.gradients of each class logit.
      gradients = tf.stack([
          tf.gradients(logits[:, c], features)[0]
          for c in range(NUM_CLASSES - 1)])
      cam = head.cam(features, tf.constant(self.labels))
      self.assertEqual(head.kernel.shape, (6, NUM_CLASSES - 1))
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(head.kernel.assign(self.kernel))
        self._check(*session.run([features, gradients, cam]))

  def test_no_gradient_through_the_cam(self):
    backbone, head = self._model()
    features = backbone(tf.constant(self.images))
    with tf.GradientTape() as tape:
      tape.watch(features)
      cam = head.cam(features, tf.constant(self.labels))
    self.assertIsNone(tape.gradient(cam, features))

  def test_mixed_precision_outputs_float32(self):
    previous = tf.keras.mixed_precision.global_policy()
    tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')
    try:
      head = classifier.ImageClassifier(NUM_CLASSES)
      refine = classifier.CamRefinement(NUM_CLASSES, ATTENTION_DIM)
      features = tf.constant(self.images, tf.bfloat16)
      logits = head(features)
      cam = head.cam(features, tf.constant(self.labels))
      refined = refine([features], cam, tf.ones([2, 11, 11, 1]))
    finally:
      tf.keras.mixed_precision.set_global_policy(previous)
    self.assertEqual(head.compute_dtype, 'bfloat16')
    self.assertEqual((logits.dtype, cam.dtype, refined.dtype),
                     (tf.float32,) * 3)
    self.assertEqual(refined.shape, (2, 11, 11, NUM_CLASSES))


class CamRefinementTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  @parameterized.parameters(False, True)
  def test_against_numpy(self, training):
    deep, shallow, cam, valid = _inputs()
    weights = _fixed_weights()
    layer = _refinement(deep, shallow, cam, valid, weights)
    got = layer([deep, shallow], cam, valid, training=training)
    self.assertEqual(got.dtype, tf.float32)
    self.assertEqual(got.shape, (2, 3, 3, NUM_CLASSES))
    expected = _refinement_reference(deep, shallow, cam, valid, weights,
                                     training)
    self.assertAllClose(got, expected, rtol=1e-4, atol=1e-5)

  def test_invalid_pixels_are_never_attended(self):
    deep, shallow, cam, valid = _inputs()
    layer = _refinement(deep, shallow, cam, valid, _fixed_weights())
    before = layer([deep, shallow], cam, valid, training=False).numpy()
    rng = np.random.RandomState(5)
    invalid = valid[..., 0] == 0
    deep[invalid] += rng.normal(scale=10.0, size=deep[invalid].shape)
    cam[invalid] = rng.uniform(size=cam[invalid].shape)
    shallow_invalid = np.repeat(np.repeat(invalid, 2, 1), 2, 2)
    shallow[shallow_invalid] += 10.0
    # The mask at twice the CAM's size reaches it by nearest resizing.
    valid_2x = np.repeat(np.repeat(valid, 2, 1), 2, 2)
    after = layer([deep, shallow], cam, valid_2x, training=False).numpy()
    self.assertAllClose(after[~invalid], before[~invalid], rtol=0, atol=1e-5)
    # The changes were large enough to show: invalid pixels' own outputs move.
    self.assertGreater(np.abs(after[invalid] - before[invalid]).min(), 1e-3)

  def test_gradients_reach_its_variables_only(self):
    deep, shallow, cam, valid = (tf.constant(x) for x in _inputs())
    layer = classifier.CamRefinement(NUM_CLASSES, attention_dim=ATTENTION_DIM)
    weights = tf.constant(np.random.RandomState(2).normal(
        size=[2, 3, 3, NUM_CLASSES]), tf.float32)
    with tf.GradientTape(persistent=True) as tape:
      tape.watch([deep, shallow, cam])
      loss = tf.reduce_sum(
          layer([deep, shallow], cam, valid, training=True) * weights)
    self.assertEqual([g is None for g in tape.gradient(
        loss, [deep, shallow, cam])], [True] * 3)
    variables = layer.trainable_variables
    self.assertLen(variables, 4)  # Key, query, output kernels, BN offset.
    for variable, gradient in zip(variables,
                                  tape.gradient(loss, variables)):
      self.assertGreater(float(tf.norm(gradient)), 0.0, variable.name)

  def test_in_a_graph_with_batch_norm_updates(self):
    deep, shallow, cam, valid = _inputs()
    with tf.Graph().as_default():
      inputs = [tf.constant(x) for x in (deep, shallow, cam, valid)]
      layer = classifier.CamRefinement(NUM_CLASSES,
                                       attention_dim=ATTENTION_DIM)
      out = layer(inputs[:2], *inputs[2:], training=True)
      updates = layer.get_updates_for(inputs)
      self.assertLen(updates, 2)  # Moving mean and variance.
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        key, query, output, beta = session.run(layer.trainable_variables)
        got, _ = session.run([out, updates])
        moving_mean = session.run(layer.batch_norm.moving_mean)
    weights = {'key': key[0, 0], 'query': query[0, 0],
               'output': output[0, 0], 'beta': beta}
    expected = _refinement_reference(deep, shallow, cam, valid, weights,
                                     training=True)
    self.assertAllClose(got, expected, rtol=1e-4, atol=1e-5)
    # One update with Keras's momentum 0.99 from the initial mean 0.
    b, h, w = cam.shape[:3]
    scores = _refinement_reference(
        deep, shallow, cam, valid,
        dict(weights, beta=np.zeros(NUM_CLASSES),
             moving_mean=np.zeros(NUM_CLASSES),
             moving_variance=np.ones(NUM_CLASSES) - EPSILON), training=False)
    self.assertAllClose(moving_mean,
                        0.01 * scores.reshape(b * h * w, -1).mean(0),
                        rtol=1e-4, atol=1e-6)

  def test_kernel_regularizers(self):
    deep, shallow, cam, valid = _inputs()
    regularizer = tf.keras.regularizers.L2(0.5)
    layer = classifier.CamRefinement(NUM_CLASSES, ATTENTION_DIM,
                                     kernel_regularizer=regularizer)
    layer([deep, shallow], cam, valid)
    head = classifier.ImageClassifier(NUM_CLASSES,
                                      kernel_regularizer=regularizer)
    head(deep)
    kernels = [layer.key.kernel, layer.query.kernel,
               layer.output_conv.kernel, head.kernel]
    self.assertAllClose(
        sorted(float(loss) for loss in layer.losses + head.losses),
        sorted(0.5 * float(tf.reduce_sum(k ** 2)) for k in kernels))


class BackboneGraphTest(tf.test.TestCase):
  """The pieces on a Model Garden backbone in a graph, as in a model_fn."""

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_one_training_step(self):
    rng = np.random.RandomState(0)
    labels = rng.choice([0, 1, 3, 255], size=[2, 65, 65, 1]).astype(np.int32)
    valid = np.ones([2, 65, 65, 1], np.float32)
    valid[:, 40:] = 0
    with tf.Graph().as_default():
      images = tf.constant(rng.uniform(-1, 1, [2, 65, 65, 3]), tf.float32)
      backbone = backbones.MobileNet(filter_size_scale=0.35)
      levels = classifier.feature_levels(backbone(images, training=True), 2)
      head = classifier.ImageClassifier(NUM_CLASSES)
      refine = classifier.CamRefinement(NUM_CLASSES, ATTENTION_DIM)
      targets = classifier.image_labels(labels, NUM_CLASSES, 255)
      cls_loss = classifier.classification_loss(head(levels[0]), targets)
      cam = head.cam(levels[0], targets)
      refined = refine(levels, cam, tf.constant(valid), training=True)
      refine_loss = losses.segmentation_loss(refined, labels, 255)
      # Levels 5 and 4 (strides 32 and 16): the CAM is at the deepest.
      self.assertEqual(cam.shape, (2, 3, 3, NUM_CLASSES - 1))
      self.assertEqual(refined.shape, (2, 3, 3, NUM_CLASSES))
      self.assertEqual(
          [g is None for g in tf.gradients(
              refine_loss, backbone.trainable_variables + [cam])],
          [True] * (len(backbone.trainable_variables) + 1))
      # The classifier's loss trains the shared backbone.
      self.assertNotIn(None, tf.gradients(cls_loss,
                                          backbone.trainable_variables))
      variables = refine.trainable_variables + head.trainable_variables
      updates = refine.get_updates_for(None) + refine.get_updates_for(
          levels + [cam])
      with tf.control_dependencies(updates):
        step = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            cls_loss + refine_loss, var_list=variables)
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        start = session.run(variables + [refine.batch_norm.moving_mean])
        session.run(step)
        end = session.run(variables + [refine.batch_norm.moving_mean])
        self.assertAllEqual(session.run(targets), [[1, 0, 1], [1, 0, 1]])
    for name, old, new in zip([v.name for v in variables] + ['moving_mean'],
                              start, end):
      self.assertGreater(np.abs(new - old).max(), 0, name)


if __name__ == '__main__':
  tf.test.main()
