"""Evaluation in TensorBoard: validation pictures and the confusion-matrix image."""

import io

import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg import validation
from official_seg.data import palettes
from official_seg.evaluation import visualize

# Validation pictures kept each evaluation: the split's first valid examples,
# in the order the eval input reads them, so every checkpoint shows the same.
NUM_PICTURES = 4
PICTURES_PREFIX = 'pictures/'
CONFUSION_IMAGE_TAG = 'confusion_matrix/image'
_RGBA = 4  # Summary.Image colorspace of matplotlib's PNGs.


def eval_pictures(images, labels, predictions, dataset,
                  max_images=NUM_PICTURES):
  """The first pictures of an eval batch, coloured in the dataset's palette.

  Args:
    images: float [B, H, W, 3], the model's input.
    labels: int [B, H, W, 1].
    predictions: int [B, H, W].
    dataset: the `DatasetInfo` (palette, ignore label).
    max_images: int.

  Returns:
    dict of 'image', 'label' and 'prediction' to uint8 [N, h, w, 3],
    N = min(B, max_images).
  """
  colours = palettes.label_colours(dataset.palette, dataset.ignore_label)
  return palettes.pictures(images, labels, predictions, colours, max_images)


def _local(name, shape, dtype):
  return tf.compat.v1.get_local_variable(
      name, shape=shape, dtype=dtype,
      initializer=tf.compat.v1.zeros_initializer(),
      collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES,
                   tf.compat.v1.GraphKeys.METRIC_VARIABLES])


def _kept_pictures(tag, pictures, valid, max_images):
  """(image summary, update op) of the first `max_images` valid pictures."""
  shape = pictures.shape[1:]
  if not shape.is_fully_defined():
    raise validation.ConfigurationError(
        f'Evaluation pictures need a fixed size, got {shape}; '
        'set eval/Parser.crop_size (EVAL_CROP_SIZE).')
  kept = _local(f'eval_pictures_{tag}', [max_images] + shape.as_list(),
                tf.uint8)
  count = _local(f'eval_pictures_{tag}_count', [], tf.int32)
  # Batch padding (valid 0, on TPUs) is never shown.
  new = tf.boolean_mask(pictures, valid[:tf.shape(pictures)[0]] > 0)
  take = tf.minimum(max_images - count, tf.shape(new)[0])
  merged = tf.concat([kept[:count], new[:take], kept[count + take:]], 0)
  with tf.control_dependencies([merged]):
    update = tf.group(kept.assign(merged), count.assign_add(take))
  summary = tf.compat.v1.summary.image(
      tag, kept[:count], max_outputs=max_images, collections=[])
  return summary, update


def picture_metrics(pictures, valid, max_images=NUM_PICTURES):
  """Eval metrics that keep the first valid pictures of the split.

  Estimator writes each serialized Summary value into `eval/` at the
  evaluated step, picture i of tag t as 'pictures/t/i': one image per
  evaluated checkpoint, the same example each time.

  Args:
    pictures: dict of tag to uint8 [N, h, w, 3], from `eval_pictures`.
    valid: float [B], 1 for real examples and 0 for batch padding; its
      first N entries belong to the pictures.
    max_images: int, pictures kept.

  Returns:
    dict of 'pictures/<tag>' to (serialized `Summary`, update_op).
  """
  return {PICTURES_PREFIX + tag: _kept_pictures(tag, value, valid,
                                                max_images)
          for tag, value in sorted(pictures.items())}


def write_confusion_image(eval_dir, step, confusion, class_names):
  """Writes the row-normalised confusion matrix as an image into `eval_dir`.

  Args:
    eval_dir: str, the evaluator's folder (TensorBoard's 'eval' run).
    step: int, the evaluated global step.
    confusion: [C, C] pixel counts, rows true class, columns predicted;
      the sigmoid output kind's [C, 2, 2] write no image (their counts are
      in the `confusion_matrix-<step>.json` beside it).
    class_names: C names, on both axes.
  """
  if np.ndim(confusion) == 3:
    return
  png = visualize.confusion_heatmap_png(confusion, class_names,
                                        title=f'step {step}')
  width, height = Image.open(io.BytesIO(png)).size
  image = tf.compat.v1.Summary.Image(height=height, width=width,
                                     colorspace=_RGBA,
                                     encoded_image_string=png)
  summary = tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(
      tag=CONFUSION_IMAGE_TAG, image=image)])
  # Estimator's own writer of `eval_dir`: one events file that TensorBoard
  # follows as it grows. It may be called inside a finalized training graph
  # (train_and_evaluate's exporters) or eagerly; a writer is made only in a
  # graph of its own.
  with tf.Graph().as_default():
    writer = tf.compat.v1.summary.FileWriterCache.get(eval_dir)
  writer.add_summary(summary, step)
  writer.flush()
