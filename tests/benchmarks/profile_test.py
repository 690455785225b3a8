"""Tests for profile: op time by op type, from metadata and a tiny step."""

import tensorflow as tf

from benchmarks import profile
# Registers run, which the quickstart experiment binds.
from tests import testing_utils


def _metadata(nodes):
  """A RunMetadata whose CPU ran `nodes`: (label, microseconds) pairs."""
  metadata = tf.compat.v1.RunMetadata()
  device = metadata.step_stats.dev_stats.add(device='/cpu:0')
  for label, micros in nodes:
    device.node_stats.add(node_name=label.split(' ')[0], timeline_label=label,
                          all_end_rel_micros=micros)
  return metadata


class ProfileTest(testing_utils.TinyDataTestCase):

  num_train = 8

  def test_op_seconds_sums_types_and_averages_steps(self):
    first = _metadata([('a/conv = Conv2D(x, k)', 3000),
                       ('b/conv = Conv2D(y, k)', 1000),
                       ('relu = Relu(a/conv)', 500), ('_SOURCE', 10)])
    second = _metadata([('a/conv = Conv2D(x, k)', 2000)])
    seconds = profile.op_seconds([first, second])
    self.assertAllClose(dict(seconds), {'Conv2D': 0.003, 'Relu': 0.00025,
                                        '_SOURCE': 0.000005})
    text = profile.table(seconds, top=1)
    self.assertIn('Conv2D', text)
    self.assertNotIn('Relu', text)
    self.assertIn('92.2%', text)  # 3.0 of 3.255 ms.

  def test_profile_of_a_tiny_step(self):
    testing_utils.parse_tiny_quickstart(self.data_dir)
    seconds = profile.profile(2, self.create_tempdir().full_path,
                              warmup_steps=1, traced_steps=1)
    self.assertGreater(seconds['_MklNativeConv2D'] + seconds['Conv2D'], 0)
    self.assertIn('ResourceApplyAdam', seconds)


if __name__ == '__main__':
  tf.test.main()
