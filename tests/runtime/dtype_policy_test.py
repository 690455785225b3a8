"""The model_fn's Keras dtype policy over a strategy's interleaved replicas."""

import tensorflow as tf

from official_seg.runtime import dtype_policy


class KerasPolicyTest(tf.test.TestCase):
  """The model_fn's dtype policy over a strategy's interleaved replicas."""

  def test_every_replica_builds_in_the_policy_and_none_leaves_it_set(self):
    events = []

    def replica_fn():
      replica = tf.distribute.get_replica_context().replica_id_in_sync_group
      with dtype_policy.keras_policy('mixed_bfloat16'):
        first = tf.keras.layers.Dense(1)
        events.append(('enter', replica))
        # Where the replicas meet: each thread waits here for the others.
        tf.distribute.get_replica_context().merge_call(lambda _: None)
        second = tf.keras.layers.Dense(1)
        events.append(('leave', replica))
      events.append(('after', replica))
      return [first.compute_dtype, second.compute_dtype]

    with tf.Graph().as_default():
      strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
      dtypes = strategy.extended.call_for_each_replica(
          tf.autograph.experimental.do_not_convert(replica_fn))
    # The replicas interleave: both enter before either leaves.
    self.assertEqual([kind for kind, _ in events],
                     ['enter', 'enter', 'leave', 'after', 'leave', 'after'])
    self.assertEqual(strategy.experimental_local_results(dtypes),
                     (['bfloat16', 'bfloat16'],) * 2)
    self.assertEqual(tf.keras.mixed_precision.global_policy().name, 'float32')


if __name__ == '__main__':
  tf.test.main()
