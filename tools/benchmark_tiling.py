"""Peak memory and time of sliding-window against whole-image inference.

  python tools/benchmark_tiling.py --height=3072 --width=4096 --window=513
  python tools/benchmark_tiling.py --height=1024 --width=2048 --window=513
  python tools/benchmark_tiling.py --model_dir=/tmp/quickstart --window=65

The first two run the quickstart model (gin/experiments/quickstart.gin,
untrained weights: time and memory do not depend on them) on one random
image, each arm in a process of its own so that its peak resident memory is
its own; they print each arm's peak memory and median time and the ratios,
windowed over whole. With --model_dir (a trained quickstart run) it
evaluates that model's eval split whole and windowed and prints both mean
IoUs.
"""

import json
import resource
import statistics
import subprocess
import sys
import time

from absl import app
from absl import flags

flags.DEFINE_integer('height', 3072, 'Image height.')
flags.DEFINE_integer('width', 4096, 'Image width.')
flags.DEFINE_integer('window', 513, 'Window side (both ways).')
flags.DEFINE_integer('window_batch_size', 1, 'Windows per model call.')
flags.DEFINE_integer('repeats', 3, 'Timed runs per arm, after one warm-up.')
flags.DEFINE_string('model_dir', None, 'A trained quickstart run: compare '
                    'the mean IoU of its eval split whole and windowed.')
flags.DEFINE_enum('arm', None, ['whole', 'windowed'], 'Internal: run one arm '
                  'in this process and print its JSON.')
FLAGS = flags.FLAGS


def _parse_quickstart(extra=()):
  from official_seg.runtime import gin_config  # pylint: disable=g-import-not-at-top
  import gin  # pylint: disable=g-import-not-at-top
  gin.clear_config()
  gin_config.parse(['experiments/quickstart.gin'],
                   ["DATA_DIR = '/nonexistent'"] + list(extra),
                   finalize=False)


def _run_arm(arm):
  """Times predict_probabilities on one image; returns a JSON-able dict."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from official_seg.modeling import inference  # pylint: disable=g-import-not-at-top
  from official_seg.modeling import model as model_lib  # pylint: disable=g-import-not-at-top
  _parse_quickstart()
  model = model_lib.build_model(num_classes=4)
  model(tf.zeros([1, 65, 65, 3]), training=False)  # Builds the variables.
  window = ([FLAGS.window, FLAGS.window] if arm == 'windowed' else None)

  @tf.function
  def predict(images):
    probabilities = inference.predict_probabilities(
        model, images, inference.InferenceOptions(
            window_size=window, window_batch_size=FLAGS.window_batch_size))
    return tf.argmax(probabilities, -1)

  images = tf.constant(np.random.default_rng(0).normal(
      size=(1, FLAGS.height, FLAGS.width, 3)).astype(np.float32))
  predict(images).numpy()
  seconds = []
  for _ in range(FLAGS.repeats):
    start = time.perf_counter()
    predict(images).numpy()
    seconds.append(time.perf_counter() - start)
  peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  return {'arm': arm, 'seconds': statistics.median(seconds),
          'peak_mib': peak_kib / 1024.0}


def _child(arm):
  command = [sys.executable, __file__, f'--arm={arm}'] + [
      f'--{name}={getattr(FLAGS, name)}' for name in
      ('height', 'width', 'window', 'window_batch_size', 'repeats')]
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


def main(argv):
  del argv  # Unused.
  if FLAGS.arm:
    print(json.dumps(_run_arm(FLAGS.arm)))
    return
  if FLAGS.model_dir:
    print(json.dumps({'window': FLAGS.window,
                      'mean_iou': _mean_ious(FLAGS.model_dir)}))
    return
  whole, windowed = _child('whole'), _child('windowed')
  print(json.dumps({
      'image': [FLAGS.height, FLAGS.width], 'window': FLAGS.window,
      'whole': whole, 'windowed': windowed,
      'peak_memory_ratio': windowed['peak_mib'] / whole['peak_mib'],
      'time_ratio': windowed['seconds'] / whole['seconds']}, indent=2))


if __name__ == '__main__':
  app.run(main)
