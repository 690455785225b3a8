"""Synthetic sets whose class signal needs 16 bits or a fourth channel, each with its reduced arm.

Two sets, each written twice from the same seeds: in full, and reduced to
what an 8-bit RGB pipeline keeps, so that a model trained on each arm shows
what the reduction costs.

- `faint16`: 16-bit grey images. Every image's background sits at one
  level of a narrow band inside one 8-bit step (of 257); 'visible'
  objects lie one 8-bit step below it, 'faint' objects 160 (of 65535)
  above it. In most images background and faint pixels share an 8-bit
  step, so the reduced arm (round(v / 257), the usual 16-to-8-bit scaling)
  gives them equal values; in the others a part of the faint pixels rounds
  one step up. In 16 bits one threshold separates faint from background
  pixels in every image, by more than the set's standard deviation.
- `fourth_channel`: 8-bit images of 4 channels: RGB and a fourth channel (an
  infrared or height band). 'box' and 'marked_box' draw their shape and
  colour from one distribution; only the fourth channel marks a marked box.
  The reduced arm keeps RGB, in which the two classes cannot be told apart.
"""

import numpy as np

from official_seg.data import encode
from official_seg.data import tfexample
from official_seg.datasets import colour_masks
from official_seg.datasets import convert
from official_seg.datasets import synthetic

SETS = ('faint16', 'fourth_channel')
CLASS_NAMES = {'faint16': ('background', 'visible', 'faint'),
               'fourth_channel': ('background', 'disk', 'box', 'marked_box')}
_COLOURS = {'faint16': [[0, 0, 0], [255, 200, 40], [230, 40, 200]],
            'fourth_channel': [[0, 0, 0], [250, 50, 83], [51, 221, 255],
                               [61, 61, 245]]}
# faint16: the background's level is 257 * _STEP + r with r drawn from
# _LEVELS (inclusive), its noise within +-_NOISE; a faint object lies
# _FAINT above it, a visible one 257 below it. round(v / 257) maps
# 257 * _STEP + d to _STEP for -128 <= d <= 128: the background's d, within
# r +- _NOISE, always; a faint pixel's, r + _FAINT + noise, whenever
# r <= 128 - _FAINT - _NOISE (85 of the 97 levels), and partly otherwise; a
# visible pixel's, r - 257 + noise, always one step lower. The levels'
# spread (97) is below the faint offset and the visible objects lie one step
# away only, so the set's standard deviation stays below the faint offset.
_STEP = 128
_LEVELS = (-122, -26)
_FAINT = 160
_NOISE = 6
# fourth_channel: the fourth channel's mean on the background, disks and
# boxes, and on marked boxes.
_PLAIN_FOURTH, _MARKED_FOURTH = 100.0, 170.0
_FIRST_SEED = 300


def to_8_bit(image):
  """16-bit pixels scaled to 8 bits: round(v * 255 / 65535) = round(v / 257)."""
  return np.round(np.asarray(image, np.float64) / 257).astype(np.uint8)


def _size(rng, min_size, max_size):
  return (int(v) for v in rng.integers(min_size, max_size + 1, 2))


def faint16_sample(rng, min_size=72, max_size=128, max_shapes=4):
  """Draws one 16-bit image of `faint16` and its labels.

  Args:
    rng: a `np.random.Generator`.
    min_size: int, smallest image side.
    max_size: int, largest image side.
    max_shapes: int, most objects on one image (at least 1).

  Returns:
    (image uint16 [H, W, 1], label uint8 [H, W]).
  """
  height, width = _size(rng, min_size, max_size)
  level = 257 * _STEP + int(rng.integers(_LEVELS[0], _LEVELS[1] + 1))
  offsets = np.zeros((height, width))
  label = np.zeros((height, width), np.uint8)
  for _ in range(int(rng.integers(1, max_shapes + 1))):
    class_id = int(rng.integers(1, 3))
    mask = synthetic.shape_mask(rng, int(rng.integers(1, 4)), height, width)
    offsets[mask] = -257 if class_id == 1 else _FAINT
    label[mask] = class_id
  noise = rng.integers(-_NOISE, _NOISE + 1, (height, width))
  image = (level + offsets + noise).astype(np.uint16)
  return image[..., None], label


def fourth_channel_sample(rng, marks, min_size=72, max_size=128,
                          max_shapes=4):
  """Draws one 4-channel image of `fourth_channel` and its labels.

  Args:
    rng: a `np.random.Generator` of everything but the marks.
    marks: a `np.random.Generator` of whether each box is marked, so that
      the RGB pixels cannot depend on it.
    min_size: int, smallest image side.
    max_size: int, largest image side.
    max_shapes: int, most objects on one image (at least 1).

  Returns:
    (image uint8 [H, W, 4], label uint8 [H, W]).
  """
  height, width = _size(rng, min_size, max_size)
  rgb = synthetic.background(rng, height, width)
  fourth = np.full((height, width), _PLAIN_FOURTH)
  label = np.zeros((height, width), np.uint8)
  for _ in range(int(rng.integers(1, max_shapes + 1))):
    shape = int(rng.integers(1, 3))
    mask = synthetic.shape_mask(rng, shape, height, width)
    base = synthetic.BASE_COLOURS[shape]
    colour = np.array(base) + rng.uniform(-40, 40, size=3)
    rgb = np.where(mask[..., None], colour + rng.normal(
        scale=12, size=(height, width, 1)), rgb)
    marked = shape == 2 and marks.random() < 0.5
    fourth[mask] = _MARKED_FOURTH if marked else _PLAIN_FOURTH
    label[mask] = 3 if marked else shape
  fourth = fourth + rng.normal(scale=12, size=(height, width))
  image = np.concatenate([rgb, fourth[..., None]], axis=2)
  return np.clip(np.round(image), 0, 255).astype(np.uint8), label


def reduced(name, image):
  """The image as the reduced arm stores it: 8 bits, or RGB alone."""
  return to_8_bit(image) if name == 'faint16' else image[..., :3]


def samples(name, num_images, seed, reduce=False, **sample_kwargs):
  """Yields (image, label) pairs of set `name`, reduced when asked."""
  rng = np.random.default_rng(seed)
  marks = np.random.default_rng([seed, 1])
  for _ in range(num_images):
    image, label = (faint16_sample(rng, **sample_kwargs) if name == 'faint16'
                    else fourth_channel_sample(rng, marks, **sample_kwargs))
    yield (reduced(name, image) if reduce else image), label


def examples(pairs, stem, tally):
  """DeepLab examples of (image, label) pairs, stored as `build_tfrecords`
  stores images of their channels and depth.

  Args:
    pairs: iterable of (image uint8 or uint16 [H, W, C], label uint8
      [H, W]).
    stem: str, each record filename's start; the index follows.
    tally: a `split_metadata.Tally`, given each label and the images' kind.

  Yields:
    `tf.train.Example` in the DeepLab format.
  """
  for index, (image, label) in enumerate(pairs):
    filename = f'{stem}_{index:06d}.png'
    stored = encode.stored_pixels(image, filename)
    tally.kind = (stored.channels, stored.bit_depth)
    tally.add(*label.shape, np.bincount(label.ravel(), minlength=256),
              filename)
    yield tfexample.make_example(
        stored.data, encode.encode_pixels_png(label[..., None]), filename,
        stored.image_format, stored.height, stored.width, stored.channels)


def write_dataset(output_dir, name, splits, reduce=False, num_shards=2,
                  **sample_kwargs):
  """Writes set `name` as shards, split metadata and `dataset.gin`.

  Splits in name order take seeds 300, 301, ...; both arms of a set draw
  the same images.

  Args:
    output_dir: str, the dataset folder.
    name: one of `SETS`.
    splits: dict, split name to number of images.
    reduce: bool, write the reduced arm.
    num_shards: int, shards per split.
    **sample_kwargs: passed to the set's sample function.

  Returns:
    (dict of split name to images written, the dataset gin file's path).
  """
  written = synthetic.write_splits(
      output_dir, splits, num_shards, lambda count, seed, tally: examples(
          samples(name, count, seed, reduce, **sample_kwargs),
          f'{name}_{seed}', tally), first_seed=_FIRST_SEED)
  colours = colour_masks.colour_map(
      f'make_channel_dataset --set={name}', CLASS_NAMES[name],
      _COLOURS[name], synthetic.IGNORE_LABEL, _COLOURS[name])
  path = convert.write_dataset_gin(colours, output_dir)
  with open(path) as f:
    text = f.read().replace('Written by build_tfrecords from ', 'Written by ')
  with open(path, 'w') as f:
    f.write(text)
  return written, path
