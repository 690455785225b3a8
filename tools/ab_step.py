"""Measures what a gin change costs the training step, as a ratio from one process.

  python tools/ab_step.py \
    --gin_file=gin/experiments/benchmark_mnv2_deeplabv3.gin \
    --b_gin_param='make_optimizer.optimizer = @tf.train.MomentumOptimizer' \
    --b_gin_param='tf.train.MomentumOptimizer.momentum = 0.9'

Arm A is the experiment (--gin_file, --gin_param); arm B the same with
--b_gin_file and --b_gin_param after it. Each arm's training step is built
as train_and_eval builds it (input pipeline, model, loss, gradients,
update, and the host_call its hook runs; `benchmarks/profile.py`) in a graph and session of its own, then
the two run in turn, --block_steps steps at a time, so that both see the
same load of a shared machine: runs of whole trainers (`tools/benchmark.py
--layer_gin_file`) are minutes apart and their spread hides a few per
cent. Prints B's speed over A's (above 1: B is faster), the median of the
per-block-pair ratios, the op types only one arm has (to see that the
change took effect), and one JSON line.
"""

import datetime
import json
import sys
import tempfile

from absl import app
from absl import flags

from benchmarks import ab
from benchmarks import report
from official_seg import flags as seg_flags

# --gin_file and --gin_param: arm A; --data_dir: both arms' shards.
flags.adopt_module_key_flags(seg_flags)
flags.DEFINE_multi_string('b_gin_file', [],
                          'Gin files arm B adds after arm A\'s.')
flags.DEFINE_multi_string('b_gin_param', [],
                          'Bindings arm B adds after arm A\'s.')
flags.DEFINE_integer('blocks', 10, 'Timed blocks of each arm.')
flags.DEFINE_integer('block_steps', 10, 'Steps of one arm before switching.')
flags.DEFINE_integer('warmup_blocks', 2,
                     'Blocks of each arm run first, not timed.')
flags.mark_flag_as_required('gin_file')
FLAGS = flags.FLAGS


def _build(gin_files, b_gin_params, model_dir):
  """An `ab.Arm` of one configuration; gin is cleared before and after.

  Args:
    gin_files: list of str, the arm's gin files.
    b_gin_params: list of str, bindings after --gin_param (arm B's own).
    model_dir: str, the arm's folder.
  """
  steps = (FLAGS.blocks + FLAGS.warmup_blocks) * FLAGS.block_steps
  return ab.parsed_arm(gin_files, seg_flags.gin_params(
      list(b_gin_params) + [f'TRAIN_STEPS = {steps}']), model_dir)


def main(argv):
  del argv  # Unused.
  if not (FLAGS.b_gin_file or FLAGS.b_gin_param):
    raise app.UsageError('Give arm B a change: --b_gin_file or --b_gin_param.')
  work_dir = tempfile.mkdtemp(prefix='ab-step-')
  arms = [
      _build(FLAGS.gin_file, [], f'{work_dir}/a'),
      _build(FLAGS.gin_file + FLAGS.b_gin_file, FLAGS.b_gin_param,
             f'{work_dir}/b')]
  try:
    result = ab.compare(arms, FLAGS.blocks, FLAGS.block_steps,
                        FLAGS.warmup_blocks)
  finally:
    ab.close(arms)
  result.update({
      'date': datetime.datetime.now().isoformat(timespec='seconds'),
      'command': ' '.join(sys.argv),
      'machine': report.machine(),
  })
  rate_a, rate_b = result['steps_per_second']
  print(f'A {rate_a:.3f} steps/s, B {rate_b:.3f} steps/s: B/A '
        f"{result['ratio']:.4f} (median of block pairs "
        f"{result['median_paired_ratio']:.4f}); only in A: "
        f"{result['only_in_a']}; only in B: {result['only_in_b']}")
  print(json.dumps(result, sort_keys=True))


if __name__ == '__main__':
  app.run(main)
