"""Runs one trainer's benchmark in this process and prints its result line.

  python -m benchmarks.runner --trainer=official_seg \
    --gin_file=gin/experiments/benchmark_mnv2_deeplabv3.gin --model_dir=/tmp/b

tools/benchmark.py shares these flags and starts one such process per trainer,
so that each has its own peak memory, its own TensorFlow state (graph mode for Estimator, eager
for the Model Garden's Orbit loop) and nothing cached from the other.
"""

from absl import app
from absl import flags

from benchmarks import measure

flags.DEFINE_enum('trainer', 'official_seg', ['official_seg', 'model_garden'],
                  'Which trainer to measure.')
flags.DEFINE_multi_string('gin_file', None, 'Gin files of the experiment.')
flags.DEFINE_multi_string('gin_param', [], 'Gin bindings after the files.')
flags.DEFINE_string('model_dir', None, 'An empty folder for this run.')
flags.DEFINE_integer('train_steps', 100, 'Training steps (TRAIN_STEPS).')
flags.DEFINE_integer('warmup_steps', 10, 'Training steps not timed.')
flags.DEFINE_integer('input_batches', 50, 'Input batches timed.')
flags.DEFINE_integer('eval_batches', None,
                     'Evaluation batches; default: the whole split.')
flags.DEFINE_bool('peer_train_mean_iou', False,
                  'Model Garden only: compute its training mean IoU every '
                  'step, as its configurations do by default.')
flags.mark_flag_as_required('gin_file')
FLAGS = flags.FLAGS


def main(argv):
  del argv  # Unused.
  if not FLAGS.model_dir:
    raise app.UsageError('--model_dir is required: an empty folder.')
  args = (FLAGS.gin_file, FLAGS.gin_param, FLAGS.model_dir, FLAGS.train_steps,
          FLAGS.warmup_steps, FLAGS.input_batches, FLAGS.eval_batches)
  if FLAGS.trainer == 'official_seg':
    from benchmarks import ours  # pylint: disable=g-import-not-at-top
    result = ours.run(*args)
  else:
    from benchmarks import peer  # pylint: disable=g-import-not-at-top
    result = peer.run(*args, train_mean_iou=FLAGS.peer_train_mean_iou)
  measure.emit(result)


if __name__ == '__main__':
  app.run(main)
