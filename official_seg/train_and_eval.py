"""The train_and_eval binary: infrastructure flags, gin parsing, then the library."""

import sys

from absl import app
from absl import flags
from absl import logging

import tensorflow as tf

from official_seg.evaluation import results
from official_seg.runtime import experiment
from official_seg.runtime import gin_config

FLAGS = flags.FLAGS

flags.DEFINE_multi_string(
    'gin_file', [], 'gin file to parse, repeatable; later files win. Shipped '
    'files may be named relative to the package gin/ folder.')
flags.DEFINE_multi_string(
    'gin_param', [], 'gin binding, repeatable, e.g. "TRAIN_STEPS=300"; '
    'applied after every gin file.')
flags.DEFINE_string('model_dir', None, 'Where checkpoints, summaries, the '
                    'operative config and eval results go.')
flags.DEFINE_enum('mode', 'train_and_eval', list(experiment.MODES),
                  'What to run.')
flags.DEFINE_string('checkpoint', None,
                    'Checkpoint to evaluate in --mode=eval; default latest.')
flags.mark_flag_as_required('model_dir')


def _parse_gin_or_exit():
  """Parses gin before any work starts; a bad config exits with status 2."""
  try:
    gin_config.parse(FLAGS.gin_file, FLAGS.gin_param)
  except (FileNotFoundError, ValueError, KeyError, SyntaxError,
          TypeError) as error:
    logging.error('Invalid gin configuration: %s', error)
    print(f'Invalid gin configuration: {error}', file=sys.stderr)
    sys.exit(2)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  if not FLAGS.gin_file:
    raise app.UsageError('Give at least one --gin_file, e.g. '
                         '--gin_file=gin/experiments/quickstart.gin')
  logging.set_verbosity(logging.INFO)
  # TensorFlow's logger has its own handler; propagating to absl's too would
  # print every line twice.
  tf.get_logger().propagate = False
  _parse_gin_or_exit()
  try:
    record = experiment.run(FLAGS.mode, FLAGS.model_dir,
                            checkpoint_path=FLAGS.checkpoint)
  except FileNotFoundError as error:
    # Missing data, checkpoints or files: the message says which and where.
    print(f'Error: {error}', file=sys.stderr)
    sys.exit(1)
  if record:
    print(results.format_table(record))


def run():
  """Console-script entry point."""
  app.run(main)


if __name__ == '__main__':
  run()
