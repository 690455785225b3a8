"""pytest set-up shared by all tests."""

from absl import flags
import tensorflow as tf


def pytest_configure(config):
  # pytest-xdist hands files to workers by their number of tests, most first,
  # unless told not to: SLOWEST_FIRST's order (below) is the one kept.
  if hasattr(config.option, 'loadscopereorder'):
    config.option.loadscopereorder = False
  # absl flags count as parsed, as under absltest's own runner.
  flags.FLAGS.mark_as_parsed()
  # Two logical CPUs let tests build two-replica strategies; it must happen
  # before TensorFlow initialises its devices.
  tf.config.set_logical_device_configuration(
      tf.config.list_physical_devices('CPU')[0],
      [tf.config.LogicalDeviceConfiguration()] * 2)


# The longest test files, longest first. `make test` hands whole files to two
# workers in collection order (pytest-xdist's --dist=loadfile, its reordering
# by test count turned off above), so starting these first keeps one long
# file from running alone at the end. The order
# comes from the `--durations=30` list that every run prints.
SLOWEST_FIRST = (
    'tests/experiments_dry_run_test.py',
    'tests/modeling/quantized_test.py',
    'tests/modeling/backbones_test.py',
    'tests/commands/import_deeplab_checkpoint_test.py',
    'tests/commands/launch_local_cluster_test.py',
    'tests/quickstart_e2e_test.py',
    'tests/runtime/object_store_test.py',
    'tests/reliability_test.py',
    'tests/runtime/gin_config_test.py',
    'tests/runtime/experiment_test.py',
    'tests/benchmarks/semi_supervised_test.py',
    'tests/runtime/preemption_test.py',
    'tests/train_and_eval_test.py',
    'tests/commands/cross_validate_test.py',
    'tests/sigmoid_e2e_test.py',
    'tests/training/warm_start_test.py',
    'tests/semi_supervised/step_test.py',
    'tests/runtime/model_fn_test.py',
    'tests/modeling/model_test.py',
    'tests/deeplab/resnet_beta_test.py',
    'tests/export/saved_model_test.py',
    'tests/runtime/estimator_test.py',
    'tests/tensorboard_test.py',
    'tests/runtime/run_config_test.py',
    'tests/runtime/dry_run_test.py',
    'tests/commands/plan_test.py',
)


def pytest_collection_modifyitems(session, config, items):
  del session, config  # Unused.
  rank = {path: index for index, path in enumerate(SLOWEST_FIRST)}
  # A stable sort: each file keeps its tests in their own order.
  items.sort(key=lambda item: rank.get(item.nodeid.split('::')[0],
                                       len(SLOWEST_FIRST)))
