"""Shared test helpers: tiny synthetic shards and a tiny quickstart config."""

import atexit
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from unittest import mock

import gin
import numpy as np
import tensorflow as tf

from official_seg.data import dataset_info
from official_seg.data import input_fn as input_lib
from official_seg.data import tfexample
from official_seg.datasets import synthetic
from official_seg.export import tflite_runner
from official_seg.runtime import estimator
from official_seg.runtime import experiment
from official_seg.runtime import gin_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY_TIMEOUT_SECS = 600

# Images of 24-40 pixels keep every model step well under a second on a CPU.
TINY_SIZES = {'min_size': 24, 'max_size': 40}


def shard_image_labels(data_dir, split):
  """{record filename: its label values with pixels} of a split, read from
  its shards by NumPy: the reference of the `image_classes` files."""
  decoder = tfexample.Decoder()
  found = {}
  for record in tf.data.TFRecordDataset(
      input_lib.list_shards(data_dir, split)):
    _, label, name = (t.numpy() for t in decoder.encoded(record))
    name = name.decode('utf-8')
    label = tf.io.decode_png(label).numpy()
    values = np.flatnonzero(np.bincount(label.ravel()))
    found[name] = sorted(set(found.get(name, [])) | set(values.tolist()))
  return found


def write_tiny_dataset(data_dir, num_train=8, num_val=5, num_shards=2,
                       image_format='png'):
  """Writes train and val shards of small synthetic images into `data_dir`."""
  return synthetic.write_dataset(
      data_dir, {'train': num_train, 'val': num_val}, num_shards=num_shards,
      image_format=image_format, **TINY_SIZES)


# For tests whose subject is the quickstart's own MobileNetV2 (its variable
# names, Model Garden's QAT blocks), over tiny_bindings' MobileNetV1.
MOBILENET_V2 = ("backbones.MobileNet.model_id = 'MobileNetV2'",)


def tiny_bindings(data_dir, train_steps=3, extra=()):
  """Bindings that shrink the quickstart experiment to a few cheap steps."""
  return [
      f"DATA_DIR = '{data_dir}'",
      f'TRAIN_STEPS = {train_steps}',
      'CROP_SIZE = [33, 33]',
      'EVAL_CROP_SIZE = [41, 41]',
      'TRAIN_BATCH_SIZE = 2',
      'EVAL_BATCH_SIZE = 2',
      'build_run_config.save_checkpoints_steps = 2',
      'build_run_config.log_step_count_steps = 1',
      'host_call.every_n_steps = 1',
      # MobileNetV1 builds its graph in about half MobileNetV2's time; the
      # tests whose subject is MobileNetV2 (QAT, DeepLab's names) bind it.
      "backbones.MobileNet.model_id = 'MobileNetV1'",
      'decoders.ASPP.num_filters = 16',
      'heads.SegmentationHead.num_filters = 16',
      # SavedModel exports cost ~12 s of CPU per run; tests/export_test.py
      # turns them on.
      'make_exporters.latest = False',
      'export_best.enabled = False',
      # graph.pbtxt and the .meta files cost seconds per training start,
      # more than the tiny steps; tensorboard_test keeps the default.
      'build_run_config.save_graph_def = False',
      # Grappler's rewrites cost more at each session start than they save
      # in a few tiny steps.
      'build_run_config.graph_rewrites = False',
  ] + list(extra)


def parse_tiny_quickstart(data_dir, train_steps=3, extra=(), finalize=False):
  """Clears gin and parses the quickstart experiment, shrunk for tests."""
  gin.clear_config()
  gin_config.parse(['experiments/quickstart.gin'],
                   tiny_bindings(data_dir, train_steps, extra),
                   finalize=finalize)


# {train_steps: model dir} of the models `copy_trained_tiny_model` trained in
# this process.
_TRAINED = {}


def copy_trained_tiny_model(model_dir, train_steps=3):
  """Copies a tiny quickstart model, trained `train_steps` steps, to `model_dir`.

  For tests whose subject is not the training: the model is trained once
  per process on tiny shards of its own, into a folder that outlives the
  test classes, and every caller gets its own copy. Its checkpoints are
  those of `parse_tiny_quickstart(data_dir, train_steps)` then
  `experiment.run('train', ...)`. Leaves the gin config cleared.
  """
  if train_steps not in _TRAINED:
    root = tempfile.mkdtemp(prefix='trained_tiny_model_')
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    write_tiny_dataset(os.path.join(root, 'data'))
    parse_tiny_quickstart(os.path.join(root, 'data'), train_steps)
    experiment.run('train', os.path.join(root, 'model'))
    _TRAINED[train_steps] = os.path.join(root, 'model')
  gin.clear_config()
  shutil.copytree(_TRAINED[train_steps], model_dir)


@contextlib.contextmanager
def recorded_calls(owner, name):
  """Records each call of `owner.name` made inside the block.

  For tests that check what the code under test built (a model, a
  SavedModel) without building it again.

  Yields:
    The list of (args, kwargs, result) of the calls, in call order.
  """
  calls = []
  original = getattr(owner, name)

  def recording(*args, **kwargs):
    result = original(*args, **kwargs)
    calls.append((args, kwargs, result))
    return result

  with mock.patch.object(owner, name, recording):
    yield calls


def parse_tiny_platform(data_dir, platform, extra=(), train_steps=2):
  """Clears gin and parses quickstart on gin/platforms/`platform`, shrunk."""
  gin.clear_config()
  gin_config.parse(['experiments/quickstart.gin', f'platforms/{platform}'],
                   tiny_bindings(data_dir, train_steps, extra),
                   finalize=False)


def parse_tiny_semi_supervised(data_dir, mode, platform=None, extra=(),
                               train_steps=2):
  """Clears gin and parses quickstart with gin/semi_supervised/`mode`, shrunk.

  The unlabeled split is 'train', which is also the labeled one, as in
  PseudoSeg's pool.
  """
  gin.clear_config()
  files = ['experiments/quickstart.gin', f'semi_supervised/{mode}']
  files += [f'platforms/{platform}'] if platform else []
  gin_config.parse(files, tiny_bindings(
      data_dir, train_steps, ["UNLABELED_SPLIT = 'train'"] + list(extra)),
                   finalize=False)


def scalar_tags(model_dir):
  """The tags of every summary in the event files directly in `model_dir`."""
  tags = set()
  for path in tf.io.gfile.glob(os.path.join(model_dir, '*.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      tags.update(value.tag for value in event.summary.value)
  return tags


def binary_command(model_dir, bindings, mode,
                   gin_file='gin/experiments/quickstart.gin', driver=None):
  """The command line of the train_and_eval binary (or of a `driver` script
  that runs it after injecting a fault), to run from `REPO`."""
  command = [sys.executable] + (['-c', driver] if driver else
                                ['-m', 'official_seg.train_and_eval'])
  return command + [f'--gin_file={gin_file}', f'--model_dir={model_dir}',
                    f'--mode={mode}'] + [f'--gin_param={b}' for b in bindings]


def eval_records(model_dir):
  """The lines of `<model_dir>/eval/metrics.jsonl`, parsed here, in order."""
  with open(os.path.join(model_dir, 'eval', 'metrics.jsonl')) as stream:
    return [json.loads(line) for line in stream]


def run_binary(model_dir, bindings, mode='train_and_eval', **kwargs):
  """Runs the binary to completion; returns the CompletedProcess."""
  return subprocess.run(binary_command(model_dir, bindings, mode, **kwargs),
                        cwd=REPO, capture_output=True, text=True,
                        timeout=BINARY_TIMEOUT_SECS, check=False)


class Captured:
  """What a `captured_stderr_fd` block wrote, in `text` once it has ended."""
  text = ''


@contextlib.contextmanager
def captured_stderr_fd():
  """Captures file descriptor 2, where TensorFlow's C++ runtime logs.

  Yields:
    A `Captured`, whose `text` holds what was written once the block ends.
  """
  captured = Captured()
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile('w+') as sink:
    os.dup2(sink.fileno(), 2)
    try:
      yield captured
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      sink.seek(0)
      captured.text = sink.read()


def make_input_fn(is_training):
  """The train or eval input_fn of the parsed gin config's dataset."""
  dataset = dataset_info.DatasetInfo()
  return input_lib.make_input_fn(
      dataset, is_training, estimator.make_parser(is_training, dataset))


class TinyDataTestCase(tf.test.TestCase):
  """A test with a clean gin config and tiny synthetic shards in `data_dir`."""

  # Images of the two splits; a subclass may set its own.
  num_train = 6
  num_val = 5

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.data_dir = self.create_tempdir().full_path
    write_tiny_dataset(self.data_dir, num_train=self.num_train,
                       num_val=self.num_val)


def stand_in_labels(image):
  """The stand-in .tflite's classes of uint8 [h, w, 3] pixels, in NumPy."""
  return ((image[..., 0] > 127).astype(np.int64)
          + 2 * (image[..., 1] > 127).astype(np.int64))


def stand_in_confusion(data_dir, split, num_classes=4, ignore_label=255):
  """The stand-in's confusion matrix over a split, by NumPy bincount.

  Independent of the package's metrics: the expected value of the tests of
  TFLite scoring.
  """
  expected = np.zeros((num_classes, num_classes), np.int64)
  decoder = tfexample.Decoder()
  files = sorted(tf.io.gfile.glob(tfexample.shard_pattern(data_dir, split)))
  for record in tf.data.TFRecordDataset(files):
    example = decoder.decode(record)
    label = example['label'].numpy()[..., 0].astype(np.int64)
    predicted = stand_in_labels(example['image'].numpy())
    valid = label != ignore_label
    expected += np.bincount(
        label[valid] * num_classes + predicted[valid],
        minlength=num_classes**2).reshape(num_classes, num_classes)
  return expected


def write_export_layout_tflite(path, input_size, outputs):
  """A .tflite with --mode=export_tflite's 'image' and 'size' inputs.

  Args:
    path: str, the .tflite to write.
    input_size: (H, W) of its 'image' input.
    outputs: callable (uint8 [1, H, W, 3] image, bool [H, W] mask of the
      pixels inside 'size') -> the named output tensors.
  """
  height, width = input_size
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    image = tf.compat.v1.placeholder(tf.uint8, [1, height, width, 3],
                                     name=tflite_runner.IMAGE_INPUT)
    size = tf.compat.v1.placeholder(tf.int32, [2],
                                    name=tflite_runner.SIZE_INPUT)
    inside = tf.logical_and(tf.range(height)[:, None] < size[0],
                            tf.range(width)[None, :] < size[1])
    content = tf.compat.v1.lite.TFLiteConverter.from_session(
        session, [image, size], outputs(image, inside)).convert()
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'wb') as f:
    f.write(content)


def write_stand_in_tflite(path, input_size, metadata=None):
  """A .tflite with --mode=export_tflite's inputs and outputs, no model.

  Its label of a pixel inside 'size': 1 if red > 127, plus 2 if green >
  127; beyond 'size' it writes 3, which a tool must never read.

  Args:
    path: str, the .tflite to write.
    input_size: (H, W) of its 'image' input.
    metadata: optional dict written as segmentation.json beside it.
  """
  def outputs(image, inside):
    pixels = tf.cast(image, tf.int32)
    labels = (tf.cast(pixels[..., 0] > 127, tf.int32)
              + 2 * tf.cast(pixels[..., 1] > 127, tf.int32))
    return [tf.identity(tf.where(inside[None], labels, 3),
                        name=tflite_runner.SEMANTIC_OUTPUT)]
  write_export_layout_tflite(path, input_size, outputs)
  if metadata is not None:
    with open(os.path.join(os.path.dirname(path),
                           tflite_runner.METADATA_FILE), 'w') as f:
      json.dump(metadata, f)


_TINY_SHAPE = (8, 8, 3)


def tiny_conv_model():
  """Conv 3x3, depthwise 3x3, conv 1x1; the depthwise bias equals the first's.

  Returns:
    The Keras model (batch 1, 8x8x3 float32 input, seeded weights) and its
    three layers.
  """
  inputs = tf.keras.Input(_TINY_SHAPE, batch_size=1)
  first = tf.keras.layers.Conv2D(16, 3, padding='same', activation='relu')
  depthwise = tf.keras.layers.DepthwiseConv2D(3, padding='same',
                                              activation='relu')
  last = tf.keras.layers.Conv2D(4, 1)
  model = tf.keras.Model(inputs, last(depthwise(first(inputs))))
  random = np.random.RandomState(0)
  model.set_weights([random.uniform(-1, 1, w.shape).astype(np.float32)
                     for w in model.weights])
  # Equal constants: the converter stores them in one buffer.
  depthwise.bias.assign(first.bias)
  return model, (first, depthwise, last)


def convert_to_tflite(model, int8):
  """The TFLite converter's float32, or full-integer int8, flatbuffer bytes."""
  converter = tf.lite.TFLiteConverter.from_keras_model(model)
  if int8:
    random = np.random.RandomState(1)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: (
        [random.uniform(-1, 1, (1,) + _TINY_SHAPE).astype(np.float32)]
        for _ in range(4))
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
  return converter.convert()
