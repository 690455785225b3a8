"""The Keras dtype policy the model_fn builds its layers in, shared by a strategy's replicas."""

import contextlib
import threading

import tensorflow as tf


class _Holders:
  """The model_fn calls inside `keras_policy`, and the policy they replaced."""
  lock = threading.Lock()
  count = 0
  previous = None


@contextlib.contextmanager
def keras_policy(name):
  """Sets Keras's global dtype policy while any model_fn call is in the block.

  Keras's own policy_scope is private; layers read the global policy when
  they are constructed, which happens inside the model_fn. A strategy calls
  the model_fn once per replica in threads that take turns, each pausing
  where the replicas meet (an all-reduce): the first call to enter sets the
  policy and the last to leave restores it, so every replica's layers are
  built under it and none leaves it set.

  Args:
    name: str, a Keras policy name ('float32', 'mixed_bfloat16', ...).

  Yields:
    None, with the policy set.

  Raises:
    RuntimeError: another policy is held by a call still in its block.
  """
  with _Holders.lock:
    if not _Holders.count:
      _Holders.previous = tf.keras.mixed_precision.global_policy()
      tf.keras.mixed_precision.set_global_policy(name)
    elif tf.keras.mixed_precision.global_policy().name != name:
      raise RuntimeError(f'A model_fn in {name!r} started while another ran '
                         'in another policy.')
    _Holders.count += 1
  try:
    yield
  finally:
    with _Holders.lock:
      _Holders.count -= 1
      if not _Holders.count:
        tf.keras.mixed_precision.set_global_policy(_Holders.previous)
