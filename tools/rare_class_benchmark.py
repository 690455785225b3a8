"""Compares losses and rare-class crops on a rare class over seeds (benchmarks/rare_class.py).

  make_rare_dataset --output_dir=data/rare
  python tools/rare_class_benchmark.py --data_dir=data/rare \
    --train_steps=2000 --work_dir=runs/rare_benchmark

Trains each arm (--arms; default cross_entropy, class_weights, focal, dice,
ce_dice, lovasz, crops; parts joined by '+' make more, e.g.
ce_dice+crops) once per seed (--seeds, default 0,1,2), all at
--train_steps, one after the other in this process, each then evaluated at
its final checkpoint. The experiment is --gin_file (default the quickstart
on the rare set: gin/experiments/quickstart.gin, gin/datasets/rare.gin).
Each run's record joins --output (JSON lines, default
<work_dir>/rare_class.jsonl) as it ends: the same command again skips the
recorded runs, so a stopped benchmark resumes, and with every run recorded
it only prints the table. Prints a markdown table: per arm the mean and
spread over seeds of the mean IoU and of the rare class's IoU (--rare_class,
default the class with the fewest training pixels), their differences from
cross_entropy, its Dice and Boundary IoU, and the wall time of a run.
"""

import os

from absl import app
from absl import flags

from benchmarks import rare_class
from benchmarks import rare_class_report
# --gin_file (the experiment and its dataset), --gin_param, --data_dir.
from official_seg import command_line
from official_seg import flags as seg_flags

DEFAULT_GIN_FILES = ('experiments/quickstart.gin', 'datasets/rare.gin')

flags.adopt_module_key_flags(seg_flags)
flags.DEFINE_list('arms', list(rare_class.ARMS),
                  f'Arms to run: some of {",".join(rare_class.ARMS)}, or '
                  'parts of them joined by "+".')
flags.DEFINE_list('seeds', ['0', '1', '2'], 'Seeds; each arm runs once each.')
flags.DEFINE_integer('train_steps', None, 'TRAIN_STEPS of every run.')
flags.DEFINE_string('work_dir', None, "Where each run's model dir goes "
                    '(<arm>-seed<seed>).')
flags.DEFINE_string('output', None, 'The JSON-lines file of the records; '
                    'default <work_dir>/rare_class.jsonl.')
flags.DEFINE_string('rare_class', None, 'The class whose IoU, Dice and '
                    'Boundary IoU are reported; default the one with the '
                    'fewest labelled pixels in the training split.')
flags.mark_flags_as_required(['train_steps', 'work_dir'])
flags.register_validator(
    'seeds', lambda seeds: bool(seeds) and all(s.isdigit() for s in seeds),
    '--seeds must be a comma-separated list of whole numbers.')
flags.register_validator('arms', bool, '--arms must name an arm.')
flags.register_validator('train_steps', lambda steps: steps and steps >= 1,
                         '--train_steps must be at least 1.')
FLAGS = flags.FLAGS


def main(argv):
  """Runs the benchmark; an arm of no part, a used work folder or output of
  another benchmark is a ConfigurationError (status 2, `command_line`)."""
  return command_line.call(_main, argv)


def _main(argv):
  del argv  # Unused.
  spec = rare_class.Spec(
      gin_files=FLAGS.gin_file or list(DEFAULT_GIN_FILES),
      gin_params=seg_flags.gin_params(),
      arms=list(dict.fromkeys(FLAGS.arms)),
      seeds=list(dict.fromkeys(int(s) for s in FLAGS.seeds)),
      train_steps=FLAGS.train_steps, rare_class=FLAGS.rare_class)
  output = FLAGS.output or os.path.join(FLAGS.work_dir, 'rare_class.jsonl')
  records = rare_class.run(spec, FLAGS.work_dir, output)
  print(rare_class_report.report(records))
  print(f'Records: {output}')


if __name__ == '__main__':
  app.run(main)
