"""Colour-mask labels: palette files (JSON, CVAT labelmap), colours to ids."""

import collections
import json

import numpy as np
from PIL import Image

from official_seg.data import encode
from official_seg.data.layouts import DatasetError

# Label PNG modes read as colours; palette ('P') and grey PNGs stay indices.
_COLOUR_MODES = ('RGB', 'RGBA')
# Unknown colours a message names, the most frequent first.
_SHOWN_COLOURS = 5

# The classes of a colour-mask dataset and the colour of each.
#   source: str, where they came from, for messages.
#   class_names: tuple of str, class i is the i-th.
#   colours: int [K, 3], every colour a mask may hold.
#   ids: int [K], the class id (or the ignore label) of each colour.
#   ignore_label: int, IGNORE_LABEL of the dataset.
#   palette: the `DatasetInfo.palette` value that draws these classes.
ColourMap = collections.namedtuple(
    'ColourMap', ['source', 'class_names', 'colours', 'ids', 'ignore_label',
                  'palette'])


def pack(rgb):
  """Packs uint8 [..., 3] colours into int64 [...] keys r << 16 | g << 8 | b."""
  rgb = np.asarray(rgb, np.int64)
  return (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]


def colour_map(source, class_names, colours, ignore_label, palette,
               ignore_colours=(), shared_colours='error'):
  """Builds a `ColourMap` of classes 0..N-1 and colours that mean 'ignore'.

  Args:
    source: str, the palette's origin, for messages.
    class_names: N str.
    colours: int [N, 3], the colour of each class.
    ignore_label: int in 0-255.
    palette: the `DatasetInfo.palette` value to record.
    ignore_colours: colours [r, g, b] that map to `ignore_label`.
    shared_colours: 'error', or 'first' to map a colour two classes share
      to the first of them (a shipped palette's own ambiguity).

  Returns:
    A `ColourMap`.

  Raises:
    DatasetError: two classes share a colour (with 'error').
  """
  colours = np.asarray(colours, np.int64).reshape(-1, 3)
  ignore = np.asarray(ignore_colours, np.int64).reshape(-1, 3)
  seen = {}
  keep = []
  for class_id, key in enumerate(pack(colours).tolist()):
    if key in seen:
      if shared_colours == 'error':
        raise DatasetError(
            f'{source}: classes {class_names[seen[key]]!r} and '
            f'{class_names[class_id]!r} have the same colour '
            f'{tuple(colours[class_id].tolist())}; a mask could not tell them '
            'apart. Give each class its own colour.')
      continue
    seen[key] = class_id
    keep.append(class_id)
  ignore = [c for c in ignore if int(pack(c)) not in seen]
  all_colours = np.concatenate([colours[keep], np.reshape(ignore, (-1, 3))])
  ids = np.concatenate([keep, np.full(len(ignore), ignore_label, np.int64)])
  return ColourMap(source, tuple(class_names), all_colours,
                   ids.astype(np.int64), ignore_label, palette)


def _read_text(path):
  """The text of a palette file.

  Raises:
    DatasetError: missing, unreadable or not UTF-8; names the file.
  """
  try:
    with open(path, encoding='utf-8') as f:
      return f.read()
  except (OSError, UnicodeDecodeError) as e:
    raise DatasetError(f'{path}:1: cannot read the palette: {e}') from None


def _line_of(text, key):
  """The 1-based line of `text` where the JSON key `key` first appears."""
  needle = json.dumps(key, ensure_ascii=False)
  for number, line in enumerate(text.splitlines(), 1):
    if needle in line:
      return number
  return 1


def _checked_colour(value):
  """`value` as (r, g, b) ints in 0-255, or None if it is not one."""
  if (not isinstance(value, (list, tuple)) or len(value) != 3 or
      not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255
              for v in value)):
    return None
  return tuple(value)


def _unique_keys(pairs):
  """A json object_pairs_hook that refuses a key given twice."""
  names = [name for name, _ in pairs]
  for name in names:
    if names.count(name) > 1:
      raise DatasetError(f'class {name!r} is given twice')
  return collections.OrderedDict(pairs)


def read_json(path, ignore_label=255):
  """Reads a JSON palette `{"class name": [r, g, b], ...}`, classes in order.

  Args:
    path: str, the JSON file.
    ignore_label: int, IGNORE_LABEL of the dataset.

  Returns:
    A `ColourMap`; class i is the i-th key, its palette the list of colours.

  Raises:
    DatasetError: unreadable, not an object of [r, g, b], a class given
      twice, or two classes of one colour; the message names file and line.
  """
  text = _read_text(path)
  try:
    classes = json.loads(text, object_pairs_hook=_unique_keys)
  except json.JSONDecodeError as e:
    raise DatasetError(f'{path}:{e.lineno}: not JSON ({e.msg}); a palette is '
                       '{"class name": [r, g, b], ...}.') from None
  except DatasetError as e:
    raise DatasetError(f'{path}: {e}; give each class once.') from None
  if not isinstance(classes, dict) or not classes:
    raise DatasetError(
        f'{path}:1: a palette is a JSON object '
        '{"class name": [r, g, b], ...} with at least one class.')
  colours = []
  for name, value in classes.items():
    colour = _checked_colour(value)
    if colour is None:
      raise DatasetError(
          f'{path}:{_line_of(text, name)}: class {name!r} has colour '
          f'{value!r}; a colour is [r, g, b], three integers in 0-255.')
    colours.append(colour)
  return _user_map(path, list(classes), colours, ignore_label)


def _user_map(path, names, colours, ignore_label):
  """A `ColourMap` of a user's palette file, its class count checked."""
  if len(names) > 256:
    raise DatasetError(f'{path}: {len(names)} classes; labels are 8-bit PNGs, '
                       'so at most 256.')
  return colour_map(path, names, colours, ignore_label,
                    [list(c) for c in colours])


def read_cvat_labelmap(path, ignore_label=255):
  """Reads CVAT's `labelmap.txt` (its "Segmentation mask 1.1" export).

  Lines are `name:r,g,b:parts:actions`; `#` lines and blank lines are
  skipped; class i is the i-th label line, as the export numbers them.

  Args:
    path: str, the labelmap.txt.
    ignore_label: int, IGNORE_LABEL of the dataset.

  Returns:
    A `ColourMap`; its palette the list of colours.

  Raises:
    DatasetError: a line that is not `name:r,g,b:...`, a label given twice,
      two labels of one colour, or no label; the message names file and line.
  """
  names, colours, lines = [], [], {}
  for number, line in enumerate(_read_text(path).splitlines(), 1):
    line = line.strip()
    if not line or line.startswith('#'):
      continue
    name, colour = _labelmap_entry(line)
    if colour is None:
      raise DatasetError(
          f'{path}:{number}: {line!r} is not label:r,g,b:parts:actions with '
          'r, g and b integers in 0-255.')
    if name in lines:
      raise DatasetError(f'{path}:{number}: label {name!r} is already given '
                         f'on line {lines[name]}; give each label once.')
    lines[name] = number
    names.append(name)
    colours.append(colour)
  if not names:
    raise DatasetError(f'{path}:1: no label lines (label:r,g,b:parts:actions); '
                       "is this CVAT's labelmap.txt?")
  return _user_map(path, names, colours, ignore_label)


def read_palette_file(path, ignore_label=255):
  """A `.json` palette (`read_json`), else a CVAT labelmap.txt."""
  if path.lower().endswith('.json'):
    return read_json(path, ignore_label)
  return read_cvat_labelmap(path, ignore_label)


def _labelmap_entry(line):
  """(name, (r, g, b)) of a labelmap line, colour None when malformed."""
  fields = line.split(':')
  parts = fields[1].split(',') if len(fields) > 1 else []
  if not fields[0] or len(parts) != 3 or not all(
      p.strip().isdigit() for p in parts):
    return fields[0], None
  return fields[0], _checked_colour([int(p) for p in parts])


def to_class_ids(rgb, colours, path, unknown_to_ignore=False):
  """Maps the colours of a colour mask to class ids.

  Args:
    rgb: uint8 [H, W, 3].
    colours: a `ColourMap`.
    path: str, the mask's file, for the message.
    unknown_to_ignore: bool; colours of no class become the ignore label
      instead of an error.

  Returns:
    int64 [H, W] class ids (or the ignore label).

  Raises:
    DatasetError: a colour of no class, without `unknown_to_ignore`; the
      message names the file, the colours and their pixel counts.
  """
  keys = pack(colours.colours)
  order = np.argsort(keys)
  sorted_keys, sorted_ids = keys[order], colours.ids[order]
  packed = pack(rgb)
  index = np.minimum(np.searchsorted(sorted_keys, packed), len(keys) - 1)
  known = sorted_keys[index] == packed
  ids = np.where(known, sorted_ids[index], colours.ignore_label)
  if not unknown_to_ignore and not known.all():
    raise DatasetError(_unknown_text(packed[~known], path, colours))
  return ids


def _unknown_text(unknown, path, colours):
  """The message naming a mask's colours of no class, most pixels first."""
  keys, counts = np.unique(unknown, return_counts=True)
  order = np.argsort(-counts, kind='stable')[:_SHOWN_COLOURS]
  shown = ', '.join(
      f'({k >> 16}, {(k >> 8) & 255}, {k & 255}) in {c:,} pixels'
      for k, c in zip(keys[order].tolist(), counts[order].tolist()))
  rest = len(keys) - len(order)
  if rest:
    shown += (f', and {rest} more colours in '
              f'{int(counts.sum() - counts[order].sum()):,} pixels')
  return (f'Label {path} has colours of no class of {colours.source}: '
          f'{shown}. Add them to the palette, or pass '
          f'--unknown_colours_to_ignore to label them IGNORE_LABEL '
          f'({colours.ignore_label}).')


def read_colour_label(path, colours, unknown_to_ignore=False):
  """Reads a label PNG: colour masks through `colours`, others by value.

  Args:
    path: str, the label file.
    colours: a `ColourMap`.
    unknown_to_ignore: bool, see `to_class_ids`.

  Returns:
    int [H, W]: class ids of an RGB(A) mask; stored values (palette indices
    of a mode P PNG) otherwise.

  Raises:
    DatasetError: unreadable, translucent, or colours of no class.
  """
  # pylint: disable-next=protected-access
  _, label = encode._open_fully(path, 'label')
  if label.mode not in _COLOUR_MODES:
    return encode.read_label(path)
  rgba = np.asarray(label.convert('RGBA'))
  if (rgba[..., 3] != 255).any():
    raise DatasetError(
        f'Label {path} has {int((rgba[..., 3] != 255).sum()):,} translucent '
        'pixels; a colour mask must be opaque, its colour alone the class.')
  return to_class_ids(rgba[..., :3], colours, path, unknown_to_ignore)


def _mode(path):
  """The mode of an image from its header; None if unreadable."""
  try:
    with Image.open(path) as image:
      return image.mode
  except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
    return None  # encode.encode_pair names the file and the fault.


def encode_pair(pair, lookup, valid_text, colours, unknown_to_ignore=False):
  """`encode.encode_pair` for labels that may be colour masks.

  Args:
    pair: `layouts.Pair`.
    lookup: int16 [256] from `layouts.label_lookup`.
    valid_text: str, the valid label values in words, for messages.
    colours: a `ColourMap`, or None to refuse colour masks.
    unknown_to_ignore: bool, see `to_class_ids`.

  Returns:
    `encode.Encoded`.

  Raises:
    DatasetError: unreadable files, sizes that differ, colours of no class
      or bad label values; the message names the file.
  """
  mode = _mode(pair.label)
  if mode not in _COLOUR_MODES:
    return encode.encode_pair(pair, lookup, valid_text)
  if colours is None:
    raise DatasetError(
        f'Label {pair.label} is an {mode} image, a colour mask: give its '
        'palette with --palette (a shipped dataset\'s name, a JSON file of '
        "class colours, or CVAT's labelmap.txt), or write single-channel PNGs "
        'of class ids.')
  return encode.encoded_pair(
      pair, encode.read_image(pair.image),
      read_colour_label(pair.label, colours, unknown_to_ignore), lookup,
      valid_text)
