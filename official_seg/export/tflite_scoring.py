"""Scores a .tflite of `tflite.tflite_export` on a dataset's eval split, as the evaluator scores."""

import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import input_fn as input_lib
from official_seg.data import tfexample
from official_seg.evaluation import boundary
from official_seg.evaluation import tally


def eval_examples(dataset, limit=None):
  """Decoded examples of the dataset's eval split, in shard order.

  Args:
    dataset: a `DatasetInfo`.
    limit: optional int, at most this many.

  Yields:
    (filename str, image uint8 or uint16 [h, w, IMAGE_CHANNELS], label
    uint8 [h, w]) NumPy.

  Raises:
    validation.MissingFileError: the split has no shards; names DATA_DIR.
  """
  files = input_lib.list_shards(dataset.data_dir, dataset.eval_split)
  decoder = tfexample.Decoder(channels=dataset.image_channels,
                              bit_depth=dataset.image_bit_depth)
  records = tf.data.TFRecordDataset(files).map(decoder.decode)
  if limit is not None:
    records = records.take(limit)
  for example in records.as_numpy_iterator():
    yield (example['filename'].decode('utf-8'), example['image'],
           example['label'][..., 0])


def check_dataset(model, dataset):
  """Raises if a `TfliteModel` reads other images than the dataset holds."""
  wanted = (dataset.image_channels, dataset.image_bit_depth)
  if (model.channels, model.bit_depth) != wanted:
    raise validation.ConfigurationError(
        f'{model.path} reads {model.channels} channels of {model.bit_depth} '
        f'bits, but the dataset\'s images have {wanted[0]} of {wanted[1]} '
        '(IMAGE_CHANNELS, IMAGE_BIT_DEPTH); pass the gin files of the run '
        'that exported it.')


def evaluate(model, dataset, limit=None,
             boundary_tolerance=boundary.DEFAULT_TOLERANCE):
  """Scores a `TfliteModel` on the eval split as the evaluator scores.

  Each image's labels are compared at its decoded size, through the
  evaluator's ops with its ignore handling (`tally.Tally`), and summed into
  one record.

  Args:
    model: a `TfliteModel`.
    dataset: the `DatasetInfo` whose eval split is scored.
    limit: optional int, score at most this many images.
    boundary_tolerance: int >= 1, the contour bands' width in pixels
      (`ModelFnOptions.boundary_tolerance`).

  Returns:
    (record, confusion): the `results.record_from_confusion` record, with
    'model_bytes' and 'latency_ms' (median interpreter time per image, the
    first call left out: it allocates), and the int64 [C, C] matrix.

  Raises:
    validation.ConfigurationError: the model reads other channels or
      another depth than the dataset's images; names the model's file.
  """
  check_dataset(model, dataset)
  scored = tally.Tally(dataset.class_names, dataset.ignore_label,
                       boundary_tolerance)
  for _, image, label in eval_examples(dataset, limit):
    scored.add(label, model.predict(image))
  record = scored.record(model.global_step)
  timed = model.seconds[1:] or model.seconds
  record.update(model_bytes=model.size_bytes,
                latency_ms=float(np.median(timed)) * 1000.0 if timed else None)
  return record, scored.confusion
