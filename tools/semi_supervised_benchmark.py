"""Compares semi-supervised training with its bounds over seeds (benchmarks/semi_supervised.py).

  python tools/semi_supervised_benchmark.py \
    --gin_file=gin/experiments/quickstart.gin \
    --gin_file=gin/datasets/scarce.gin --data_dir=data/scarce \
    --labeled_split=train_1_16 --unlabeled_split=train \
    --arms=labeled_only,pseudoseg,fixmatch,full --seeds=0,1,2 \
    --train_steps=1000 --work_dir=/tmp/semi_benchmark

Trains each arm once per seed, all at --train_steps, one after the other in
this process; prints per arm the mean, min and max over seeds of the final
mean IoU, the share of the labeled-only to fully supervised gap that each
semi-supervised arm recovers, seconds a step and the pseudo-label monitors;
writes every run's record and the summary as JSON (--output, default
<work_dir>/semi_supervised.json).
"""

import datetime
import json
import os
import sys

from absl import app
from absl import flags

from benchmarks import report
from benchmarks import semi_supervised
# --gin_file (the experiment and its dataset), --gin_param, --data_dir.
from official_seg import command_line
from official_seg import flags as seg_flags

flags.adopt_module_key_flags(seg_flags)
flags.DEFINE_string('labeled_split', None, 'The labeled subset, e.g. '
                    'train_1_16 (make_labeled_subset).')
flags.DEFINE_string('unlabeled_split', 'train', 'The unlabeled pool; the full '
                    'arm trains on its labels.')
flags.DEFINE_list('arms', list(semi_supervised.ARMS),
                  f'Arms to run, some of {",".join(semi_supervised.ARMS)}.')
flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds; each arm runs once each.')
flags.DEFINE_integer('train_steps', None, 'TRAIN_STEPS of every run.')
flags.DEFINE_string('work_dir', None, "Where each run's model dir goes "
                    '(<arm>-seed<seed>); must not hold those runs yet.')
flags.DEFINE_string('output', None, 'JSON file to write; default '
                    '<work_dir>/semi_supervised.json.')
flags.mark_flags_as_required(['gin_file', 'labeled_split', 'train_steps',
                              'work_dir'])
flags.register_validator(
    'arms', lambda arms: bool(arms) and set(arms) <= set(semi_supervised.ARMS),
    f'--arms must name some of {", ".join(semi_supervised.ARMS)}.')
flags.register_validator(
    'seeds', lambda seeds: bool(seeds) and all(s.isdigit() for s in seeds),
    '--seeds must be a comma-separated list of whole numbers.')
flags.register_validator('train_steps', lambda steps: steps and steps >= 1,
                         '--train_steps must be at least 1.')
FLAGS = flags.FLAGS


def main(argv):
  """Runs the benchmark; a used work folder or a changed gin file is a
  ConfigurationError (status 2, see `command_line`)."""
  return command_line.call(_main, argv)


def _main(argv):
  del argv  # Unused.
  spec = semi_supervised.Spec(
      gin_files=FLAGS.gin_file, gin_params=seg_flags.gin_params(),
      labeled_split=FLAGS.labeled_split,
      unlabeled_split=FLAGS.unlabeled_split, arms=FLAGS.arms,
      seeds=[int(s) for s in FLAGS.seeds], train_steps=FLAGS.train_steps)
  started = datetime.datetime.now(datetime.timezone.utc)
  records = semi_supervised.run(spec, FLAGS.work_dir)
  summary = semi_supervised.summarize(records)
  print(semi_supervised.table(summary))
  output = FLAGS.output or os.path.join(FLAGS.work_dir,
                                        'semi_supervised.json')
  with open(output, 'w', encoding='utf-8') as stream:
    json.dump({'started': started.isoformat(timespec='seconds'),
               'command': ' '.join(sys.argv), 'machine': report.machine(),
               'train_steps': spec.train_steps, 'records': records,
               'summary': summary}, stream, indent=1, sort_keys=True)
  print(f'Wrote {output}')


if __name__ == '__main__':
  app.run(main)
