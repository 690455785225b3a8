"""Parameters, FLOPs and inference images/s of each gin/backbones file."""

import glob
import os
import statistics
import time

import gin
import tensorflow as tf
from official.core import train_utils

from official_seg.modeling import model as model_lib
from official_seg.runtime import gin_config

REFERENCE = 'mobilenet_v2.gin'


def backbone_files():
  """The names of the shipped gin/backbones files, sorted."""
  return sorted(os.path.basename(path) for path in glob.glob(
      os.path.join(gin_config.gin_dir(), 'backbones', '*.gin')))


def build(name, num_classes, gin_params=()):
  """The DeepLab model of one backbone file, as `build_model` builds it.

  Args:
    name: str, a file under gin/backbones/.
    num_classes: int.
    gin_params: bindings parsed after the file.

  Returns:
    The `SegmentationModel`.
  """
  gin.clear_config()
  gin_config.parse([f'backbones/{name}'], list(gin_params), finalize=False)
  return model_lib.build_model(num_classes=num_classes)


def count_flops(model, crop_size):
  """Inference FLOPs of one image, by the Model Garden's own counter.

  `train_utils.try_count_flops` freezes the call's graph and sums
  TensorFlow's registered FLOP statistics (`tf.compat.v1.profiler`): a
  multiply-add counts 2; ops without statistics (batch norm folded into
  constants, activations, resizes) count 0.

  Args:
    model: a Keras model taking `inputs` and `training`.
    crop_size: (height, width).

  Returns:
    int, or None when the counter fails (it logs why).
  """
  spec = tf.TensorSpec([1, *crop_size, 3], tf.float32)
  return train_utils.try_count_flops(
      model, {'inputs': spec, 'training': False})


def inference_function(model):
  """A traced inference call returning the logits."""
  return tf.function(lambda images: model(images, training=False)['logits'])


def images_per_sec(functions, images, rounds=3, iterations=2):
  """Images/s of each function, timed in alternation, so all see one load.

  Each function is called once untimed (tracing, warm-up); then `rounds`
  times each function runs `iterations` calls in turn. The median round
  counts.

  Args:
    functions: dict of name to a function of `images` returning a tensor.
    images: float [B, H, W, 3] tensor.
    rounds: int.
    iterations: int, calls per function per round.

  Returns:
    dict of name to float images/s.
  """
  for function in functions.values():
    function(images).numpy()
  seconds = {name: [] for name in functions}
  for _ in range(rounds):
    for name, function in functions.items():
      start = time.perf_counter()
      for _ in range(iterations):
        function(images).numpy()
      seconds[name].append(time.perf_counter() - start)
  batch = int(images.shape[0])
  return {name: batch * iterations / statistics.median(times)
          for name, times in seconds.items()}


def measure(names, crop_size, batch_size=1, num_classes=21, rounds=3,
            iterations=2, gin_params=()):
  """One row per backbone file: parameters, FLOPs, images/s.

  Args:
    names: gin/backbones file names; the reference among them.
    crop_size: (height, width) of the images.
    batch_size: int, images per call.
    num_classes: int, the logits' channels.
    rounds, iterations: as `images_per_sec`.
    gin_params: bindings parsed after each file.

  Returns:
    list of dicts: file, backbone_params, model_params, gflops (one image),
    images_per_sec.
  """
  rows, functions = [], {}
  for name in names:
    model = build(name, num_classes, gin_params)
    model(tf.zeros([1, *crop_size, 3]), training=False)  # Builds the head.
    flops = count_flops(model, crop_size)
    rows.append({'file': name,
                 'backbone_params': model.backbone.count_params(),
                 'model_params': model.count_params(),
                 'gflops': flops / 1e9 if flops else None})
    functions[name] = inference_function(model)
  images = tf.random.stateless_uniform([batch_size, *crop_size, 3], [1, 2],
                                       maxval=255.0)
  rates = images_per_sec(functions, images, rounds, iterations)
  for row in rows:
    row['images_per_sec'] = rates[row['file']]
  return rows


def add_ratios(rows, reference=REFERENCE):
  """Adds each row's images/s and FLOPs over the reference row's."""
  base = next(row for row in rows if row['file'] == reference)
  for row in rows:
    row['speed_ratio'] = row['images_per_sec'] / base['images_per_sec']
    row['flops_ratio'] = (row['gflops'] / base['gflops']
                          if row['gflops'] and base['gflops'] else None)
  return rows


def _cell(value, spec):
  return '-' if value is None else format(value, spec)


def table(rows, reference=REFERENCE):
  """A Markdown table of the rows, ratios against the reference file's."""
  lines = [f'| file | backbone params (M) | model params (M) | GFLOPs | '
           f'FLOPs / {reference} | images/s | images/s / {reference} |',
           '| --- | ---: | ---: | ---: | ---: | ---: | ---: |']
  for row in rows:
    lines.append(
        f"| {row['file']} | {row['backbone_params'] / 1e6:.2f} | "
        f"{row['model_params'] / 1e6:.2f} | {_cell(row['gflops'], '.2f')} | "
        f"{_cell(row['flops_ratio'], '.2f')} | {row['images_per_sec']:.2f} | "
        f"{row['speed_ratio']:.2f} |")
  return '\n'.join(lines)
