"""Times the training step with each loss of gin/losses/ against cross-entropy, from one process.

  python tools/benchmark_losses.py \
    --gin_file=gin/experiments/benchmark_mnv2_deeplabv3.gin \
    [--losses=focal,dice,ce_dice,lovasz,tversky] [--blocks=10] [--step=loss]

Builds the experiment's training step (input pipeline, model, loss,
gradients, update; `benchmarks/ab.py`, as tools/ab_step.py builds its two
arms) once with DeepLab's cross-entropy (`Components.loss =
@segmentation_loss`) and once per loss, with `gin/losses/<loss>.gin` after
--gin_file and --gin_param after both. With --step=loss an arm is the loss
and its gradient alone, on float32 random logits of the training batch at
1/--logits_stride of the crop (the model's output) against random labels
of the crop. Then each arm runs --block_steps steps in turn, --blocks
times, so that all see the same load of a shared machine. Prints each
loss's steps per second, its speed over cross-entropy's (below 1: the loss
makes the step slower), the median of the per-round ratios, and one JSON
line.
"""

import datetime
import json
import os
import statistics
import sys
import tempfile

from absl import app
from absl import flags
import gin
import numpy as np
import tensorflow as tf

from benchmarks import ab
from benchmarks import report
from official_seg import flags as seg_flags
from official_seg.data import dataset_info
from official_seg.runtime import components
from official_seg.runtime import gin_config

LOSSES = ('focal', 'dice', 'ce_dice', 'lovasz', 'tversky')
BASELINE = 'cross_entropy'

# --gin_file and --gin_param: the experiment of every arm.
flags.adopt_module_key_flags(seg_flags)
flags.DEFINE_list('losses', list(LOSSES),
                  'Files of gin/losses/ (without .gin) to time against '
                  'cross-entropy.')
flags.DEFINE_integer('blocks', 10, 'Timed blocks of each arm.')
flags.DEFINE_integer('block_steps', 5, 'Steps of one arm before switching.')
flags.DEFINE_integer('warmup_blocks', 2,
                     'Blocks of each arm run first, not timed.')
flags.DEFINE_enum('step', 'model', ['model', 'loss'],
                  'model: the whole training step; loss: the loss and its '
                  'gradient alone.')
flags.DEFINE_integer('logits_stride', 4, 'With --step=loss: the crop over '
                     'the logits\' size (4 for DeepLabV3+).')
flags.mark_flag_as_required('gin_file')
flags.register_validator(
    'losses', lambda names: names and set(names) <= set(LOSSES),
    f'--losses must name some of {", ".join(LOSSES)}.')
FLAGS = flags.FLAGS


def _settings(name):
  """(gin files, bindings after --gin_param) of the arm of loss `name`."""
  steps = (FLAGS.blocks + FLAGS.warmup_blocks) * FLAGS.block_steps
  extra = [f'TRAIN_STEPS = {steps}']
  files = list(FLAGS.gin_file)
  if name == BASELINE:
    extra.append('Components.loss = @segmentation_loss')
  else:
    files.append(os.path.join(gin_config.gin_dir(), 'losses', f'{name}.gin'))
  return files, extra


def _model_arm(name, work_dir):
  """The `ab.Arm` of the experiment's training step with loss `name`."""
  files, extra = _settings(name)
  return ab.parsed_arm(files, seg_flags.gin_params(extra),
                       os.path.join(work_dir, name))


def loss_arm(loss, task, batch_size, crop_size, logits_stride):
  """An `ab.Arm` whose step is `loss`, its gradient and an update of the logits.

  Args:
    loss: loss(logits, labels, ignore_label), as `Components.labeled_loss`.
    task: the `DatasetInfo` (classes, ignore label).
    batch_size: int.
    crop_size: [height, width] of the labels.
    logits_stride: int, the labels' size over the logits'.
  """
  rng = np.random.default_rng(0)
  labels = rng.integers(0, task.num_classes, [batch_size, *crop_size, 1])
  labels[rng.random(labels.shape) < 0.05] = task.ignore_label
  logits_size = [-(-side // logits_stride) for side in crop_size]
  graph = tf.Graph()
  with graph.as_default():
    logits = tf.Variable(rng.normal(size=[batch_size, *logits_size,
                                          task.num_classes]), dtype=tf.float32)
    value = loss(logits, tf.constant(labels, tf.int32), task.ignore_label)
    # An update that uses the gradient: a step whose result nothing uses
    # would be pruned by grappler.
    step = logits.assign_sub(1e-3 * tf.gradients(value, logits)[0]).op
    session = tf.compat.v1.Session(graph=graph)
    session.run(tf.compat.v1.global_variables_initializer())
  return ab.Arm(graph, session, step)


def _loss_arm(name):
  """The `ab.Arm` of loss `name` alone; gin is cleared before and after."""
  files, extra = _settings(name)
  gin.clear_config()
  seg_flags.parse_gin(files, extra)
  try:
    return loss_arm(components.Components().labeled_loss,
                    dataset_info.DatasetInfo(),
                    gin_config.binding('build_estimator.train_batch_size'),
                    gin_config.binding('Parser.crop_size', scope='train'),
                    FLAGS.logits_stride)
  finally:
    gin.clear_config()


def against_baseline(names, seconds, arms, block_steps):
  """Each loss's speed over the baseline's, from the arms' block times.

  Args:
    names: list of str, the baseline first.
    seconds: list per arm of its timed blocks' seconds (`ab.block_seconds`).
    arms: the `ab.Arm`s, in the order of `names`.
    block_steps: int, steps in a block.

  Returns:
    dict: 'steps_per_second' {name: float}; for each loss under 'losses':
    'ratio' (its rate over the baseline's), 'paired_ratios' (baseline block
    time over the loss's, per round), 'median_paired_ratio', and
    'new_op_types' (the op types its step has and the baseline's lacks).
  """
  rates = {name: len(times) * block_steps / sum(times)
           for name, times in zip(names, seconds)}
  result = {'steps_per_second': rates, 'losses': {}}
  for name, times, arm in zip(names[1:], seconds[1:], arms[1:]):
    paired = [base / own for base, own in zip(seconds[0], times)]
    result['losses'][name] = {
        'ratio': rates[name] / rates[names[0]],
        'paired_ratios': paired,
        'median_paired_ratio': statistics.median(paired),
        'new_op_types': sorted(arm.op_types - arms[0].op_types),
    }
  return result


def _print(result):
  rates = result['steps_per_second']
  print(f'{BASELINE}: {rates[BASELINE]:.3f} steps/s')
  for name, row in result['losses'].items():
    print(f"{name}: {rates[name]:.3f} steps/s, over {BASELINE} "
          f"{row['ratio']:.4f} (median of rounds "
          f"{row['median_paired_ratio']:.4f}); new op types: "
          f"{', '.join(row['new_op_types']) or 'none'}")
  print(json.dumps(result, sort_keys=True))


def main(argv):
  del argv  # Unused.
  if FLAGS.blocks < 1 or FLAGS.block_steps < 1:
    raise app.UsageError('--blocks and --block_steps must be at least 1.')
  work_dir = tempfile.mkdtemp(prefix='benchmark-losses-')
  names = [BASELINE] + list(dict.fromkeys(FLAGS.losses))
  if FLAGS.step == 'model':
    arms = [_model_arm(name, work_dir) for name in names]
  else:
    arms = [_loss_arm(name) for name in names]
  try:
    ab.block_seconds(arms, FLAGS.warmup_blocks, FLAGS.block_steps)
    seconds = ab.block_seconds(arms, FLAGS.blocks, FLAGS.block_steps)
  finally:
    ab.close(arms)
  result = against_baseline(names, seconds, arms, FLAGS.block_steps)
  result.update({
      'date': datetime.datetime.now().isoformat(timespec='seconds'),
      'command': ' '.join(sys.argv),
      'machine': report.machine(),
  })
  _print(result)


if __name__ == '__main__':
  app.run(main)
