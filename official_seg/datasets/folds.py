"""Cross-validation folds of a split by image, stratified by class presence, written as splits."""

import json
import os

import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import storage
from official_seg.datasets import subsets


def check_num_folds(num_folds, num_images):
  """Raises `validation.ConfigurationError` unless 2 <= folds <= images."""
  if not 2 <= num_folds <= num_images:
    raise validation.ConfigurationError(
        f'--folds={num_folds}: give 2 to {num_images} folds (the split '
        f'has {num_images} images; each fold needs one to evaluate on).')


def _best_fold(wanted, room, rng):
  """The fold that wants the class most; then the one with most room; then
  one at random among those tied."""
  top = np.flatnonzero(wanted == wanted.max())
  top = top[room[top] == room[top].max()]
  return int(rng.choice(top))


def stratified_folds(presence, num_folds, seed):
  """The fold of each image, each class's images spread evenly over folds.

  Iterative stratification (Sechidis, Tsoumakas and Vlahavas, ECML 2011),
  the multi-label split: the class held by fewest images not yet placed is
  taken next, and each of its images goes to the fold that still wants most
  of that class (each fold wants 1/K of every class's images and of all
  images), ties going to the fold with most room, then to a draw. Images
  with no class are placed last, by room alone. With one class per image
  each fold gets the floor or ceiling of 1/K of every class.

  Args:
    presence: bool [n, C], which classes each image holds
      (`subsets.class_presence`).
    num_folds: int K in [2, n].
    seed: int; the same presence, K and seed give the same folds.

  Returns:
    int64 [n], the fold (0 to K - 1) of each image.

  Raises:
    validation.ConfigurationError: K outside [2, n].
  """
  presence = np.asarray(presence, bool)
  check_num_folds(num_folds, len(presence))
  rng = np.random.default_rng(seed)
  wanted = np.outer(np.full(num_folds, 1.0 / num_folds), presence.sum(0))
  room = np.full(num_folds, len(presence) / num_folds)
  fold = np.full(len(presence), -1, np.int64)
  while (fold < 0).any():
    left = presence & (fold < 0)[:, None]
    counts = np.where(left.any(0), left.sum(0), np.iinfo(np.int64).max)
    cls = int(np.argmin(counts)) if left.any() else None
    rows = np.flatnonzero(left[:, cls] if cls is not None else fold < 0)
    for row in rng.permutation(rows):
      chosen = _best_fold(room if cls is None else wanted[:, cls], room, rng)
      fold[row] = chosen
      wanted[chosen] -= presence[row]
      room[chosen] -= 1
  return fold


def split_names(split, num_folds, index):
  """(training split, evaluation split) names of fold `index` of `split`."""
  stem = f'{split}_fold{index}of{num_folds}'
  return f'{stem}_train', f'{stem}_val'


def write_folds(data_dir, split, labels, fold, num_shards, overwrite):
  """Writes each fold's training and evaluation splits beside `split`.

  Fold i evaluates on the images of fold i and trains on the others; the
  records are copied as they are (`subsets.write_shards`).

  Args:
    data_dir: str, the folder of `split` and of the splits written.
    split: str, the split read.
    labels: `subsets.SplitLabels` of `split` (`subsets.read_shards`).
    fold: int [n], the fold of each row of `labels`.
    num_shards: int, most shards of each split written.
    overwrite: bool, replace shards of splits of the same names.

  Returns:
    list of (training split, evaluation split) names, one per fold.

  Raises:
    validation.OutputExistsError: a split of those names exists and not
      `overwrite`.
  """
  num_folds = int(np.max(fold)) + 1
  names = [split_names(split, num_folds, i) for i in range(num_folds)]
  for pair in names:
    for name in pair:
      subsets.check_target(data_dir, split, name, overwrite)
  for index, pair in enumerate(names):
    for name, rows in zip(pair, (np.flatnonzero(fold != index),
                                 np.flatnonzero(fold == index))):
      subsets.write_shards(data_dir, split, name, labels, rows,
                           min(num_shards, len(rows)))
  return names


def format_folds(presence, fold, class_names):
  """A table of each fold's images and images per class, one row per fold."""
  header = ['fold', 'images'] + list(class_names)
  rows = [header]
  for index in range(int(np.max(fold)) + 1):
    held = presence[fold == index]
    rows.append([str(index), str(len(held))] +
                [str(int(n)) for n in held.sum(0)])
  widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
  return '\n'.join('  '.join(cell.rjust(width) for cell, width in
                             zip(row, widths)) for row in rows)


def manifest_path(data_dir, split, num_folds):
  """Where the folds of `split` are recorded: `<split>-folds<K>.json`."""
  return os.path.join(data_dir, f'{split}-folds{num_folds}.json')


def write_manifest(data_dir, split, names, fold, seed):
  """Records each image's fold and the seed that drew them, written whole."""
  contents = {'split': split, 'seed': int(seed),
              'folds': dict(zip(names, (int(f) for f in fold)))}
  storage.write_whole(manifest_path(data_dir, split, int(np.max(fold)) + 1),
                      json.dumps(contents, indent=1, sort_keys=True))


def read_manifest(data_dir, split, num_folds, seed):
  """{image name: fold} of folds written earlier by `seed`, or None if none.

  Raises:
    validation.ConfigurationError: they were drawn with another seed; names
      the file and --seed.
  """
  path = manifest_path(data_dir, split, num_folds)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    contents = json.load(f)
  if contents['seed'] != seed:
    raise validation.ConfigurationError(
        f'{path}: the {num_folds} folds of split {split!r} were drawn with '
        f'--seed={contents["seed"]}, not {seed}; pass that seed, or remove '
        'the file and the fold splits to draw them again.')
  return contents['folds']
