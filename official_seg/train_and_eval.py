"""The train_and_eval binary: infrastructure flags, gin parsing, then the library."""

import sys
import traceback

from absl import app
from absl import flags
from absl import logging
import gin
import tensorflow as tf

from official_seg import flags as seg_flags
from official_seg import validation
from official_seg.data import storage
from official_seg.evaluation import results
from official_seg.runtime import config_checks
from official_seg.runtime import experiment
from official_seg.runtime import preemption
from official_seg.runtime import run_config

FLAGS = flags.FLAGS

# --gin_file, --gin_param and --data_dir, shared with tools/.
flags.adopt_module_key_flags(seg_flags)
flags.DEFINE_string('model_dir', None, 'Where checkpoints, summaries, the '
                    'operative config and eval results go.')
flags.DEFINE_enum('mode', 'train_and_eval', list(experiment.MODES),
                  'What to run.')
flags.DEFINE_string('checkpoint', None,
                    'Checkpoint to evaluate in --mode=eval or export in '
                    '--mode=export; default latest.')
flags.DEFINE_bool('dry_run', False, 'Check the data, the batch split and the '
                  'model, print the operative config, and exit.')
flags.DEFINE_string('tpu', None, 'TPU name or grpc:// address to run on with '
                    'gin/platforms/tpu.gin; without it, TPUEstimator runs on '
                    'the CPU.')
flags.DEFINE_string('tpu_zone', None, 'GCE zone of --tpu; default: detected.')
flags.DEFINE_string('gcp_project', None,
                    'Cloud project of --tpu; default: detected.')
flags.DEFINE_float('storage_timeout_secs', 120, 'How long the write probe '
                   'of --model_dir may take before the run stops: object-store '
                   'clients retry an unreachable endpoint for minutes.')
flags.mark_flag_as_required('model_dir')


def _exit_invalid(error):
  """Exits with status 2: a setting, not the program, is at fault."""
  message = validation.message(error)
  logging.error('Invalid configuration: %s', message)
  print(f'Invalid configuration:\n{message}', file=sys.stderr)
  sys.exit(2)


def _parse_gin_or_exit():
  """Parses and checks gin before any work starts; a bad config exits 2.

  Only our own `ConfigurationError` is a bad config: any other error (an
  imported module's, say) is a bug and keeps its traceback.
  """
  try:
    # It sets the object-store defaults before anything reads a gs:// path
    # (gin files, data or model dir).
    seg_flags.parse_gin(finalize=False)
    config_checks.check_configuration(FLAGS.gin_file, seg_flags.gin_params())
    config_checks.check_platform(FLAGS.tpu, FLAGS.tpu_zone, FLAGS.gcp_project)
    config_checks.check_checkpoint(FLAGS.checkpoint)
  except validation.ConfigurationError as error:
    _exit_invalid(error)
  gin.finalize()


def _model_dir_or_exit():
  """Creates --model_dir and writes a probe file in it, before any work.

  A model dir that cannot be created or written (a read-only disk, a missing
  bucket, no permission, an unreachable store) exits 1, naming it.
  """
  try:
    storage.check_writable(FLAGS.model_dir, FLAGS.storage_timeout_secs)
  except (tf.errors.OpError, TimeoutError) as error:
    reason = getattr(error, 'message', None) or str(error)
    print(f'Error: --model_dir={FLAGS.model_dir} cannot be created or '
          f'written: {reason}', file=sys.stderr)
    sys.exit(1)


def _dry_run_or_exit():
  """--dry_run: checks and reports; a problem exits with status 1 or 2."""
  try:
    print(experiment.run(FLAGS.mode, FLAGS.model_dir, check_only=True))
  except validation.ConfigurationError as error:
    _exit_invalid(error)
  except experiment.USER_ERRORS as error:
    print(f'Dry run failed: {validation.message(error)}', file=sys.stderr)
    sys.exit(1)


def _exit_preempted(preempted):
  """Exits with `preemption.EXIT_STATUS`: rerunning the command resumes."""
  logging.warning('Preempted: %s Exiting with status %d; run the same '
                  'command again to resume.', preempted,
                  preemption.EXIT_STATUS)
  sys.exit(preemption.EXIT_STATUS)


def _exit_bug():
  """Exits with status 1 after the traceback and what to report."""
  traceback.print_exc()
  files = ' '.join(f'--gin_file={f}' for f in FLAGS.gin_file)
  params = ' '.join(f'--gin_param="{p}"' for p in FLAGS.gin_param)
  print(f'This is a bug in official_seg, not a mistake in your settings. '
        f'Please report it with the traceback above and the configuration: '
        f'{files} {params}, the gin files they name, and '
        f'{FLAGS.model_dir}/operative_config-*.gin if the run wrote one.',
        file=sys.stderr)
  sys.exit(1)


def main(argv):
  try:
    _main(argv)
  except (app.UsageError, SystemExit, KeyboardInterrupt):
    raise
  except Exception:  # pylint: disable=broad-except
    _exit_bug()


def _main(argv):
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
  if FLAGS.dry_run:  # It writes nothing, the model dir included.
    _dry_run_or_exit()
    return
  _model_dir_or_exit()
  preemption.install()
  try:
    record = experiment.run(
        FLAGS.mode, FLAGS.model_dir, checkpoint_path=FLAGS.checkpoint,
        tpu_address=run_config.TpuAddress(FLAGS.tpu, FLAGS.tpu_zone,
                                          FLAGS.gcp_project))
  except preemption.Preempted as preempted:
    _exit_preempted(preempted)
  except validation.ConfigurationError as error:
    _exit_invalid(error)
  except experiment.USER_ERRORS as error:
    # Missing or corrupt data, files or checkpoints: the message says which
    # and where, and what to do; a stack trace would add nothing.
    print(f'Error: {validation.message(error)}', file=sys.stderr)
    sys.exit(1)
  except tf.errors.InvalidArgumentError as error:
    message = experiment.failed_check(error)
    if message is None:
      raise
    print(f'Error: {message}', file=sys.stderr)
    sys.exit(1)
  if record:
    print(results.format_table(record))


def run():
  """Console-script entry point."""
  app.run(main)


if __name__ == '__main__':
  run()
