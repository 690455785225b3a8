"""Class-balanced labeled subsets of a split, deterministic by seed."""

import collections
import fractions
import os

import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import encode
from official_seg.data import input_fn
from official_seg.data import split_metadata
from official_seg.data import storage
from official_seg.data import tfexample
from official_seg.datasets import convert

# Random draws tried before the greedy cover; see `select`.
MAX_DRAWS = 1000
_LABEL_VALUES = 256

# What a split holds, one row per image in a fixed order (by name): names
# (list of str, record filenames or stems), sizes (int64 [n, 2], height and
# width), label_counts (int64 [n, 256], pixels of each label value) and
# positions (int64 [n], each image's place in the split's own order).
SplitLabels = collections.namedtuple(
    'SplitLabels', ['names', 'sizes', 'label_counts', 'positions'])
# indices: int64 [size], sorted rows of the split; draws: random draws made,
# the last accepted, or 0 when the greedy cover chose; missing: classes
# present in the split but in no image of the subset.
Subset = collections.namedtuple('Subset', ['indices', 'draws', 'missing'])


def parse_fraction(text):
  """Reads a fraction such as '1/16' or '0.125'.

  Raises:
    validation.ConfigurationError: not a number in (0, 1]; names --fraction.
  """
  try:
    value = fractions.Fraction(text.strip())
  except (ValueError, ZeroDivisionError):
    value = None
  if value is None or not 0 < value <= 1:
    raise validation.ConfigurationError(
        f'--fraction={text!r} is not a fraction in (0, 1]; '
        'write it as 1/2, 1/4, 1/8, 1/16 or a decimal.')
  return value


def subset_size(num_images, fraction=None, count=None):
  """The number of images to keep: `round(num_images * fraction)` or `count`.

  Python's round() goes to the even neighbour at .5, so 1/16 of VOC's 1464
  images gives 92, the size of PseudoSeg's 1/16 lists.

  Args:
    num_images: int, images of the split.
    fraction: `fractions.Fraction` or None.
    count: int or None; exactly one of `fraction` and `count` is given.

  Returns:
    int in [1, num_images].

  Raises:
    validation.ConfigurationError: both or neither given, or a size outside
      [1, num_images]; the message names --fraction or --count.
  """
  if (fraction is None) == (count is None):
    raise validation.ConfigurationError(
        'Give exactly one of --fraction and --count.')
  if count is not None:
    if not 1 <= count <= num_images:
      raise validation.ConfigurationError(
          f'--count={count} is outside 1-{num_images}, the '
          'images of the split.')
    return int(count)
  size = round(num_images * fraction)
  if size < 1:
    raise validation.ConfigurationError(
        f'--fraction={fraction} of {num_images} images keeps '
        'none; use a larger fraction or --count.')
  return size


def default_name(split, fraction=None, count=None):
  """`<split>_1_16` for a fraction 1/16, `<split>_<count>` for a count."""
  if fraction is not None:
    return f'{split}_{fraction.numerator}_{fraction.denominator}'
  return f'{split}_{count}'


def class_presence(label_counts, num_classes, ignore_label):
  """Which classes occur in each image.

  Args:
    label_counts: int [n, 256], pixels of each label value per image.
    num_classes: int, C.
    ignore_label: int; its pixels belong to no class.

  Returns:
    bool [n, C].
  """
  present = np.asarray(label_counts)[:, :num_classes] > 0
  if ignore_label < num_classes:
    present[:, ignore_label] = False
  return present


def _greedy_cover(presence, size, rng):
  """Rows of an image per class, rarest class first, then random ones.

  For each class not yet covered, in order of how few images hold it, the
  image covering most uncovered classes joins (ties broken by `rng`); the
  rest of `size` is drawn uniformly from the other images.
  """
  required = presence.any(axis=0)
  chosen = []
  covered = np.zeros_like(required)
  for cls in np.argsort(presence.sum(axis=0), kind='stable'):
    if len(chosen) == size or not required[cls] or covered[cls]:
      continue
    gain = np.where(presence[:, cls], (presence & ~covered).sum(axis=1), -1)
    gain[chosen] = -1
    candidates = np.flatnonzero(gain == gain.max())
    pick = int(rng.choice(candidates))
    chosen.append(pick)
    covered |= presence[pick]
  rest = np.setdiff1d(np.arange(len(presence)), chosen)
  fill = rng.choice(rest, size - len(chosen), replace=False)
  return np.concatenate([np.asarray(chosen, np.int64), fill])


def select(presence, size, seed, max_draws=MAX_DRAWS):
  """Picks `size` images so that every class of the split occurs.

  Sampling with rejection, as PseudoSeg's balanced `16_clean` lists were
  made: uniform draws of `size` images until one holds every class present
  in the split. The accepted draw is uniform among such subsets, so the
  classes keep the split's frequencies, which the unlabeled pool shares; a
  greedy balance would over-sample rare classes. When `max_draws` draws all
  miss a class (rare classes, tiny subsets), `_greedy_cover` chooses.

  Args:
    presence: bool [n, C], from `class_presence`.
    size: int in [1, n].
    seed: int; the same presence, size and seed give the same subset.
    max_draws: int, random draws tried before the greedy cover.

  Returns:
    `Subset`.
  """
  presence = np.asarray(presence, bool)
  required = presence.any(axis=0)
  rng = np.random.default_rng(seed)
  indices, draws = None, 0
  for draw in range(1, max_draws + 1):
    candidate = rng.choice(len(presence), size, replace=False)
    if presence[candidate].any(axis=0)[required].all():
      indices, draws = candidate, draw
      break
  if indices is None:
    indices = _greedy_cover(presence, size, rng)
  indices = np.sort(indices).astype(np.int64)
  missing = np.flatnonzero(required & ~presence[indices].any(axis=0))
  return Subset(indices, draws, missing.tolist())


def _ordered(names, sizes, label_counts):
  """`SplitLabels` with rows sorted by name, so the shards' order is moot."""
  order = sorted(range(len(names)), key=lambda i: (names[i], i))
  return SplitLabels([names[i] for i in order],
                     np.asarray(sizes, np.int64).reshape(-1, 2)[order],
                     np.asarray(label_counts, np.int64).reshape(
                         -1, _LABEL_VALUES)[order],
                     np.asarray(order, np.int64))


def _record_row(serialized):
  """(filename, int32 [2] size, int64 [256] label counts) of one record."""
  size, counts = split_metadata.record_facts(serialized)
  _, _, filename = tfexample.Decoder().encoded(serialized)
  return filename, size, counts


def read_shards(data_dir, split):
  """Reads the filename, size and label histogram of every record of a split.

  Returns:
    `SplitLabels`, named by record filename.

  Raises:
    validation.MissingFileError: no shard of the split; the message names
      the pattern.
    tf.errors.OpError: a record that does not read or decode.
  """
  dataset = tf.data.TFRecordDataset(input_fn.list_shards(data_dir, split))
  dataset = dataset.map(_record_row, num_parallel_calls=tf.data.AUTOTUNE)
  names, sizes, counts = [], [], []
  for filename, size, label_counts in dataset.as_numpy_iterator():
    names.append(filename.decode('utf-8'))
    sizes.append(size)
    counts.append(label_counts)
  return _ordered(names, sizes, counts)


def check_target(data_dir, split, name, overwrite):
  """Refuses to replace `split` itself, or shards of `name` unless `overwrite`.

  Raises:
    validation.ConfigurationError: `name` is `split`; names --name.
    validation.OutputExistsError: shards of `name` exist; names --name and
      --overwrite.
  """
  if name == split:
    raise validation.ConfigurationError(
        f'--name={name!r} is the split read; the subset needs a '
        'name of its own.')
  existing = tf.io.gfile.glob(tfexample.shard_pattern(data_dir, name))
  if existing and not overwrite:
    raise validation.OutputExistsError(
        f'{len(existing)} shards of split {name!r} already match '
        f'{tfexample.shard_pattern(data_dir, name)}; pass --overwrite to '
        'replace them, or choose another --name.')


def write_shards(data_dir, split, name, labels, indices, num_shards):
  """Copies the chosen records of `split` into the new split `name`.

  The examples are copied as they are (images and labels not re-encoded)
  through `convert.write_split`, which writes the split's metadata file too;
  earlier shards of `name` go first.

  Args:
    data_dir: str, the folder of both splits.
    split: str, the split read.
    name: str, the split written; not `split`.
    labels: `SplitLabels` of `split`, from `read_shards`.
    indices: int [k], rows of `labels` to keep.
    num_shards: int, shards of the new split.

  Returns:
    int, records written.
  """
  if name == split:
    raise validation.ConfigurationError(
        f'--name={name!r} is the split read; the subset needs a '
        'name of its own.')
  keep = set(labels.positions[np.asarray(indices)].tolist())
  tally = split_metadata.Tally()
  for row in np.sort(indices):
    tally.add(*labels.sizes[row], labels.label_counts[row],
              labels.names[row])
  files = input_fn.list_shards(data_dir, split)
  convert.clear_shards(data_dir, name, overwrite=True)

  def examples():
    records = tf.data.TFRecordDataset(files).as_numpy_iterator()
    for position, record in enumerate(records):
      if position in keep:
        yield tf.train.Example.FromString(record)

  return convert.write_split(examples(), data_dir, name,
                             min(num_shards, len(keep)), tally)


def stem(name):
  """A record filename or image path without folders and extension."""
  return os.path.splitext(os.path.basename(name))[0]


def read_pairs(pairs, lookup, valid_text):
  """Reads the label maps of `layouts.Pair`s for their class histograms.

  Args:
    pairs: list of `layouts.Pair`.
    lookup: int16 [256] from `layouts.label_lookup`.
    valid_text: str, the valid label values in words, for messages.

  Returns:
    `SplitLabels`, named by image stem.

  Raises:
    layouts.DatasetError: an unreadable label or a value of no class; the
      message names the file.
  """
  sizes, counts = [], []
  for pair in pairs:
    label = encode.map_label(encode.read_label(pair.label), lookup,
                             pair.label, valid_text)
    sizes.append(label.shape)
    counts.append(np.bincount(label.ravel(), minlength=_LABEL_VALUES))
  return _ordered([stem(pair.name) for pair in pairs], sizes, counts)


def write_list(path, names):
  """Writes a split list, one name per line, whole (`storage.write_whole`)."""
  return storage.write_whole(path, ''.join(f'{name}\n' for name in names))


def format_report(labels, subset, class_names, ignore_label):
  """Per-class image counts of the subset against the split.

  Args:
    labels: `SplitLabels` of the split.
    subset: `Subset`.
    class_names: sequence of C str.
    ignore_label: int.

  Returns:
    str, several lines.
  """
  presence = class_presence(labels.label_counts, len(class_names),
                            ignore_label)
  split_counts = presence.sum(axis=0)
  subset_counts = presence[subset.indices].sum(axis=0)
  size, total = len(subset.indices), len(presence)
  lines = [f'  {"id":>4} {"class":<24} {"subset images":>15} '
           f'{"split images":>15}']
  for cls, name in enumerate(class_names):
    lines.append(
        f'  {cls:>4} {name:<24} {subset_counts[cls]:>7} '
        f'{100 * subset_counts[cls] / size:>6.1f}% {split_counts[cls]:>7} '
        f'{100 * split_counts[cls] / total:>6.1f}%')
  how = (f'a random draw, accepted at draw {subset.draws}' if subset.draws
         else f'the greedy cover, after {MAX_DRAWS} draws missed a class')
  lines.append(f'  chosen by {how}')
  if subset.missing:
    missing = ', '.join(class_names[c] for c in subset.missing)
    lines.append(f'  warning: no image of the subset holds {missing}; a '
                 'larger --fraction or --count may.')
  return '\n'.join(lines)
