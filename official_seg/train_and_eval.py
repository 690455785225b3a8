"""The train_and_eval binary: infrastructure flags, gin parsing, then the library."""

from absl import app
from absl import flags
import gin

from official_seg import command_line
from official_seg import flags as seg_flags
from official_seg.data import storage
from official_seg.evaluation import results
from official_seg.runtime import config_checks
from official_seg.runtime import experiment
from official_seg.runtime import gin_file_run
from official_seg.runtime import preemption
from official_seg.runtime import run_config

FLAGS = flags.FLAGS

# --gin_file, --gin_param and --data_dir, shared with the commands and tools/.
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
flags.DEFINE_float('storage_timeout_secs', storage.PROBE_TIMEOUT_SECS,
                   'How long the write probe of --model_dir may take before '
                   'the run stops: object-store clients retry an unreachable '
                   'endpoint for minutes.')
flags.mark_flag_as_required('model_dir')


def _parse_gin():
  """Parses and checks gin before any work starts.

  Raises:
    validation.ConfigurationError: a bad config (status 2); any other error
      (an imported module's, say) is a bug and keeps its traceback.
  """
  # It sets the object-store defaults before anything reads a gs:// path
  # (gin files, data or model dir).
  seg_flags.parse_gin(finalize=False)
  config_checks.check_configuration(FLAGS.gin_file, seg_flags.gin_params())
  config_checks.check_platform(FLAGS.tpu, FLAGS.tpu_zone, FLAGS.gcp_project)
  config_checks.check_checkpoint(FLAGS.checkpoint)
  gin.finalize()


def _bug_report():
  """The last line after a bug's traceback: what to report."""
  files = ' '.join(f'--gin_file={f}' for f in FLAGS.gin_file or ())
  params = ' '.join(f'--gin_param="{p}"' for p in FLAGS.gin_param)
  return (f'This is a bug in official_seg, not a mistake in your settings. '
          f'Please report it with the traceback above and the configuration: '
          f'{files} {params}, the gin files they name, and '
          f'{FLAGS.model_dir}/operative_config-*.gin if the run wrote one.')


def main(argv):
  """Runs the binary; errors map to exit statuses in `command_line`."""
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  if not FLAGS.gin_file:
    raise app.UsageError('Give at least one --gin_file, e.g. '
                         '--gin_file=gin/experiments/quickstart.gin')
  with gin_file_run.progress_logged():
    _run()


def _run():
  """Parses and checks the settings, then runs --mode (or its dry run)."""
  _parse_gin()
  if FLAGS.dry_run:  # It writes nothing, the model dir included.
    print(experiment.run(FLAGS.mode, FLAGS.model_dir, check_only=True))
    return
  storage.check_model_dir(FLAGS.model_dir, FLAGS.storage_timeout_secs)
  preemption.install()
  record = experiment.run(
      FLAGS.mode, FLAGS.model_dir, checkpoint_path=FLAGS.checkpoint,
      tpu_address=run_config.TpuAddress(FLAGS.tpu, FLAGS.tpu_zone,
                                        FLAGS.gcp_project))
  if record:
    print(results.format_table(record))


def run():
  """Console-script entry point."""
  command_line.run_binary(main, _bug_report)


if __name__ == '__main__':
  run()
