"""Benchmarks a run's .tflite models against its float SavedModel, in one run.

  python tools/benchmark_tflite.py --model_dir=/tmp/quickstart \
    --gin_file=gin/experiments/quickstart.gin

Scores the newest SavedModel under <model_dir>/export/ and each
<model_dir>/export/tflite/model_<kind>.tflite on the eval split, each image
at its decoded size (tflite_runner.evaluate), and prints a Markdown table:
size, median latency per image, speed-up over the SavedModel, mean IoU and
its difference to the SavedModel's. SavedModel latency is one
serving_default call on one PNG-encoded image (decoding included); TFLite
latency is one interpreter invoke with --num_threads threads.
"""

import io
import os
import time

from absl import app
from absl import flags
from PIL import Image

from official_seg.data import dataset_info
from official_seg.export import predictor
from official_seg.export import tflite
from official_seg.export import tflite_runner
from official_seg.runtime import gin_config

flags.DEFINE_string('model_dir', None, 'The run: its newest SavedModel and '
                    'its export/tflite/ models are compared.')
flags.DEFINE_multi_string('gin_file', [], 'The gin files of the run.')
flags.DEFINE_multi_string('gin_param', [], 'Gin bindings after the files.')
flags.DEFINE_list('kinds', list(tflite.KINDS), 'Kinds to score; missing '
                  'files are skipped.')
flags.DEFINE_integer('num_threads', None, 'Interpreter threads; default the '
                     'CPU cores.')
flags.DEFINE_integer('max_images', None, 'Score at most this many images.')
flags.mark_flags_as_required(['model_dir', 'gin_file'])
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
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format='PNG')
    start = time.perf_counter()
    labels = self._predictor(buffer.getvalue())
    self.seconds.append(time.perf_counter() - start)
    return labels


def _row(name, record, reference):
  return (f'| {name} | {record["model_bytes"] / 1e6:.3f} | '
          f'{record["latency_ms"]:.2f} | '
          f'{reference["latency_ms"] / record["latency_ms"]:.2f}x | '
          f'{record["mean_iou"]:.4f} | '
          f'{record["mean_iou"] - reference["mean_iou"]:+.4f} |')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  gin_config.parse(FLAGS.gin_file, FLAGS.gin_param, finalize=False)
  dataset = dataset_info.DatasetInfo()
  export_dir = predictor.find_saved_model(FLAGS.model_dir)
  reference, _ = tflite_runner.evaluate(_SavedModel(export_dir), dataset,
                                        FLAGS.max_images)
  rows = [_row('SavedModel (float32)', reference, reference)]
  for kind in FLAGS.kinds:
    path = tflite.tflite_path(FLAGS.model_dir, kind)
    if not os.path.exists(path):
      print(f'Skipping {kind}: no {path}')
      continue
    model = tflite_runner.TfliteModel(path, FLAGS.num_threads)
    record, _ = tflite_runner.evaluate(model, dataset, FLAGS.max_images)
    rows.append(_row(kind, record, reference))
  print(f'{reference["num_images"]} images of split {dataset.eval_split!r}, '
        f'step {reference["global_step"]}, '
        f'{FLAGS.num_threads or os.cpu_count()} interpreter threads')
  print('| model | size (MB) | latency (ms/image) | speed-up | mean IoU | '
        'vs SavedModel |')
  print('| --- | --- | --- | --- | --- | --- |')
  print('\n'.join(rows))


if __name__ == '__main__':
  app.run(main)
