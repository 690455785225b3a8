"""Prints where an experiment's training step spends its time, by op type.

  python tools/profile_step.py \
    --gin_file=gin/experiments/benchmark_r50_deeplabv3plus.gin \
    [--gin_file=gin/platforms/bfloat16.gin] [--gin_param=...]

Builds the step as train_and_eval does (input pipeline, model, loss,
gradients, update, and the host_call its hook runs), runs it a few times, then traces steps with
TensorFlow's step statistics and sums the time of each op type.
"""

import tempfile

from absl import app
from absl import flags

from benchmarks import profile
# Registers run and the other configurables every experiment binds.
from official_seg import flags as seg_flags
from official_seg.runtime import gin_config

flags.adopt_module_key_flags(seg_flags)
flags.DEFINE_integer('warmup_steps', 3, 'Steps run before tracing.')
flags.DEFINE_integer('traced_steps', 2, 'Steps traced and averaged.')
flags.DEFINE_integer('top', 15, 'Op types listed.')
flags.mark_flag_as_required('gin_file')
FLAGS = flags.FLAGS


def main(argv):
  del argv  # Unused.
  seg_flags.parse_gin()
  seconds = profile.profile(
      gin_config.binding('build_estimator.train_batch_size'),
      tempfile.mkdtemp(prefix='profile-'), FLAGS.warmup_steps,
      FLAGS.traced_steps)
  print(profile.table(seconds, FLAGS.top))


if __name__ == '__main__':
  app.run(main)
