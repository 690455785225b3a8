"""A synthetic segmentation set where labels are scarce: classes are shape and texture together."""

import dataclasses

import numpy as np
import tensorflow as tf

from official_seg.datasets import synthetic

SHAPES = ('disk', 'square', 'triangle', 'cross')
TEXTURES = ('stripes', 'checks')
# Every class is one shape in one texture: no shape and no texture alone
# names a class, so a model must learn both and their pairing.
CLASSES = tuple((shape, texture) for shape in SHAPES for texture in TEXTURES)
CLASS_NAMES = ('background',) + tuple(f'{s}_{t}' for s, t in CLASSES)
IGNORE_LABEL = synthetic.IGNORE_LABEL
# Distractors, labelled background: a shape of no class in a class texture,
# or a class shape in a texture of no class.
DISTRACTOR_SHAPES = ('ring',)
DISTRACTOR_TEXTURES = ('speckle',)


@dataclasses.dataclass(frozen=True)
class DrawnObject:
  """One object as drawn, for tests and statistics.

  Attributes:
    shape: str, from SHAPES or DISTRACTOR_SHAPES.
    texture: str, from TEXTURES or DISTRACTOR_TEXTURES.
    class_id: int, 1..8, or 0 for a distractor.
    size: float, half its extent in pixels.
    drawn: int, pixels it covered when drawn.
    visible: int, pixels still its own in the final image.
  """
  shape: str
  texture: str
  class_id: int
  size: float
  drawn: int
  visible: int


def _shape_mask(shape, yy, xx, cy, cx, size, angle):
  """Boolean mask of one shape of half-extent `size`, turned by `angle`."""
  dy, dx = yy - cy, xx - cx
  cos, sin = np.cos(angle), np.sin(angle)
  u, v = dx * cos + dy * sin, -dx * sin + dy * cos
  if shape == 'disk':
    return u ** 2 + v ** 2 <= size ** 2
  if shape == 'ring':
    radius = np.sqrt(u ** 2 + v ** 2)
    return (radius <= size) & (radius >= 0.6 * size)
  if shape == 'square':
    return (np.abs(u) <= 0.85 * size) & (np.abs(v) <= 0.85 * size)
  if shape == 'cross':
    arm = 0.33 * size
    return (((np.abs(u) <= size) & (np.abs(v) <= arm)) |
            ((np.abs(v) <= size) & (np.abs(u) <= arm)))
  # Triangle: below two slanted edges, above the base.
  top = v + size
  return (top >= 0) & (v <= size) & (np.abs(u) <= top * 0.58)


def _texture(rng, texture, yy, xx):
  """A [H, W] pattern in [0, 1] of a random period and orientation."""
  if texture == 'speckle':
    return (rng.random(yy.shape) < 0.5).astype(np.float32)
  period = rng.uniform(6.0, 11.0)
  angle = rng.uniform(0, np.pi)
  u = xx * np.cos(angle) + yy * np.sin(angle)
  if texture == 'stripes':
    return (np.sin(2 * np.pi * u / period) > 0).astype(np.float32)
  v = -xx * np.sin(angle) + yy * np.cos(angle)
  return ((np.floor(u / period) + np.floor(v / period)) % 2).astype(
      np.float32)


def _colour_pair(rng):
  """Two colours of one object's texture, of any hue, apart in brightness."""
  first = rng.uniform(30, 225, size=3)
  second = np.clip(first + rng.choice([-1, 1]) * rng.uniform(60, 110) +
                   rng.uniform(-30, 30, size=3), 0, 255)
  return first, second


def _background(rng, height, width):
  """Smooth colour blobs of a random tone: no pattern of any class."""
  coarse = rng.normal(size=(1, height // 24 + 2, width // 24 + 2, 3))
  smooth = tf.image.resize(coarse, [height, width], method='bicubic')
  tone = rng.uniform(60, 190, size=3)
  return tone + 35 * smooth.numpy()[0]


def _pick(rng, distractor_share):
  """(shape, texture, class id) of one object: a class or a distractor."""
  if rng.random() >= distractor_share:
    class_id = int(rng.integers(1, len(CLASS_NAMES)))
    shape, texture = CLASSES[class_id - 1]
    return shape, texture, class_id
  if rng.random() < 0.5:
    return (DISTRACTOR_SHAPES[0], TEXTURES[int(rng.integers(len(TEXTURES)))],
            0)
  return SHAPES[int(rng.integers(len(SHAPES)))], DISTRACTOR_TEXTURES[0], 0


def _lighting(rng, image, yy, xx):
  """A brightness ramp in a random direction, a colour cast, sensor noise."""
  height, width = yy.shape
  angle = rng.uniform(0, 2 * np.pi)
  ramp = ((xx / width - 0.5) * np.cos(angle) +
          (yy / height - 0.5) * np.sin(angle))
  gain = rng.uniform(0.6, 1.3) + rng.uniform(0.0, 0.6) * ramp
  cast = rng.uniform(0.75, 1.25, size=3)
  image = image * gain[..., None] * cast
  return image + rng.normal(scale=6, size=image.shape)


def make_sample(rng, min_size=180, max_size=220, max_objects=6,
                distractor_share=0.3, band=1):
  """Draws one image, its label map and the objects drawn.

  Objects are drawn one over another (later ones occlude earlier ones) at
  sizes from 5% to 30% of the shorter side, in colours of any hue; a
  distractor takes its pixels from the classes under it and labels them
  background. Lighting varies over the image and between images.

  Args:
    rng: a `np.random.Generator`.
    min_size: int, smallest image side.
    max_size: int, largest image side.
    max_objects: int, most objects on one image (at least 2 are drawn).
    distractor_share: float, chance that an object is a distractor.
    band: int, width of the ignore band at label borders.

  Returns:
    (image uint8 [H, W, 3], label uint8 [H, W], list of `DrawnObject`).
  """
  height, width = (int(v) for v in rng.integers(min_size, max_size + 1, 2))
  yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
  image = _background(rng, height, width)
  label = np.zeros((height, width), np.uint8)
  owner = np.full((height, width), -1, np.int32)
  picks = []
  for index in range(int(rng.integers(2, max_objects + 1))):
    shape, texture, class_id = _pick(rng, distractor_share)
    size = rng.uniform(0.05, 0.3) * min(height, width)
    cy, cx = rng.uniform(0, height), rng.uniform(0, width)
    mask = _shape_mask(shape, yy, xx, cy, cx, size, rng.uniform(0, np.pi))
    light, dark = _colour_pair(rng)
    pattern = _texture(rng, texture, yy, xx)[..., None]
    image = np.where(mask[..., None], light * pattern + dark * (1 - pattern),
                     image)
    label[mask] = class_id
    owner[mask] = index
    picks.append((shape, texture, class_id, size, int(mask.sum())))
  image = np.clip(_lighting(rng, image, yy, xx), 0, 255).astype(np.uint8)
  objects = [DrawnObject(*pick, visible=int((owner == i).sum()))
             for i, pick in enumerate(picks)]
  return image, synthetic.ignore_borders(label, band), objects


def examples(num_images, seed, image_format='png', tally=None,
             **sample_kwargs):
  """Yields `num_images` `tf.train.Example`s of the set (see `make_sample`).

  Args:
    num_images: int.
    seed: int; the same seed gives the same images.
    image_format: 'png' (default: JPEG blurs the finest stripes) or 'jpeg'.
    tally: optional `split_metadata.Tally`.
    **sample_kwargs: passed to `make_sample`.

  Yields:
    `tf.train.Example` in the DeepLab format.
  """
  rng = np.random.default_rng(seed)
  samples = (make_sample(rng, **sample_kwargs)[:2] for _ in range(num_images))
  yield from synthetic.encoded_examples(samples, f'scarce_{seed}',
                                        image_format, tally)


def write_dataset(output_dir, splits, num_shards=4, **kwargs):
  """Writes each split (name to image count) as shards with its metadata.

  Returns:
    A dict of split name to the number of images written.
  """
  return synthetic.write_splits(
      output_dir, splits, num_shards,
      lambda count, seed, tally: examples(count, seed=seed, tally=tally,
                                          **kwargs), first_seed=100)
