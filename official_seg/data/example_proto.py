"""Reads features of a serialized tf.train.Example with decode_proto, failing cleanly."""

import tensorflow as tf

# Hand-written rather than tf.io.parse_single_example: on bytes that are not
# an Example, ParseExample's error quotes the raw bytes, and TensorFlow's
# Python layer then fails to decode its own message (UnicodeDecodeError)
# instead of raising an error a person can act on. decode_proto reports
# malformed input as a plain DataLossError and reads only the fields used.


def _decode(messages, message_type, fields, types):
  """decode_proto over a 1-D batch; returns (sizes [N, F], values list)."""
  # decode_proto refuses an empty batch: decode one extra empty message and
  # drop it.
  sizes, values = tf.io.decode_proto(
      tf.concat([messages, ['']], 0), message_type, fields, types)
  return sizes[:-1], [value[:-1] for value in values]


def _first(values, sizes, default):
  """The first element of each row, or `default` where the field is absent."""
  padded = tf.concat([values, tf.fill([tf.shape(values)[0], 1], default)], 1)
  return tf.where(sizes > 0, padded[:, 0], default)


def _entries(serialized):
  """(keys [N] string, features [N] serialized `tf.train.Feature`)."""
  _, (features,) = _decode(tf.reshape(serialized, [1]), 'tensorflow.Example',
                           ['features'], [tf.string])
  sizes, (entries,) = _decode(tf.reshape(features, [-1]),
                              'tensorflow.Features', ['feature'], [tf.string])
  entries = tf.RaggedTensor.from_tensor(entries, lengths=sizes[:, 0])
  sizes, (keys, values) = _decode(
      entries.flat_values, 'tensorflow.Features.FeatureEntry',
      ['key', 'value'], [tf.string, tf.string])
  return _first(keys, sizes[:, 0], ''), _first(values, sizes[:, 1], '')


def _lookup(keys, column, key, default):
  """The value of `key` (the last entry wins, as in a proto map) or default."""
  index = tf.where(tf.equal(keys, key))[:, 0]
  present = tf.size(index) > 0
  last = tf.reduce_max(tf.concat([index, [0]], 0))
  value = tf.gather(tf.concat([column, [default]], 0),
                    tf.where(present, last, tf.size(column, tf.int64)))
  return value, present


def parse(serialized, string_features, int64_features):
  """Reads single-valued features of one serialized `tf.train.Example`.

  Args:
    serialized: scalar tf.string.
    string_features: dict of key to default (bytes) for bytes_list features.
    int64_features: dict of key to default (int) for int64_list features.

  Returns:
    (values, present): dicts of key to the scalar value (the default when
    the feature is missing or empty) and to a scalar bool saying whether the
    example had it.

  Raises:
    tf.errors.DataLossError: at run time, when `serialized` is not a
      well-formed Example.
  """
  keys, features = _entries(serialized)
  sizes, (bytes_lists, int64_lists) = _decode(
      features, 'tensorflow.Feature', ['bytes_list', 'int64_list'],
      [tf.string, tf.string])
  bytes_sizes, (strings,) = _decode(_first(bytes_lists, sizes[:, 0], ''),
                                    'tensorflow.BytesList', ['value'],
                                    [tf.string])
  int_sizes, (ints,) = _decode(_first(int64_lists, sizes[:, 1], ''),
                               'tensorflow.Int64List', ['value'], [tf.int64])
  string_column = _first(strings, bytes_sizes[:, 0], '')
  int_column = _first(ints, int_sizes[:, 0], tf.constant(0, tf.int64))
  values, present = {}, {}
  for key, default in string_features.items():
    values[key], present[key] = _lookup(keys, string_column, key, default)
  for key, default in int64_features.items():
    values[key], present[key] = _lookup(
        keys, int_column, key, tf.constant(default, tf.int64))
  return values, present
