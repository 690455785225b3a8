"""Tests that the host_call writes scalars, pictures and histograms at their cadences."""

import glob
import os

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf
from tensorflow.core.util import event_pb2

from official_seg.data import dataset_info
from official_seg.data import palettes
from official_seg.training import summaries


def _scalars(model_dir):
  found = {}
  for path in glob.glob(os.path.join(model_dir, 'events.out.tfevents*')):
    for record in tf.data.TFRecordDataset(path):
      event = event_pb2.Event.FromString(record.numpy())
      for value in event.summary.value:
        found.setdefault(value.tag, []).append(event.step)
  return found


def _run_host_call(model_dir, registered, steps=5, **options):
  """Runs the CPU path of `host_call` after `steps` steps 0, 1, ...

  `registered(step)` gives the `Registered`, of the step's placeholder.
  """
  step = tf.compat.v1.placeholder(tf.int64, [])
  host_call = summaries.host_call(model_dir, step, registered(step),
                                  **options)
  spec = tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
      tf.estimator.ModeKeys.TRAIN, loss=tf.constant(1.0),
      train_op=tf.no_op(), host_call=host_call).as_estimator_spec()
  with tf.compat.v1.train.MonitoredSession(
      hooks=spec.training_hooks) as sess:
    for value in range(steps):
      sess.run(spec.train_op, {step: value})


class SummariesTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_host_call_writes_every_n_steps(self):
    model_dir = self.create_tempdir().full_path
    with tf.Graph().as_default():
      step = tf.compat.v1.placeholder(tf.int64, [])
      host_call = summaries.host_call(
          model_dir, step, {'loss/total': tf.constant(1.5),
                            'learning_rate': tf.constant(0.1)},
          every_n_steps=2)
      self.assertTrue(all(t.shape.as_list() == [1] for t in host_call[1]))
      # The CPU/GPU path: the hook that as_estimator_spec adds runs the host
      # call after every step.
      spec = tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
          tf.estimator.ModeKeys.TRAIN, loss=tf.constant(1.0),
          train_op=tf.no_op(), host_call=host_call).as_estimator_spec()
      with tf.compat.v1.train.MonitoredSession(
          hooks=spec.training_hooks) as sess:
        for value in range(5):
          sess.run(spec.train_op, {step: value})
    written = _scalars(model_dir)
    self.assertEqual(sorted(written['loss/total']), [0, 2, 4])
    self.assertEqual(sorted(written['learning_rate']), [0, 2, 4])


  def test_sampled_scalars_are_built_only_on_the_steps_written(self):
    model_dir = self.create_tempdir().full_path

    def registered(step):
      def build():
        # Fails on a step that writes no scalar: the cond must skip it there.
        check = tf.debugging.Assert(tf.equal(step % 2, 0), [step])
        with tf.control_dependencies([check]):
          return {'semi/monitor': 10.0 * tf.cast(step, tf.float32)}
      return summaries.Registered(scalars={'loss/total': tf.constant(1.5)},
                                  sampled_scalars=build)

    with tf.Graph().as_default():
      _run_host_call(model_dir, registered, every_n_steps=2)
    values = {}
    for path in glob.glob(os.path.join(model_dir, 'events.out.tfevents*')):
      for event in tf.compat.v1.train.summary_iterator(path):
        for value in event.summary.value:
          if value.tag == 'semi/monitor':
            values[event.step] = float(tf.make_ndarray(value.tensor))
    self.assertEqual(values, {0: 0.0, 2: 20.0, 4: 40.0})

  def test_runs_that_apply_no_update_write_nothing(self):
    model_dir = self.create_tempdir().full_path
    with tf.Graph().as_default():
      step = tf.compat.v1.placeholder(tf.int64, [])
      applied = tf.compat.v1.placeholder(tf.bool, [])
      picture = tf.zeros([1, 2, 2, 3], tf.uint8)
      host_call = summaries.host_call(
          model_dir, step, summaries.Registered(
              scalars={'loss/total': tf.constant(1.5)},
              pictures={'pictures/label': picture}, applied=applied),
          every_n_steps=1, image_summary_steps=1)
      spec = tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
          tf.estimator.ModeKeys.TRAIN, loss=tf.constant(1.0),
          train_op=tf.no_op(), host_call=host_call).as_estimator_spec()
      with tf.compat.v1.train.MonitoredSession(
          hooks=spec.training_hooks) as sess:
        # Two micro-batches an update: the global step stays for one run.
        for value, done in ((0, False), (0, True), (1, False), (1, True)):
          sess.run(spec.train_op, {step: value, applied: done})
    written = _scalars(model_dir)
    self.assertEqual(written['loss/total'], [0, 1])
    self.assertEqual(written['pictures/label'], [0, 1])

  @parameterized.parameters((2, [0, 2, 4]), (0, None))
  def test_pictures_every_image_summary_steps(self, every, expected):
    model_dir = self.create_tempdir().full_path
    picture = np.arange(2 * 3 * 4 * 3, dtype=np.uint8).reshape([2, 3, 4, 3])
    with tf.Graph().as_default():
      _run_host_call(model_dir, lambda _: summaries.Registered(
          scalars={'loss/total': tf.constant(1.0)},
          pictures={'pictures/label': tf.constant(picture)}),
                     every_n_steps=1, image_summary_steps=every)
    written = _scalars(model_dir)
    self.assertEqual(written['loss/total'], [0, 1, 2, 3, 4])
    self.assertEqual(written.get('pictures/label'), expected)

  def test_examples_per_second_and_histograms(self):
    model_dir = self.create_tempdir().full_path
    with tf.Graph().as_default():
      weight = tf.compat.v1.get_variable('w', initializer=[1.0, 2.0])
      _run_host_call(model_dir, lambda _: summaries.Registered(
          scalars={}, examples=tf.constant(8), variables=[weight]),
                     every_n_steps=2, variable_histograms=True)
    written = _scalars(model_dir)
    # A rate needs a previous recorded step.
    self.assertEqual(written['examples_per_second'], [2, 4])
    self.assertEqual(written['w'], [0, 2, 4])

  def test_learning_rate_of_each_multiplier_group(self):
    multipliers = {'conv/bias': 2.0, 'head/kernel': 10.0, 'head/bias': 20.0}
    with tf.Graph().as_default():
      rates = summaries.learning_rates(tf.constant(0.5), multipliers)
      self.assertEqual(sorted(rates), ['learning_rate/x10',
                                       'learning_rate/x2',
                                       'learning_rate/x20'])
      with tf.compat.v1.Session() as sess:
        self.assertAllClose(sess.run(rates), {'learning_rate/x2': 1.0,
                                              'learning_rate/x10': 5.0,
                                              'learning_rate/x20': 10.0})
    self.assertEqual(summaries.learning_rates(1.0, {}), {})

  def test_train_pictures_colour_labels_and_predictions(self):
    dataset = dataset_info.DatasetInfo(num_classes=3, palette='synthetic',
                                       ignore_label=255)
    labels = np.array([[[0, 1], [2, 255]]] * 4, np.int32)[..., None]
    # Logits at half the labels' size, class 2 everywhere.
    logits = np.zeros([4, 1, 1, 3], np.float32)
    logits[..., 2] = 1.0
    images = np.random.RandomState(0).uniform(-1, 1, [4, 2, 2, 3])
    pictures = self.evaluate(summaries.train_pictures(
        tf.constant(images, tf.float32), tf.constant(labels),
        tf.constant(logits), dataset, max_images=3))
    synthetic = palettes.get_palette('synthetic')
    self.assertAllEqual(pictures['pictures/label'][0],
                        [[synthetic[0], synthetic[1]],
                         [synthetic[2], [255, 255, 255]]])
    self.assertEqual(pictures['pictures/label'].shape, (3, 2, 2, 3))
    self.assertAllEqual(pictures['pictures/prediction'],
                        np.broadcast_to(synthetic[2], [3, 2, 2, 3]))
    stretched = (images[:3] - images[:3].min(axis=(1, 2, 3), keepdims=True))
    stretched *= 255 / stretched.max(axis=(1, 2, 3), keepdims=True)
    self.assertAllClose(pictures['pictures/image'], stretched, atol=0.51)
    self.assertEqual(pictures['pictures/image'].dtype, np.uint8)


if __name__ == '__main__':
  tf.test.main()
