"""Measures an experiment's input, training and eval speed, and the peer's.

  python tools/benchmark.py \
    --gin_file=gin/experiments/benchmark_mnv2_deeplabv3.gin --peer

Measures, after warm-up: input-pipeline images/s, training images/s,
evaluation images/s, mean IoU after --train_steps, peak resident memory, and
the training step's FLOP/s (FLOPs counted from its graph) as a fraction of
this machine's dense matmul peak (measured here, float32 and bfloat16), and
the step's memory-bound limit: the bytes its ops read and write, counted from
its graph, at this machine's measured memory bandwidth, over the step's time.
--peer runs the same experiment through the Model Garden's own trainer
(SemanticSegmentationTask and its Orbit loop) and prints the ratios;
--layer_gin_file instead measures the experiment with those gin files layered
on (e.g. gin/semi_supervised/pseudoseg.gin), or with the --layer_gin_param
bindings alone, against the experiment alone, and
prints how many times longer its training step takes. Each
trainer runs in a process of its own, one after the other, --repeats times;
the medians count; their model dirs go under --model_dir (default a temporary
folder). Prints a table and one JSON line (also appended to --output).

--time_to_miou=X instead trains until the whole validation split reaches
mean IoU X (evaluated every --eval_every_steps, at most --max_steps), and
reports the wall time to X, training and evaluation apart, with the curve;
with --peer, the same for the Model Garden's registered recipe of the
backbone, and time_to_miou_ratio (ours over the peer's).
"""

import datetime
import json
import os
import sys
import tempfile

from absl import app
from absl import flags
import tensorflow as tf

from benchmarks import measure
from benchmarks import memory
from benchmarks import report
from benchmarks import runner
from benchmarks import time_to_miou
from official_seg import flags as seg_flags

# The experiment flags (gin files and bindings, steps, batches, peer
# options), passed on to each runner process; --data_dir as a DATA_DIR
# binding.
runner.define_flags()
flags.adopt_module_key_flags(runner)
flags.adopt_module_key_flags(seg_flags)
flags.DEFINE_string('model_dir', None,
                    "Where each run's model dir goes; default a temporary "
                    'folder.')
flags.DEFINE_bool('peer', False, 'Also measure the Model Garden trainer.')
flags.DEFINE_multi_string(
    'layer_gin_file', [], 'Also measure official_seg with these gin files '
    'after the experiment\'s (and --layer_gin_param), against the '
    'experiment alone.')
flags.DEFINE_multi_string('layer_gin_param', [],
                          'Bindings of the --layer_gin_file configuration.')
flags.DEFINE_integer('repeats', 1, 'Runs of each trainer, alternating.')
flags.DEFINE_string('output', None, 'A file to append the JSON line to.')
flags.register_multi_flags_validator(
    ['peer', 'layer_gin_file', 'layer_gin_param'],
    lambda f: not (f['peer'] and (f['layer_gin_file'] or f['layer_gin_param'])),
    '--peer and --layer_gin_file/--layer_gin_param are separate comparisons; '
    'pass one.')
flags.register_validator(
    'eval_batches', lambda value: value is None or value >= 2,
    '--eval_batches must be at least 2: the first batch is not timed.')
flags.register_validator(
    'warmup_steps', lambda value: value >= 1,
    '--warmup_steps must be at least 1: the first step builds the graph.')
flags.register_validator(
    'time_to_miou', lambda value: value is None or 0 < value <= 1,
    '--time_to_miou must be a mean IoU in (0, 1].')
flags.register_validator(
    'eval_every_steps', lambda value: value >= 1,
    '--eval_every_steps must be at least 1.')
flags.register_validator(
    'max_steps', lambda value: value is None or value >= 1,
    '--max_steps must be at least 1.')
flags.register_multi_flags_validator(
    ['time_to_miou', 'layer_gin_file'],
    lambda f: f['time_to_miou'] is None or not f['layer_gin_file'],
    '--time_to_miou compares trainers (--peer), not --layer_gin_file.')
FLAGS = flags.FLAGS


def _runner_args(model_dir, layered=False):
  params = seg_flags.gin_params()
  files = list(FLAGS.gin_file)
  if layered:
    files += FLAGS.layer_gin_file
    params += FLAGS.layer_gin_param
  args = [f'--gin_file={f}' for f in files]
  args += [f'--gin_param={p}' for p in params]
  args += [f'--model_dir={model_dir}', f'--train_steps={FLAGS.train_steps}',
           f'--warmup_steps={FLAGS.warmup_steps}',
           f'--input_batches={FLAGS.input_batches}']
  if FLAGS.eval_batches:
    args.append(f'--eval_batches={FLAGS.eval_batches}')
  if FLAGS.peer_train_mean_iou:
    args.append('--peer_train_mean_iou')
  if FLAGS.time_to_miou is not None:
    args += [f'--time_to_miou={FLAGS.time_to_miou}',
             f'--eval_every_steps={FLAGS.eval_every_steps}']
    args += [f'--max_steps={FLAGS.max_steps}'] if FLAGS.max_steps else []
  return args


def _layered():
  return bool(FLAGS.layer_gin_file or FLAGS.layer_gin_param)


def _configurations():
  """(name, trainer, layered) of each configuration measured."""
  if _layered():
    layers = '+'.join([os.path.basename(f) for f in FLAGS.layer_gin_file] +
                      ['layer_gin_param'] * bool(FLAGS.layer_gin_param))
    return [('official_seg', 'official_seg', False),
            (f'official_seg+{layers}', 'official_seg', True)]
  trainers = runner.TRAINERS if FLAGS.peer else runner.TRAINERS[:1]
  return [(trainer, trainer, False) for trainer in trainers]


def _measure_trainers(work_dir):
  configurations = _configurations()
  runs = {name: [] for name, _, _ in configurations}
  for repeat in range(FLAGS.repeats):
    for name, trainer, layered in configurations:
      model_dir = os.path.join(work_dir, f'{name}-{repeat}')
      print(f'Running {name} ({repeat + 1}/{FLAGS.repeats}) in {model_dir}',
            flush=True)
      result = report.run_trainer(trainer, _runner_args(model_dir, layered))
      runs[name].append(dict(result, trainer=name))
  return [report.median_result(runs[name]) for name, _, _ in configurations]


def _step_cost(results):
  """How many times longer the layered configuration's step takes."""
  base, layered = results
  return base['train_images_per_sec'] / layered['train_images_per_sec']


def _write(line):
  print(json.dumps(line, sort_keys=True))
  if FLAGS.output:
    with open(FLAGS.output, 'a') as stream:
      stream.write(json.dumps(line, sort_keys=True) + '\n')


def _time_to_miou(work_dir):
  """Each trainer to --time_to_miou, one process each; one JSON line."""
  results = []
  for name, trainer, _ in _configurations():
    model_dir = os.path.join(work_dir, f'{name}-time-to-miou')
    print(f'Training {name} to mean IoU {FLAGS.time_to_miou} in '
          f'{model_dir}', flush=True)
    results.append(dict(report.run_trainer(trainer, _runner_args(model_dir)),
                        trainer=name))
  ratio = time_to_miou.ratio(*results) if len(results) == 2 else None
  print(time_to_miou.table(results, ratio))
  _write({
      'date': datetime.datetime.now().isoformat(timespec='seconds'),
      'command': ' '.join(sys.argv),
      'machine': report.machine(),
      'time_to_miou': FLAGS.time_to_miou,
      'results': results,
      'time_to_miou_ratio': ratio,
  })


def main(argv):
  del argv  # Unused.
  if FLAGS.time_to_miou is not None:
    _time_to_miou(FLAGS.model_dir or
                  tempfile.mkdtemp(prefix='time-to-miou-'))
    return
  peaks = {'float32': measure.matmul_peak_gflops(tf.float32),
           'mixed_bfloat16': measure.matmul_peak_gflops(tf.bfloat16)}
  bandwidth = memory.memory_bandwidth_gbps()
  # Each run's model dir goes under --model_dir.
  work_dir = FLAGS.model_dir or tempfile.mkdtemp(prefix='benchmark-')
  results = [report.add_derived(r, peaks, bandwidth)
             for r in _measure_trainers(work_dir)]
  layered = _layered()
  ratio = (report.ratios(*results) if len(results) == 2 and not layered
           else None)
  line = {
      'date': datetime.datetime.now().isoformat(timespec='seconds'),
      'command': ' '.join(sys.argv),
      'machine': report.machine(),
      'matmul_peak_gflops': peaks,
      'memory_bandwidth_gbps': bandwidth,
      'results': results,
      'ratio': ratio,
  }
  if layered:
    line['layered_step_cost'] = _step_cost(results)
  print(report.table(results, ratio))
  if layered:
    print(f"{results[1]['trainer']}: a training step takes "
          f"{line['layered_step_cost']:.2f}x the experiment's own.")
  print(f"Matmul peak: {peaks['float32']:.0f} GFLOP/s float32, "
        f"{peaks['mixed_bfloat16']:.0f} bfloat16; memory bandwidth "
        f'{bandwidth:.1f} GB/s')
  _write(line)


if __name__ == '__main__':
  app.run(main)
