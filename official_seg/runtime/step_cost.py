"""A configuration's training step measured on this machine: seconds a step and the process's peak memory."""

import tempfile

from official_seg import validation
from official_seg.runtime import dry_run
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import gin_config
from official_seg.runtime import run_config as run_config_lib


def measure(gin_files, gin_params):
  """Builds the configuration's training step as --dry_run does and runs it.

  The config is parsed from a clean state and cleared after
  (`gin_config.parsed_alone`), so that one process measures several in
  turn. The peak is the process's resident size while the steps ran: what
  earlier measurements left allocated counts too, so later ones err on the
  large side.

  Args:
    gin_files: list of str, the configuration's gin files.
    gin_params: list of str, bindings after them.

  Returns:
    (seconds a training step, peak resident bytes).

  Raises:
    validation.RunError: this system reports no resident sizes (/proc).
  """
  with gin_config.parsed_alone(gin_files, gin_params), \
      tempfile.TemporaryDirectory(prefix='step-cost-') as folder:
    config = run_config_lib.build_run_config(folder)
    built = estimator_lib.build_estimator(config)
    _, _, seconds, meter, _ = dry_run.count_and_time(
        built, config, built.train_batch_size)
  if meter.peak is None:
    raise validation.RunError(
        'This system reports no resident memory sizes (/proc/self/status): '
        'a step\'s memory cannot be measured here.')
  return seconds, meter.peak
