"""Measures what the training summaries at their defaults cost, as a ratio.

  python tools/summary_cost.py --gin_file=gin/experiments/quickstart.gin \
    --train_steps=1050 --warmup_steps=20 --repeats=2

Trains the experiment on a fresh synthetic dataset (or --data_dir) twice per
repeat, alternating in this one process: with the summaries at their
defaults (scalars and rates every `host_call.every_n_steps`, training
pictures every `host_call.image_summary_steps`), and with them off
(`host_call.image_summary_steps = 0`, scalars never written). Both arms keep
one checkpoint cadence. The steps after --warmup_steps are timed; the
default 1,050 steps include one picture write at step 1,000. Prints steps
per second of each arm (medians) and their ratio, and one JSON line.
"""

import datetime
import json
import statistics
import sys
import tempfile

from absl import app
from absl import flags
import gin

from benchmarks import ours
from benchmarks import report
from official_seg.data import synthetic
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import gin_config
from official_seg.runtime import run_config as run_config_lib

flags.DEFINE_multi_string('gin_file', ['experiments/quickstart.gin'],
                          'Gin files of the experiment.')
flags.DEFINE_multi_string('gin_param', [], 'Gin bindings after the files.')
flags.DEFINE_string('data_dir', None,
                    'Shard folder; default a synthetic dataset written to a '
                    'temporary folder.')
flags.DEFINE_integer('train_steps', 1050, 'Steps of each training run.')
flags.DEFINE_integer('warmup_steps', 20, 'Steps not timed.')
flags.DEFINE_integer('repeats', 2, 'Runs of each arm, alternating.')
FLAGS = flags.FLAGS

# The summaries off: no pictures, scalars written never in the run.
_OFF = ['host_call.image_summary_steps = 0',
        'host_call.every_n_steps = 1000000000']
# Both arms: no checkpoint inside the timed steps.
_COMMON = ['build_run_config.save_checkpoints_steps = 1000000000',
           'make_exporters.latest = False', 'export_best.enabled = False']


def _steps_per_second(data_dir, extra, work_dir):
  """Trains one arm in a fresh model dir; steps per second after warm-up."""
  gin.clear_config()
  gin_config.parse(FLAGS.gin_file, list(FLAGS.gin_param) + _COMMON + extra + [
      f'DATA_DIR = {data_dir!r}', f'TRAIN_STEPS = {FLAGS.train_steps}'])
  model_dir = tempfile.mkdtemp(dir=work_dir)
  built = estimator_lib.build_estimator(
      run_config_lib.build_run_config(model_dir))
  timer = ours.StepTimer(FLAGS.warmup_steps)
  built.estimator.train(built.train_input_fn, max_steps=FLAGS.train_steps,
                        hooks=[timer])
  return timer.steps_per_second()


def main(argv):
  del argv  # Unused.
  work_dir = tempfile.mkdtemp(prefix='summary-cost-')
  data_dir = FLAGS.data_dir
  if not data_dir:
    data_dir = f'{work_dir}/data'
    synthetic.write_dataset(data_dir, {'train': 64, 'val': 8})
  arms = {'defaults': [], 'off': []}
  for repeat in range(FLAGS.repeats):
    for arm, extra in (('off', _OFF), ('defaults', [])):
      arms[arm].append(_steps_per_second(data_dir, extra, work_dir))
      print(f'repeat {repeat + 1}: {arm} {arms[arm][-1]:.3f} steps/s',
            flush=True)
  medians = {arm: statistics.median(values) for arm, values in arms.items()}
  line = {
      'date': datetime.datetime.now().isoformat(timespec='seconds'),
      'command': ' '.join(sys.argv),
      'machine': report.machine(),
      'steps_per_second': arms,
      'ratio_defaults_to_off': medians['defaults'] / medians['off'],
  }
  print(f"summaries at defaults: {medians['defaults']:.3f} steps/s, off: "
        f"{medians['off']:.3f} steps/s, ratio "
        f"{line['ratio_defaults_to_off']:.4f}")
  print(json.dumps(line, sort_keys=True))


if __name__ == '__main__':
  app.run(main)
