"""Training summaries, registered explicitly and written through one host_call."""

import gin
import tensorflow as tf


@gin.configurable(denylist=['model_dir', 'global_step', 'scalars'])
def host_call(model_dir, global_step, scalars, every_n_steps=50):
  """Builds the (fn, tensors) pair of a TPUEstimatorSpec `host_call`.

  The same pair serves TPU (the fn runs on the host, fed by outfeed) and
  CPU/GPU (`TPUEstimatorSpec.as_estimator_spec` runs it after each step), so
  summaries take one path everywhere.

  Args:
    model_dir: str, where the TensorBoard events go.
    global_step: int64 scalar tensor.
    scalars: dict of summary name to scalar tensor.
    every_n_steps: int, write one summary every this many steps.

  Returns:
    (host_fn, tensors) for `TPUEstimatorSpec(host_call=...)`.
  """
  names = sorted(scalars)
  # Outfeed needs a leading dimension on every tensor.
  tensors = [tf.reshape(global_step, [1])]
  tensors += [tf.reshape(tf.cast(scalars[n], tf.float32), [1]) for n in names]

  def host_fn(step, *values):
    step = step[0]
    writer = tf.summary.create_file_writer(model_dir, max_queue=every_n_steps)
    with writer.as_default(), tf.summary.record_if(
        tf.equal(step % every_n_steps, 0)):
      for name, value in zip(names, values):
        tf.summary.scalar(name, value[0], step=step)
      return tf.compat.v1.summary.all_v2_summary_ops()

  return host_fn, tensors
