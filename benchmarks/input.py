"""Throughput of an input pipeline: images per second after warm-up."""

import collections
import time

from official_seg.data import dataset_info
from official_seg.data import input_fn as input_lib
from official_seg.runtime import estimator
# Registers run and the other configurables every experiment binds.
from official_seg.runtime import gin_config

Throughput = collections.namedtuple(
    'Throughput', ['images_per_second', 'num_images', 'seconds'])


def measure(dataset, batch_size, warmup_batches=10, num_batches=50):
  """Times `num_batches` batches of a dataset after `warmup_batches`.

  Warm-up fills tf.data's buffers (shuffle, prefetch) and lets autotuning
  settle, so the figure is the steady-state rate.

  Args:
    dataset: a `tf.data.Dataset` of batches.
    batch_size: int, images per batch.
    warmup_batches: int, batches read before timing.
    num_batches: int, batches timed.

  Returns:
    `Throughput`.
  """
  iterator = iter(dataset)
  for _ in range(warmup_batches):
    next(iterator)
  start = time.perf_counter()
  for _ in range(num_batches):
    next(iterator)
  seconds = time.perf_counter() - start
  num_images = num_batches * batch_size
  return Throughput(num_images / seconds, num_images, seconds)


def training_dataset(batch_size):
  """The parsed experiment's training dataset, as train_and_eval builds it.

  Args:
    batch_size: int, images per batch.

  Returns:
    A `tf.data.Dataset` of (features dict, labels) batches.
  """
  dataset = dataset_info.DatasetInfo()
  input_fn = input_lib.make_input_fn(dataset, True,
                                     estimator.make_parser(True, dataset))
  return input_fn({'batch_size': batch_size})


def training_input(gin_files, gin_params, data_dir=None, batch_size=None):
  """Parses a gin experiment and returns its training dataset.

  The experiment is parsed over gin's current config, unlocked; the caller
  (a binary or a test) clears that config first.

  Args:
    gin_files: list of gin files.
    gin_params: list of bindings applied after the files.
    data_dir: optional str, overrides DATA_DIR.
    batch_size: optional int; default the experiment's training batch
      (build_estimator.train_batch_size).

  Returns:
    (dataset, batch_size): see `training_dataset`.
  """
  params = list(gin_params) + ([f'DATA_DIR = {data_dir!r}'] if data_dir else [])
  gin_config.parse(gin_files, params, finalize=False)
  batch_size = batch_size or gin_config.binding(
      'build_estimator.train_batch_size')
  return training_dataset(batch_size), batch_size
