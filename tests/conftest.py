"""pytest set-up shared by all tests."""

from absl import flags
import tensorflow as tf


def pytest_configure(config):
  del config  # Unused.
  # absl flags count as parsed, as under absltest's own runner.
  flags.FLAGS.mark_as_parsed()
  # Two logical CPUs let tests build two-replica strategies; it must happen
  # before TensorFlow initialises its devices.
  tf.config.set_logical_device_configuration(
      tf.config.list_physical_devices('CPU')[0],
      [tf.config.LogicalDeviceConfiguration()] * 2)
