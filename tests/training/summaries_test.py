"""Tests that the host_call writes the registered scalars at its cadence."""

import glob
import os

import tensorflow as tf
from tensorflow.core.util import event_pb2

from official_seg.training import summaries


def _scalars(model_dir):
  found = {}
  for path in glob.glob(os.path.join(model_dir, 'events.out.tfevents*')):
    for record in tf.data.TFRecordDataset(path):
      event = event_pb2.Event.FromString(record.numpy())
      for value in event.summary.value:
        found.setdefault(value.tag, []).append(event.step)
  return found


class SummariesTest(tf.test.TestCase):

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


if __name__ == '__main__':
  tf.test.main()
