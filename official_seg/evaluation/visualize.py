"""Label maps and class statistics as pictures: colours, overlays, charts."""

import io

import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.data import encode


def colorize(labels, palette):
  """Paints each pixel in its class colour.

  Args:
    labels: int [H, W], class ids in 0-255.
    palette: uint8 [256, 3], from `palettes.resolve`.

  Returns:
    uint8 [H, W, 3].

  Raises:
    ValueError: a label outside 0-255.
  """
  return palette[encode.checked_labels(labels)]


def display_rgb(image):
  """An image of any channels and depth as 8-bit RGB, to draw labels over.

  The first three channels (one channel: repeated as grey); 16-bit values
  keep their high byte.

  Args:
    image: uint8 or uint16 [H, W, C].

  Returns:
    uint8 [H, W, 3].
  """
  image = np.asarray(image)
  if image.dtype == np.uint16:
    image = (image >> 8).astype(np.uint8)
  if image.shape[2] < 3:
    image = np.repeat(image[..., :1], 3, axis=2)
  return image[..., :3]


def overlay(image, labels, palette, alpha=0.5):
  """Blends the colourised labels over the image.

  Args:
    image: uint8 [H, W, 3].
    labels: int [H, W], class ids in 0-255.
    palette: uint8 [256, 3].
    alpha: float in [0, 1], the weight of the label colours.

  Returns:
    uint8 [H, W, 3], (1 - alpha) * image + alpha * colours, rounded.

  Raises:
    ValueError: image and labels differ in size, or a label is outside 0-255.
  """
  image = np.asarray(image)
  if image.shape[:2] != np.shape(labels):
    raise ValueError(f'Image of size {image.shape[:2]} and labels of size '
                     f'{np.shape(labels)} differ; they must be the same.')
  blend = (1 - alpha) * image + alpha * colorize(labels, palette)
  return np.round(blend).astype(np.uint8)


def write_label_png(path, labels):
  """Writes class ids as a single-channel 8-bit PNG (the raw label map).

  Args:
    path: str, the PNG to write.
    labels: int [H, W], class ids in 0-255.

  Raises:
    ValueError: a label outside 0-255.
  """
  with tf.io.gfile.GFile(path, 'wb') as f:
    f.write(encode.encode_png(labels))


def write_rgb_png(path, image):
  """Writes an RGB picture, uint8 [H, W, 3], as a PNG."""
  buffer = io.BytesIO()
  Image.fromarray(np.asarray(image, np.uint8), mode='RGB').save(buffer,
                                                                format='PNG')
  with tf.io.gfile.GFile(path, 'wb') as f:
    f.write(buffer.getvalue())


def _pyplot():
  """matplotlib's pyplot, drawing off-screen; imported when a chart is drawn."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')  # No display on servers and in CI.
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  return pyplot


def _png_bytes(pyplot, figure):
  """The figure as PNG bytes; frees it, as pyplot keeps figures open."""
  buffer = io.BytesIO()
  figure.savefig(buffer, dpi=100, format='png')
  pyplot.close(figure)
  return buffer.getvalue()


def _save(pyplot, figure, path):
  """Writes the figure as a PNG through gfile (model dirs on object stores)."""
  data = _png_bytes(pyplot, figure)
  with tf.io.gfile.GFile(path, 'wb') as f:
    f.write(data)


def _confusion_figure(confusion, class_names, title):
  """(pyplot, figure) of the row-normalized confusion matrix heat map."""
  confusion = np.asarray(confusion, np.float64)
  recall = confusion / np.maximum(confusion.sum(axis=1, keepdims=True), 1)
  pyplot = _pyplot()
  side = max(4.0, 0.3 * len(class_names) + 2)
  figure, axes = pyplot.subplots(figsize=(side + 1, side),
                                 layout='constrained')
  image = axes.imshow(recall, cmap='Blues', vmin=0.0, vmax=1.0)
  ticks = range(len(class_names))
  axes.set_xticks(ticks, class_names, rotation=90, fontsize=7)
  axes.set_yticks(ticks, class_names, fontsize=7)
  axes.set_xlabel('predicted class')
  axes.set_ylabel('true class')
  if len(class_names) <= 25:  # Numbers stay legible up to ~25 classes.
    for (row, column), value in np.ndenumerate(recall):
      axes.text(column, row, f'{value:.2f}', ha='center', va='center',
                fontsize=7, color='white' if value > 0.5 else 'black')
  figure.colorbar(image, ax=axes, label='share of the true class')
  axes.set_title(title)
  return pyplot, figure


def save_confusion_heatmap(confusion, class_names, path, title=''):
  """Saves the row-normalized confusion matrix as a heat map PNG.

  Args:
    confusion: [C, C] pixel counts, rows true class, columns predicted.
    class_names: C names.
    path: str, the PNG to write.
    title: str, the figure title.
  """
  _save(*_confusion_figure(confusion, class_names, title), path)


def confusion_heatmap_png(confusion, class_names, title=''):
  """The heat map of `save_confusion_heatmap` as PNG bytes."""
  return _png_bytes(*_confusion_figure(confusion, class_names, title))


def _bar_chart(pyplot, names, values, ylabel, title):
  """A figure of one bar per class, named below it; the caller saves it."""
  figure, axes = pyplot.subplots(figsize=(max(6, 0.3 * len(names)), 4),
                                 layout='constrained')
  axes.bar(range(len(names)), values)
  axes.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
  axes.set_ylabel(ylabel)
  axes.set_title(title)
  return figure, axes


def save_iou_chart(per_class_iou, mean_iou, path, title=''):
  """Saves a bar chart of per-class IoU, with the mean as a line, as PNG.

  Args:
    per_class_iou: dict of class name to IoU, or None for a class absent from
      labels and predictions (drawn as an empty slot).
    mean_iou: float.
    path: str, the PNG to write.
    title: str, the figure title.
  """
  names = list(per_class_iou)
  values = [per_class_iou[name] or 0.0 for name in names]
  pyplot = _pyplot()
  figure, axes = _bar_chart(pyplot, names, values, 'IoU', title)
  axes.axhline(mean_iou, color='black', linestyle='--',
               label=f'mean IoU {mean_iou:.4f}')
  axes.set_ylim(0.0, 1.0)
  axes.legend(loc='lower right')
  _save(pyplot, figure, path)


# The bars of `save_scores_chart`: record key suffix, legend label.
_CHART_SCORES = (('iou', 'IoU'), ('dice', 'Dice/F1'),
                 ('precision', 'precision'), ('recall', 'recall'),
                 ('boundary_iou', 'Boundary IoU'))


def save_scores_chart(record, path, title=''):
  """Saves grouped bars per class of each score of a record as a PNG.

  Args:
    record: a metrics record, with 'per_class_<score>' (class name to value,
      or None for a class absent from labels and predictions: no bar) and
      'mean_<score>' for each of IoU, Dice/F1, precision, recall and
      Boundary IoU.
    path: str, the PNG to write.
    title: str, the figure title.
  """
  names = list(record['per_class_iou'])
  pyplot = _pyplot()
  figure, axes = pyplot.subplots(
      figsize=(max(6, 0.6 * len(names) + 2), 4), layout='constrained')
  width = 0.8 / len(_CHART_SCORES)
  middle = (len(_CHART_SCORES) - 1) / 2
  for offset, (score, label) in enumerate(_CHART_SCORES):
    values = record[f'per_class_{score}']
    axes.bar(np.arange(len(names)) + (offset - middle) * width,
             [values[name] or 0.0 for name in names], width,
             label=f'{label} (mean {record[f"mean_{score}"]:.4f})')
  axes.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
  axes.set_ylim(0.0, 1.0)
  axes.set_ylabel('score')
  axes.set_title(title)
  axes.legend(loc='upper left', bbox_to_anchor=(1.0, 1.0), fontsize=7)
  _save(pyplot, figure, path)


def save_class_share_chart(shares, class_names, path, title=''):
  """Saves a bar chart of each class's share of the labelled pixels as PNG.

  Args:
    shares: float [C], percentages, e.g. from `stats.class_shares`.
    class_names: C names.
    path: str, the PNG to write.
    title: str, the figure title.
  """
  pyplot = _pyplot()
  figure, _ = _bar_chart(pyplot, class_names, shares, '% of labelled pixels',
                         title)
  _save(pyplot, figure, path)
