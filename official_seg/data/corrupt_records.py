"""Corrupt records: decoded while dropping those that fail, with a count of the dropped."""

from absl import logging
import tensorflow as tf

from official_seg.data import tfexample

_END = 'official_seg:end-of-records'


def _report(condition, skipped, when, name, output_stream):
  """Writes "Skipped N corrupt example(s) <when> reading <name>" if `condition`.

  Returns:
    `skipped` (int64 scalar), after the line is written when it is.
  """
  def write():
    printed = tf.print('Skipped', skipped, f'corrupt example(s) {when} reading',
                       name, output_stream=output_stream)
    with tf.control_dependencies([printed]):
      return tf.identity(skipped)

  return tf.cond(condition, write, lambda: tf.identity(skipped))


def skip_corrupt_examples(records, decode_fn, name,
                          output_stream=logging.warning):
  """Decodes records, dropping those that fail, and reports how many failed.

  tf.data's `ignore_errors` drops failed elements silently except for one log
  line each; counting is done here from the gaps in the record index.

  Args:
    records: dataset of serialized examples, in a deterministic order.
    decode_fn: maps a serialized example to a dict of tensors.
    name: str, the data named in the report, e.g. "split 'train' of DATA".
    output_stream: where `tf.print` writes the report: a log function, or
      'file://PATH'.

  Returns:
    A dataset of decoded examples. Each time examples were dropped, a line
    "Skipped N corrupt example(s) so far reading <name>" is written; a finite
    dataset ends with "... N in total" when any were dropped.
  """
  end = tf.constant(_END)
  placeholder = tf.constant(tfexample.placeholder_example())

  def decode(index, record):
    is_end = tf.equal(record, end)
    # The end marker decodes as a valid placeholder so that it survives.
    return index, is_end, decode_fn(tf.where(is_end, placeholder, record))

  def count(state, element):
    skipped, expected = state
    index, is_end, example = element
    skipped += index - expected
    # tf.print runs inside tf.data, under tf.cond (the input pipeline is
    # built without AutoGraph).
    skipped = _report(tf.logical_and(index > expected, tf.logical_not(is_end)),
                      skipped, 'so far', name, output_stream)
    skipped = _report(tf.logical_and(is_end, skipped > 0), skipped,
                      'in total', name, output_stream)
    return (skipped, index + 1), (is_end, example)

  zero = tf.constant(0, tf.int64)
  decoded = records.concatenate(tf.data.Dataset.from_tensors(end)).enumerate()
  decoded = decoded.map(decode, num_parallel_calls=tf.data.AUTOTUNE,
                        deterministic=True).ignore_errors(log_warning=True)
  decoded = decoded.scan((zero, zero), count)
  return decoded.filter(lambda is_end, _: tf.logical_not(is_end)).map(
      lambda _, example: example)
