"""Runs the benchmark's trainers in subprocesses; reports them side by side."""

import os
import platform
import statistics
import subprocess
import sys

from benchmarks import measure
from benchmarks import runner

_RATE_KEYS = ('input_images_per_sec', 'train_images_per_sec',
              'eval_images_per_sec')
_OPTIONAL_KEYS = ('mean_iou', 'checkpoint_secs', 'checkpoint_cost')
# Fields that are the same in every repeat of one trainer.
_FIXED_KEYS = ('trainer', 'batch_size', 'crop_size', 'precision',
               'train_steps', 'flops_per_step', 'uncounted_flop_ops',
               'train_mean_iou', 'bytes_per_step', 'uncounted_byte_ops')


class RunnerError(RuntimeError):
  """A benchmark runner process failed; the message carries its output."""


def machine():
  """What the figures were measured on: CPU model, cores, bf16 instructions."""
  model, flags = platform.processor() or platform.machine(), set()
  if os.path.exists('/proc/cpuinfo'):
    with open('/proc/cpuinfo') as cpuinfo:
      for line in cpuinfo:
        key, _, value = line.partition(':')
        if key.strip() == 'model name':
          model = value.strip()
        elif key.strip() == 'flags':
          flags = set(value.split())
  bf16 = sorted(f for f in flags if f.startswith('amx') or 'bf16' in f)
  return {'cpu': model, 'cores': os.cpu_count(), 'bf16_instructions': bf16}


def run_trainer(trainer, runner_args, timeout_secs=None):
  """Runs `benchmarks.runner` for one trainer; its result dict.

  Args:
    trainer: one of `runner.TRAINERS`.
    runner_args: list of str, the runner's other flags.
    timeout_secs: optional float.

  Raises:
    RunnerError: the runner exited with an error or printed no result.
  """
  command = [sys.executable, '-m', runner.__name__,
             f'--trainer={trainer}'] + list(runner_args)
  process = subprocess.run(command, capture_output=True, text=True,
                           timeout=timeout_secs, check=False)
  try:
    return measure.parse_result(process.stdout)
  except ValueError as error:
    tail = '\n'.join(process.stderr.splitlines()[-30:])
    raise RunnerError(f'The {trainer} benchmark failed (exit code '
                      f'{process.returncode}): {error}\n{tail}') from error


def median_result(results):
  """One result from repeats: the median of each rate, the peak of memory.

  Args:
    results: non-empty list of result dicts of one trainer.

  Returns:
    dict; 'repeats' holds each repeat's training images/s.
  """
  merged = {k: results[0][k] for k in _FIXED_KEYS if k in results[0]}
  for key in _RATE_KEYS + _OPTIONAL_KEYS:
    if key in results[0]:
      merged[key] = statistics.median(r[key] for r in results)
  merged['peak_rss_mb'] = max(r['peak_rss_mb'] for r in results)
  merged['loss_curve'] = results[0]['loss_curve']
  merged['repeats'] = [r['train_images_per_sec'] for r in results]
  return merged


def add_derived(result, peaks_gflops, bandwidth_gbps=None):
  """Adds the achieved GFLOP/s of training and its fraction of the peak.

  Args:
    result: a (median) result dict.
    peaks_gflops: dict of precision ('float32', 'mixed_bfloat16') to the
      machine's matmul GFLOP/s in that precision's compute type.
    bandwidth_gbps: optional float, the machine's memory GB/s
      (`memory.memory_bandwidth_gbps`).

  Returns:
    `result`, with 'train_gflops', 'fraction_of_peak' and
    'input_over_train' (how many times training's consumption the input
    pipeline delivers); with `bandwidth_gbps` and a 'bytes_per_step',
    'memory_bound_step_secs' (the step's bytes at that bandwidth) and
    'fraction_of_memory_bound' (that time over the measured step's).
  """
  steps_per_sec = result['train_images_per_sec'] / result['batch_size']
  result['train_gflops'] = result['flops_per_step'] * steps_per_sec / 1e9
  result['fraction_of_peak'] = (result['train_gflops'] /
                                peaks_gflops[result['precision']])
  result['input_over_train'] = (result['input_images_per_sec'] /
                                result['train_images_per_sec'])
  if bandwidth_gbps and result.get('bytes_per_step'):
    result['memory_bound_step_secs'] = (result['bytes_per_step'] /
                                        (bandwidth_gbps * 1e9))
    result['fraction_of_memory_bound'] = (
        result['memory_bound_step_secs'] * steps_per_sec)
  return result


def ratios(ours, peer):
  """official_seg over the Model Garden: rate ratios and the mIoU gap.

  With repeats, 'train_images_per_sec' is the ratio of the medians and
  'train_images_per_sec_paired' the median of each repeat's ratio: the
  trainers alternate, so a repeat's two runs are minutes apart while the
  first and last repeats are many, and a shared machine's load drifts
  between them.
  """
  out = {key: ours[key] / peer[key] for key in _RATE_KEYS}
  out['mean_iou_difference'] = ours['mean_iou'] - peer['mean_iou']
  pairs = list(zip(ours.get('repeats', ()), peer.get('repeats', ())))
  if len(pairs) > 1:
    out['train_images_per_sec_paired'] = statistics.median(
        mine / theirs for mine, theirs in pairs)
  return out


def table(results, ratio=None):
  """A short text table of the trainers' results (and their ratio)."""
  rows = [('', 'input img/s', 'train img/s', 'eval img/s', 'mIoU',
           'GFLOP/s', '% peak', '% mem limit', 'peak RSS MB')]
  for r in results:
    rows.append((r['trainer'], f"{r['input_images_per_sec']:.1f}",
                 f"{r['train_images_per_sec']:.2f}",
                 f"{r['eval_images_per_sec']:.2f}", f"{r['mean_iou']:.3f}",
                 f"{r['train_gflops']:.1f}",
                 f"{100 * r['fraction_of_peak']:.1f}",
                 (f"{100 * r['fraction_of_memory_bound']:.1f}"
                  if 'fraction_of_memory_bound' in r else ''),
                 f"{r['peak_rss_mb']:.0f}"))
  if ratio:
    rows.append(('ratio', f"{ratio['input_images_per_sec']:.2f}x",
                 f"{ratio['train_images_per_sec']:.2f}x",
                 f"{ratio['eval_images_per_sec']:.2f}x",
                 f"{ratio['mean_iou_difference']:+.3f}", '', '', '', ''))
  if ratio and 'train_images_per_sec_paired' in ratio:
    rows.append(('paired', '',
                 f"{ratio['train_images_per_sec_paired']:.2f}x", '', '', '',
                 '', '', ''))
  widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
  lines = ['  '.join(cell.rjust(w) for cell, w in zip(row, widths))
           for row in rows]
  lines += [f"{r['trainer']}: a checkpoint takes {r['checkpoint_secs']:.2f} s, "
            f"{100 * r['checkpoint_cost']:.2f}% of training time"
            for r in results if 'checkpoint_cost' in r]
  return '\n'.join(lines)
