"""Time of sliding-window inference against whole-image inference, over its pixels.

  python tools/benchmark_tiling.py --height=1536 --width=2048 --window=513
  python tools/benchmark_tiling.py --height=3072 --width=4096 --window=513 \
    --peak_memory
  python tools/benchmark_tiling.py --model_dir=/tmp/quickstart --window=65

The quickstart model (gin/experiments/quickstart.gin, then --gin_param;
untrained weights: time does not depend on them) labels one random image
whole, and in windows at each overlap of --overlaps and blending of
--blendings, all arms in one graph and session of this process; each arm
runs once in turn, --rounds times (`benchmarks/ab.py`), so that all see the
same load of a shared machine. Prints, for each windowed arm, `pixel_ratio`
(the windows' pixels over the image's), `time_ratio` (its time over the
whole image's, median of the rounds' ratios) and `over_pixels`
(time_ratio / pixel_ratio: 1 when a window pixel costs what an image pixel
does), then one JSON line. With --peak_memory it instead runs the whole
image and the first windowed arm each in a process of its own and prints
their peak resident memory. With --model_dir (a trained quickstart run) it
evaluates that model's eval split whole and windowed and prints both mean
IoUs.
"""

import datetime
import fractions
import json
import resource
import statistics
import subprocess
import sys

from absl import app
from absl import flags

from official_seg import flags as seg_flags

# --gin_param: bindings after the quickstart experiment's.
flags.adopt_module_key_flags(seg_flags)
flags.DEFINE_integer('height', 1536, 'Image height.')
flags.DEFINE_integer('width', 2048, 'Image width.')
flags.DEFINE_integer('window', 513, 'Window side (both ways).')
flags.DEFINE_list('overlaps', ['0', '1/3', '1/2'], 'Overlaps of windows, '
                  'shares of the window: stride = window - floor(window * '
                  'overlap) (1/3 is the default stride).')
flags.DEFINE_list('blendings', ['uniform', 'gaussian'], 'Blendings to time.')
flags.DEFINE_integer('window_batch_size', 4, 'Windows per model call.')
flags.DEFINE_integer('rounds', 5, 'Timed rounds, each arm once a round, '
                     'after one round not timed.')
flags.DEFINE_bool('peak_memory', False, 'Peak resident memory of the whole '
                  'image and of the first windowed arm, each in a process '
                  'of its own, instead of times.')
flags.DEFINE_string('model_dir', None, 'A trained quickstart run: compare '
                    'the mean IoU of its eval split whole and windowed.')
flags.DEFINE_enum('arm', None, ['whole', 'windowed'], 'Internal: run one arm '
                  'in this process and print its peak memory as JSON.')
FLAGS = flags.FLAGS


def _parse_quickstart(extra=()):
  from official_seg.runtime import gin_config  # pylint: disable=g-import-not-at-top
  import gin  # pylint: disable=g-import-not-at-top
  gin.clear_config()
  gin_config.parse(['experiments/quickstart.gin'],
                   ["DATA_DIR = '/nonexistent'"] + list(FLAGS.gin_param) +
                   list(extra), finalize=False)


def stride(window, overlap):
  """The stride of windows of side `window` overlapping by `overlap`."""
  return window - int(window * fractions.Fraction(overlap))


def pixel_ratio(size, window, step):
  """Pixels of the windows over the image's, windows placed as tiling does.

  Args:
    size: (height, width) of the image.
    window: int, the window side (cut to the image).
    step: int, the stride.
  """
  total = 1
  for length in size:
    side = min(window, length)
    count = -(-max(length - side, 0) // min(step, side)) + 1
    total *= count * side / length
  return total


def _arms():
  """[(name, InferenceOptions settings)], the whole image first."""
  arms = [('whole', {})]
  for overlap in FLAGS.overlaps:
    for blending in FLAGS.blendings:
      arms.append((f'overlap={overlap},{blending}', dict(
          window_size=[FLAGS.window] * 2,
          window_stride=[stride(FLAGS.window, overlap)] * 2,
          window_blending=blending,
          window_batch_size=FLAGS.window_batch_size)))
  return arms


def _label_ops(arms):
  """One graph and session labelling one image in each arm; [ab.Arm]."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from benchmarks import ab  # pylint: disable=g-import-not-at-top
  from official_seg.modeling import inference  # pylint: disable=g-import-not-at-top
  from official_seg.modeling import model as model_lib  # pylint: disable=g-import-not-at-top
  _parse_quickstart()
  graph = tf.Graph()
  with graph.as_default():
    model = model_lib.build_model(num_classes=4)
    images = tf.constant(np.random.default_rng(0).normal(
        size=(1, FLAGS.height, FLAGS.width, 3)).astype(np.float32))
    ops = [tf.argmax(inference.predict_probabilities(
        model, images, inference.InferenceOptions(**settings)), -1).op
           for _, settings in arms]
    session = tf.compat.v1.Session(graph=graph)
    session.run(tf.compat.v1.global_variables_initializer())
  return [ab.Arm(graph, session, op) for op in ops]


def time_arms():
  """Each windowed arm's pixel ratio, time ratio and their ratio.

  Returns:
    dict: 'whole_seconds' (median), and under 'windowed' for each arm its
    'pixel_ratio', 'seconds' (median), 'time_ratio' (median of the rounds'
    windowed over whole), 'paired_ratios' and 'over_pixels'.
  """
  from benchmarks import ab  # pylint: disable=g-import-not-at-top
  arms = _arms()
  runs = _label_ops(arms)
  try:
    ab.block_seconds(runs, 1, 1)
    seconds = ab.block_seconds(runs, FLAGS.rounds, 1)
  finally:
    runs[0].session.close()
  result = {'whole_seconds': statistics.median(seconds[0]), 'windowed': {}}
  for (name, settings), times in zip(arms[1:], seconds[1:]):
    paired = [own / whole for own, whole in zip(times, seconds[0])]
    pixels = pixel_ratio((FLAGS.height, FLAGS.width), FLAGS.window,
                         settings['window_stride'][0])
    time_ratio = statistics.median(paired)
    result['windowed'][name] = {
        'pixel_ratio': pixels, 'seconds': statistics.median(times),
        'time_ratio': time_ratio, 'paired_ratios': paired,
        'over_pixels': time_ratio / pixels}
  return result


def _peak_arm(arm):
  """Labels the image once whole or windowed; returns the peak memory."""
  arms = _arms()
  run = _label_ops([arms[0] if arm == 'whole' else arms[1]])[0]
  run.session.run(run.train_op)
  peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  return {'arm': arm, 'peak_mib': peak_kib / 1024.0}


def _child(arm):
  command = [sys.executable, __file__, f'--arm={arm}'] + [
      f'--{name}={getattr(FLAGS, name)}' for name in
      ('height', 'width', 'window', 'window_batch_size')] + [
          f'--overlaps={",".join(FLAGS.overlaps)}',
          f'--blendings={",".join(FLAGS.blendings)}'] + [
              f'--gin_param={param}' for param in FLAGS.gin_param]
  output = subprocess.run(command, check=True, capture_output=True,
                          text=True).stdout
  return json.loads(output.strip().splitlines()[-1])


def _mean_ious(model_dir):
  """Mean IoU of the eval split, whole and windowed, in this process."""
  from official_seg.runtime import estimator as estimator_lib  # pylint: disable=g-import-not-at-top
  from official_seg.runtime import run_config as run_config_lib  # pylint: disable=g-import-not-at-top
  results = {}
  for arm, extra in (('whole', []),
                     ('windowed', [f'WINDOW_SIZE = [{FLAGS.window}, '
                                   f'{FLAGS.window}]'])):
    _parse_quickstart(['DATA_DIR = %s' % json.dumps(_data_dir(model_dir))]
                      + extra)
    estimator, _, eval_fn = estimator_lib.build_estimator(
        run_config_lib.build_run_config(model_dir))[:3]
    results[arm] = float(estimator.evaluate(eval_fn, steps=None,
                                            name=arm)['mean_iou'])
  return results


def _data_dir(model_dir):
  """The DATA_DIR of the run, from the operative config it saved."""
  import glob  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top
  import re  # pylint: disable=g-import-not-at-top
  for path in sorted(glob.glob(os.path.join(model_dir, '*.gin'))):
    with open(path) as f:
      found = re.search(r"^DATA_DIR = '([^']*)'", f.read(), re.M)
    if found:
      return found.group(1)
  raise app.UsageError(f'No DATA_DIR in a .gin file of {model_dir}.')


def _peak_memory():
  whole, windowed = _child('whole'), _child('windowed')
  return {'peak_mib': {'whole': whole['peak_mib'],
                       _arms()[1][0]: windowed['peak_mib']},
          'peak_memory_ratio': windowed['peak_mib'] / whole['peak_mib']}


def _print(result):
  for name, row in result.get('windowed', {}).items():
    print(f"{name}: pixel_ratio {row['pixel_ratio']:.3f}, time_ratio "
          f"{row['time_ratio']:.3f}, over_pixels {row['over_pixels']:.3f}")
  print(json.dumps(result, sort_keys=True))


def main(argv):
  del argv  # Unused.
  from benchmarks import report  # pylint: disable=g-import-not-at-top
  if FLAGS.arm:
    print(json.dumps(_peak_arm(FLAGS.arm)))
    return
  if FLAGS.model_dir:
    print(json.dumps({'window': FLAGS.window,
                      'mean_iou': _mean_ious(FLAGS.model_dir)}))
    return
  result = _peak_memory() if FLAGS.peak_memory else time_arms()
  result.update({
      'image': [FLAGS.height, FLAGS.width], 'window': FLAGS.window,
      'window_batch_size': FLAGS.window_batch_size,
      'date': datetime.datetime.now().isoformat(timespec='seconds'),
      'command': ' '.join(sys.argv), 'machine': report.machine()})
  _print(result)


if __name__ == '__main__':
  app.run(main)
