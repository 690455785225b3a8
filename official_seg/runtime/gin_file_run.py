"""One gin file trained, evaluated and exported in a model dir, in-process, as the binary runs it."""

import contextlib

from absl import logging
import tensorflow as tf

from official_seg.runtime import config_checks
from official_seg.runtime import experiment
from official_seg.runtime import gin_config
from official_seg.runtime import preemption


@contextlib.contextmanager
def progress_logged():
  """The training's progress (loss, steps a second) logged, here and in the binary.

  At INFO, TensorFlow's logger on its own handler alone (through absl's too,
  each line would print twice); as they were after, for the caller.
  """
  verbosity, propagate = logging.get_verbosity(), tf.get_logger().propagate
  logging.set_verbosity(logging.INFO)
  tf.get_logger().propagate = False
  try:
    yield
  finally:
    logging.set_verbosity(verbosity)
    tf.get_logger().propagate = propagate


def train_and_eval(gin_file, model_dir):
  """`train_and_eval --gin_file=<gin_file> --model_dir=<model_dir>`, here.

  The file is parsed alone (it includes everything the run reads) and
  checked as the binary checks it; SIGTERM saves and exits as in the binary.
  The caller has checked that `model_dir` can be written
  (`storage.check_model_dir`).

  Args:
    gin_file: str, the experiment's one gin file.
    model_dir: str.

  Returns:
    The final evaluation's record (`experiment.run`).

  Raises:
    validation.ConfigurationError: the file's settings are wrong.
  """
  with progress_logged(), gin_config.parsed_alone([gin_file], []):
    config_checks.check_configuration([gin_file], [])
    preemption.install()
    return experiment.run('train_and_eval', model_dir)
