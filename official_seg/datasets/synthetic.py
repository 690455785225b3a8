"""A learnable synthetic segmentation dataset in the DeepLab TFExample format."""

import numpy as np
import tensorflow as tf

from official_seg.data import split_metadata
from official_seg.data import tfexample

CLASS_NAMES = ('background', 'disk', 'box', 'triangle')
IGNORE_LABEL = 255
# Each shape class has a base colour; the jitter below keeps colour alone from
# being a perfect cue, so the model also has to use texture and shape.
BASE_COLOURS = {1: (200, 60, 50), 2: (60, 170, 70), 3: (60, 80, 200)}


def background(rng, height, width):
  """Low-frequency noise plus stripes, in a random grey-brown tone."""
  yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
  angle = rng.uniform(0, np.pi)
  period = rng.uniform(6, 20)
  stripes = np.sin((xx * np.cos(angle) + yy * np.sin(angle)) * 2 * np.pi / period)
  coarse = rng.normal(size=(height // 8 + 2, width // 8 + 2))
  coarse = np.kron(coarse, np.ones((8, 8)))[:height, :width]
  tone = rng.uniform(70, 170, size=3)
  image = tone + 25 * stripes[..., None] + 20 * coarse[..., None]
  return image + rng.normal(scale=8, size=image.shape)


def shape_mask(rng, class_id, height, width):
  """A boolean mask of one random disk, box or triangle."""
  yy, xx = np.mgrid[0:height, 0:width]
  size = rng.uniform(0.12, 0.3) * min(height, width)
  cy, cx = rng.uniform(size, height - size), rng.uniform(size, width - size)
  if class_id == 1:
    return (yy - cy) ** 2 + (xx - cx) ** 2 <= size ** 2
  if class_id == 2:
    return (np.abs(yy - cy) <= size) & (np.abs(xx - cx) <= size * 0.8)
  # Triangle pointing up: below the two slanted edges and above the base.
  dy = yy - (cy - size)
  return (dy >= 0) & (yy <= cy + size) & (np.abs(xx - cx) <= dy * 0.6)


def ignore_borders(label, band):
  """Marks pixels within `band` of a class boundary as ignore, as VOC does."""
  height, width = label.shape
  padded = np.pad(label, band, mode='edge')
  border = np.zeros_like(label, dtype=bool)
  for dy in range(-band, band + 1):
    for dx in range(-band, band + 1):
      shifted = padded[band + dy:band + dy + height, band + dx:band + dx + width]
      border |= shifted != label
  out = label.copy()
  out[border] = IGNORE_LABEL
  return out


def make_sample(rng, min_size=72, max_size=144, max_shapes=4, band=1):
  """Draws one image and its label map.

  Args:
    rng: a `np.random.Generator`.
    min_size: int, smallest image side.
    max_size: int, largest image side.
    max_shapes: int, most shapes drawn on one image.
    band: int, width in pixels of the ignore band around object borders.

  Returns:
    (image uint8 [H, W, 3], label uint8 [H, W]).
  """
  height, width = rng.integers(min_size, max_size + 1, size=2)
  image = background(rng, height, width)
  label = np.zeros((height, width), np.uint8)
  for _ in range(rng.integers(1, max_shapes + 1)):
    class_id = int(rng.integers(1, len(CLASS_NAMES)))
    mask = shape_mask(rng, class_id, height, width)
    colour = np.array(BASE_COLOURS[class_id]) + rng.uniform(-40, 40, size=3)
    shading = rng.normal(scale=12, size=(height, width, 1))
    image = np.where(mask[..., None], colour + shading, image)
    label[mask] = class_id
  image = np.clip(image, 0, 255).astype(np.uint8)
  return image, ignore_borders(label, band)


def examples(num_images, seed, image_format='jpeg', tally=None,
             **sample_kwargs):
  """Yields `num_images` synthetic `tf.train.Example`s.

  Args:
    num_images: int, how many examples.
    seed: int, seeds the generator so a split is reproducible.
    image_format: 'jpeg' or 'png'.
    tally: optional `split_metadata.Tally`, given each image's size, label
      counts and filename as it is yielded.
    **sample_kwargs: passed to `make_sample`.

  Yields:
    `tf.train.Example` in the DeepLab format.
  """
  rng = np.random.default_rng(seed)
  samples = (make_sample(rng, **sample_kwargs) for _ in range(num_images))
  yield from encoded_examples(samples, f'synthetic_{seed}', image_format,
                              tally)


def encoded_examples(samples, stem, image_format, tally=None):
  """The DeepLab examples of (image, label) pairs, named `<stem>_<index>`.

  Args:
    samples: iterable of (image uint8 [H, W, 3], label uint8 [H, W]).
    stem: str, each record filename's start; the index and format follow.
    image_format: 'jpeg' or 'png'.
    tally: optional `split_metadata.Tally`, given each image's size, label
      counts and filename as it is yielded.

  Yields:
    `tf.train.Example` in the DeepLab format.
  """
  encode = tf.io.encode_jpeg if image_format == 'jpeg' else tf.io.encode_png
  for index, (image, label) in enumerate(samples):
    filename = f'{stem}_{index:06d}.{image_format[:3]}'
    if tally is not None:
      tally.add(*label.shape, np.bincount(label.ravel(), minlength=256),
                filename)
    yield tfexample.make_example(
        image_bytes=encode(image).numpy(),
        label_bytes=tf.io.encode_png(label[..., None]).numpy(),
        filename=filename,
        image_format=image_format,
        height=image.shape[0],
        width=image.shape[1])


def write_dataset(output_dir, splits, num_shards=2, **kwargs):
  """Writes each split as shards and its `split_metadata` file.

  Args:
    output_dir: str, the dataset folder.
    splits: dict, split name to number of images.
    num_shards: int, shards per split.
    **kwargs: passed to `examples`.

  Returns:
    A dict of split name to the number of images written.
  """
  return write_splits(output_dir, splits, num_shards,
                      lambda count, seed, tally: examples(
                          count, seed=seed, tally=tally, **kwargs))


def write_splits(output_dir, splits, num_shards, make_examples, first_seed=0):
  """Writes each split's examples as shards beside its `split_metadata` file.

  Args:
    output_dir: str, the dataset folder.
    splits: dict, split name to number of images.
    num_shards: int, shards per split.
    make_examples: callable (count, seed, tally) -> iterable of
      `tf.train.Example`s, adding each label to the `split_metadata.Tally`.
    first_seed: int, the seed of the first split in name order; the next
      ones count up from it.

  Returns:
    A dict of split name to the number of images written.
  """
  written = {}
  for seed, (split, count) in enumerate(sorted(splits.items()), first_seed):
    tally = split_metadata.Tally()
    written[split] = tfexample.write_shards(
        make_examples(count, seed, tally), output_dir, split, num_shards)
    split_metadata.write_tally(output_dir, split, tally)
  return written
