"""A synthetic set with one rare class: thin cracks, at most 1% of the pixels, among large shapes.

Images are a mottled surface (background) bearing large disks and boxes
and, on most images, one crack: a dark path 2 or 3 pixels wide that wanders
over surface and shapes alike. A crack covers at most `crack_share` (1%) of
its image's pixels and no pixel is ignored, so the crack class holds at most
1% of a split's labelled pixels.

Why plain cross-entropy fails on it: the loss is the mean over labelled
pixels, so a class of 1% of them carries about 1% of the loss. A model that
paints each crack as the surface or shape under it is wrong on under 1% of
the pixels and pays little for it, while the other 99% shape its features:
the crack's IoU can stay near 0 while the mean IoU looks fair. The class is
learnable all the same: a crack is much darker than what lies under it and
thinner than any shape, a local cue that a few convolutions see.
"""

import numpy as np
import tensorflow as tf

from official_seg.datasets import synthetic

CLASS_NAMES = ('background', 'disk', 'box', 'crack')
CRACK = 3
# No pixel carries it; the value the dataset file names.
IGNORE_LABEL = synthetic.IGNORE_LABEL
_COLOURS = {1: (190, 150, 60), 2: (70, 140, 170)}
# A crack advances this many pixels between the points it is drawn at.
_STEP = 0.5
# Its heading stays within this many radians of its first one, so that it
# never turns back over itself (where it would be thicker).
_MAX_TURN = 0.8


def _surface(rng, height, width):
  """Smooth blotches and fine grain in one random tone."""
  coarse = rng.normal(size=(1, height // 16 + 2, width // 16 + 2, 1))
  blotches = tf.image.resize(coarse, [height, width]).numpy()[0]
  tone = rng.uniform(100, 200, size=3)
  return tone + 25 * blotches + rng.normal(scale=10, size=(height, width, 3))


def _shape_mask(rng, class_id, yy, xx):
  """A disk, or a box of random aspect, 12% to 30% of the shorter side."""
  size = rng.uniform(0.12, 0.3) * min(yy.shape)
  cy, cx = rng.uniform(0, yy.shape[0]), rng.uniform(0, yy.shape[1])
  if class_id == 1:
    return (yy - cy) ** 2 + (xx - cx) ** 2 <= size ** 2
  return ((np.abs(yy - cy) <= size * rng.uniform(0.5, 1.0)) &
          (np.abs(xx - cx) <= size))


def _crack_path(rng, height, width):
  """(rows, cols) of the pixels a crack's square brush covers, in order.

  The path runs 25% to 60% of the shorter side from a point of the image's
  middle 60%, its heading swaying smoothly; pixels may repeat, those
  outside the image are dropped.
  """
  points = int(rng.uniform(0.25, 0.6) * min(height, width) / _STEP)
  phase = rng.uniform(0, 2 * np.pi, size=2)
  wave = np.linspace(0, rng.uniform(1, 4) * np.pi, points)
  heading = rng.uniform(0, 2 * np.pi) + _MAX_TURN / 2 * (
      np.sin(wave + phase[0]) + np.sin(2.3 * wave + phase[1]))
  start = rng.uniform(0.2, 0.8, size=2) * (height, width)
  y = start[0] + np.cumsum(_STEP * np.sin(heading))
  x = start[1] + np.cumsum(_STEP * np.cos(heading))
  brush = np.arange(int(rng.integers(2, 4)))
  rows = np.floor(y).astype(int)[:, None, None] + brush[:, None]
  cols = np.floor(x).astype(int)[:, None, None] + brush[None, :]
  rows, cols = (a.ravel() for a in np.broadcast_arrays(rows, cols))
  inside = (rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)
  return rows[inside], cols[inside]


def _crack_mask(rng, height, width, budget):
  """A boolean mask of one crack, cut after its first `budget` pixels."""
  rows, cols = _crack_path(rng, height, width)
  _, first = np.unique(rows * width + cols, return_index=True)
  keep = np.sort(first)[:budget]
  mask = np.zeros((height, width), bool)
  mask[rows[keep], cols[keep]] = True
  return mask


def make_sample(rng, min_size=96, max_size=144, max_shapes=3,
                crack_chance=0.8, crack_share=0.01):
  """Draws one image and its label map.

  Args:
    rng: a `np.random.Generator`.
    min_size: int, smallest image side.
    max_size: int, largest image side.
    max_shapes: int, most disks and boxes on one image (at least 1).
    crack_chance: float, the chance that an image holds a crack.
    crack_share: float, the largest share of an image's pixels its crack
      covers; a longer crack is cut.

  Returns:
    (image uint8 [H, W, 3], label uint8 [H, W]).
  """
  height, width = (int(v) for v in rng.integers(min_size, max_size + 1, 2))
  yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
  image = _surface(rng, height, width)
  label = np.zeros((height, width), np.uint8)
  for _ in range(int(rng.integers(1, max_shapes + 1))):
    class_id = int(rng.integers(1, CRACK))
    mask = _shape_mask(rng, class_id, yy, xx)
    colour = np.array(_COLOURS[class_id]) + rng.uniform(-30, 30, size=3)
    shading = rng.normal(scale=10, size=(height, width, 1))
    image = np.where(mask[..., None], colour + shading, image)
    label[mask] = class_id
  if rng.random() < crack_chance:
    mask = _crack_mask(rng, height, width,
                       int(crack_share * height * width))
    image[mask] *= rng.uniform(0.3, 0.5)
    label[mask] = CRACK
  return np.clip(image, 0, 255).astype(np.uint8), label


def examples(num_images, seed, image_format='png', tally=None,
             **sample_kwargs):
  """Yields `num_images` `tf.train.Example`s of the set (see `make_sample`).

  Args:
    num_images: int.
    seed: int; the same seed gives the same images.
    image_format: 'png' (default: JPEG blurs a crack into its surface) or
      'jpeg'.
    tally: optional `split_metadata.Tally`.
    **sample_kwargs: passed to `make_sample`.

  Yields:
    `tf.train.Example` in the DeepLab format.
  """
  rng = np.random.default_rng(seed)
  samples = (make_sample(rng, **sample_kwargs) for _ in range(num_images))
  yield from synthetic.encoded_examples(samples, f'rare_{seed}', image_format,
                                        tally)


def write_dataset(output_dir, splits, num_shards=4, **kwargs):
  """Writes each split (name to image count) as shards with its metadata and
  image classes; splits in name order take seeds 200, 201, ...

  Returns:
    A dict of split name to the number of images written.
  """
  return synthetic.write_splits(
      output_dir, splits, num_shards,
      lambda count, seed, tally: examples(count, seed=seed, tally=tally,
                                          **kwargs), first_seed=200)
