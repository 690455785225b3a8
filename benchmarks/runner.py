"""Runs one trainer's benchmark in this process and prints its result line.

  python -m benchmarks.runner --trainer=official_seg \
    --gin_file=gin/experiments/benchmark_mnv2_deeplabv3.gin --model_dir=/tmp/b

tools/benchmark.py shares the experiment flags (`define_flags`) and, through
`report.run_trainer`, starts one such process per trainer, so that each has
its own peak memory, its own TensorFlow state (graph mode for Estimator,
eager for the Model Garden's Orbit loop) and nothing cached from the other.
Only `main` reads flags; `run` and `run_time_to_miou` take plain arguments.
"""

from absl import app
from absl import flags
import gin

from benchmarks import measure
# --gin_file, --gin_param and --data_dir, defined once for every tool.
from official_seg import flags as seg_flags

TRAINERS = ('official_seg', 'model_garden')
FLAGS = flags.FLAGS


def run(trainer, gin_files, gin_params, model_dir, train_steps, warmup_steps,
        input_batches=50, eval_batches=None, peer_train_mean_iou=False):
  """Measures one trainer on a gin experiment in this process.

  Args:
    trainer: str, one of `TRAINERS`.
    gin_files: list of str, the experiment's gin files.
    gin_params: list of str, bindings after the files.
    model_dir: str, an empty folder for this run.
    train_steps: int, training steps (TRAIN_STEPS is set to it).
    warmup_steps: int, training steps not timed.
    input_batches: int, input batches timed.
    eval_batches: optional int, evaluation batches; None reads the split.
    peer_train_mean_iou: bool, Model Garden only: compute its training mean
      IoU every step, as its configurations do by default.

  Returns:
    dict of the measurements; `measure.emit` prints it.

  Raises:
    ValueError: `trainer` is not one of `TRAINERS`.
  """
  args = (gin_files, gin_params, model_dir, train_steps, warmup_steps,
          input_batches, eval_batches)
  # Each trainer's imports stay out of the other's process.
  if trainer == 'official_seg':
    from benchmarks import ours  # pylint: disable=g-import-not-at-top
    return ours.run(*args)
  if trainer == 'model_garden':
    from benchmarks import peer  # pylint: disable=g-import-not-at-top
    return peer.run(*args, train_mean_iou=peer_train_mean_iou)
  raise ValueError(f'Unknown trainer {trainer!r}; use one of {TRAINERS}.')


def run_time_to_miou(trainer, gin_files, gin_params, model_dir, target,
                     eval_every_steps, max_steps=None,
                     peer_train_mean_iou=False):
  """Trains one trainer until its evaluation reaches `target`; its result.

  Args:
    trainer: 'official_seg' or 'model_garden' (the latter on its registered
      recipe; see `ttm_peer`).
    gin_files, gin_params: the experiment.
    model_dir: str, an empty folder for this run.
    target: float, the mean IoU to reach.
    eval_every_steps: int, training steps between evaluations.
    max_steps: optional int, the most steps trained; None takes the
      experiment's TRAIN_STEPS.
    peer_train_mean_iou: bool, Model Garden only: its training mean IoU
      every step, as its recipes compute it.

  Returns:
    dict; `measure.emit` prints it.

  Raises:
    ValueError: an unknown trainer.
  """
  args = (gin_files, gin_params, model_dir, target, eval_every_steps,
          max_steps)
  # Each trainer's imports stay out of the other's process.
  if trainer == 'official_seg':
    from benchmarks import ttm_ours  # pylint: disable=g-import-not-at-top
    return ttm_ours.run(*args)
  if trainer == 'model_garden':
    from benchmarks import ttm_peer  # pylint: disable=g-import-not-at-top
    return ttm_peer.run(*args, train_mean_iou=peer_train_mean_iou)
  raise ValueError(f'Unknown trainer {trainer!r}.')


def define_flags():
  """Defines the experiment flags the runner shares with tools/benchmark.py.

  With seg_flags' --gin_file (required here), --gin_param and --data_dir.
  """
  flags.adopt_module_key_flags(seg_flags)
  flags.DEFINE_integer('train_steps', 100, 'Training steps (TRAIN_STEPS).')
  flags.DEFINE_integer('warmup_steps', 10, 'Training steps not timed.')
  flags.DEFINE_integer('input_batches', 50, 'Input batches timed.')
  flags.DEFINE_integer('eval_batches', None,
                       'Evaluation batches; default: the whole split.')
  flags.DEFINE_bool('peer_train_mean_iou', False,
                    'Model Garden only: compute its training mean IoU every '
                    'step, as its configurations do by default.')
  flags.DEFINE_float('time_to_miou', None,
                     'Instead of throughput: train until the whole eval '
                     'split reaches this mean IoU, in (0, 1] '
                     '(benchmarks/time_to_miou.py).')
  flags.DEFINE_integer('eval_every_steps', 250,
                       'With --time_to_miou: training steps between '
                       'evaluations.')
  flags.DEFINE_integer('max_steps', None,
                       'With --time_to_miou: the most training steps; '
                       "default the experiment's TRAIN_STEPS.")
  flags.mark_flag_as_required('gin_file')


def main(argv):
  del argv  # Unused.
  if not FLAGS.model_dir:
    raise app.UsageError('--model_dir is required: an empty folder.')
  gin.clear_config()
  if FLAGS.time_to_miou is not None:
    measure.emit(run_time_to_miou(
        FLAGS.trainer, FLAGS.gin_file, seg_flags.gin_params(), FLAGS.model_dir,
        FLAGS.time_to_miou, FLAGS.eval_every_steps, FLAGS.max_steps,
        FLAGS.peer_train_mean_iou))
    return
  measure.emit(run(FLAGS.trainer, FLAGS.gin_file, seg_flags.gin_params(),
                   FLAGS.model_dir, FLAGS.train_steps, FLAGS.warmup_steps,
                   FLAGS.input_batches, FLAGS.eval_batches,
                   FLAGS.peer_train_mean_iou))


def define_binary_flags():
  """The binary's flags: those of `define_flags`, --trainer, --model_dir."""
  define_flags()
  flags.DEFINE_enum('trainer', TRAINERS[0], TRAINERS,
                    'Which trainer to measure.')
  flags.DEFINE_string('model_dir', None, 'An empty folder for this run.')


if __name__ == '__main__':
  define_binary_flags()
  app.run(main)
