"""Benchmarks a run's .tflite models against its float SavedModel, in one run.

  python tools/benchmark_tflite.py --model_dir=/tmp/quickstart \
    --gin_file=gin/experiments/quickstart.gin

Scores the newest SavedModel under <model_dir>/export/ and each
<model_dir>/export/tflite/model_<kind>.tflite on the eval split, each image
at its decoded size (tflite_scoring.evaluate), then times them on the split's
first image in --rounds rounds, each round calling every model once, so a
change of load on a shared machine touches all alike. Prints a Markdown
table: size, median and least latency per image, the speed-up of the median
over the SavedModel's, mean IoU and its difference to the SavedModel's.
SavedModel latency is one serving_default call on the PNG-encoded image
(decoding included); TFLite latency one interpreter invoke with
--num_threads threads on the image as `tflite_runner.fit_image` places it.
"""

import functools
import io
import os
import time

from absl import app
from absl import flags
import numpy as np
from PIL import Image

from official_seg import flags as seg_flags
from official_seg.data import dataset_info
from official_seg.export import predictor
from official_seg.export import tflite
from official_seg.export import tflite_runner
from official_seg.export import tflite_scoring

# --gin_file (the run's), --gin_param and --data_dir.
flags.adopt_module_key_flags(seg_flags)
flags.DEFINE_string('model_dir', None, 'The run: its newest SavedModel and '
                    'its export/tflite/ models are compared.')
flags.DEFINE_list('kinds', list(tflite.KINDS), 'Kinds to score; missing '
                  'files are skipped.')
flags.DEFINE_integer('num_threads', None, 'Interpreter threads; default the '
                     'CPU cores.')
flags.DEFINE_integer('max_images', None, 'Score at most this many images.')
flags.DEFINE_integer('rounds', 30, 'Timed calls of each model.')
flags.mark_flag_as_required('model_dir')
FLAGS = flags.FLAGS


class _SavedModel:
  """A `Predictor` with `TfliteModel`'s interface, timing each call."""

  def __init__(self, export_dir):
    self._predictor = predictor.Predictor(export_dir)
    self.global_step = self._predictor.global_step
    self.size_bytes = sum(
        os.path.getsize(os.path.join(folder, name))
        for folder, _, names in os.walk(export_dir) for name in names)
    self.seconds = []

  def predict(self, image):
    encoded = _png(image)
    start = time.perf_counter()
    labels = self._predictor(encoded)
    self.seconds.append(time.perf_counter() - start)
    return labels


def _png(image):
  buffer = io.BytesIO()
  Image.fromarray(image).save(buffer, format='PNG')
  return buffer.getvalue()


def _latencies(models, image, rounds):
  """Milliseconds of each call of each model, called in turn each round."""
  calls = {}
  for name, model in models.items():
    if isinstance(model, _SavedModel):
      calls[name] = functools.partial(model.predict, image)
    else:
      calls[name] = functools.partial(
          model.run, *tflite_runner.fit_image(image, model.input_size,
                                              model.resize_range))
    calls[name]()  # Warm-up: the first call allocates.
  times = {name: [] for name in models}
  for _ in range(rounds):
    for name, call in calls.items():
      start = time.perf_counter()
      call()
      times[name].append((time.perf_counter() - start) * 1000.0)
  return times


def _row(name, record, reference, times, reference_times):
  median = np.median(times)
  return (f'| {name} | {record["model_bytes"] / 1e6:.3f} | '
          f'{median:.2f} | {np.min(times):.2f} | '
          f'{np.median(reference_times) / median:.2f}x | '
          f'{record["mean_iou"]:.4f} | '
          f'{record["mean_iou"] - reference["mean_iou"]:+.4f} |')


def main(argv):
  seg_flags.check_run_tool_args(argv)
  seg_flags.parse_gin(finalize=False)
  dataset = dataset_info.DatasetInfo()
  export_dir = predictor.find_saved_model(FLAGS.model_dir)
  models = {'SavedModel (float32)': _SavedModel(export_dir)}
  for kind in FLAGS.kinds:
    path = tflite.tflite_path(FLAGS.model_dir, kind)
    if os.path.exists(path):
      models[kind] = tflite_runner.TfliteModel(path, FLAGS.num_threads)
    else:
      print(f'Skipping {kind}: no {path}')
  records = {name: tflite_scoring.evaluate(model, dataset, FLAGS.max_images)[0]
             for name, model in models.items()}
  _, image, _ = next(tflite_scoring.eval_examples(dataset, 1))
  times = _latencies(models, image, FLAGS.rounds)
  reference = next(iter(models))
  print(f'{records[reference]["num_images"]} images of split '
        f'{dataset.eval_split!r}, step {records[reference]["global_step"]}, '
        f'{FLAGS.num_threads or os.cpu_count()} interpreter threads, '
        f'{FLAGS.rounds} timed rounds on a {image.shape[0]}x{image.shape[1]} '
        'image')
  print('| model | size (MB) | median latency (ms) | least latency (ms) | '
        'speed-up (median) | mean IoU | vs SavedModel |')
  print('| --- | --- | --- | --- | --- | --- | --- |')
  for name in models:
    print(_row(name, records[name], records[reference], times[name],
               times[reference]))

if __name__ == '__main__':
  app.run(main)
