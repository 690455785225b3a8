"""Colour masks: palette files, colours to class ids, the labels around them."""

import json
import os

from absl.testing import parameterized
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.data import layouts
from official_seg.datasets import colour_masks

# A CVAT "Segmentation mask 1.1" export's labelmap.txt, as datumaro writes it.
_LABELMAP = ('# label:color_rgb:parts:actions\n'
             'background:0,0,0::\n'
             'car:250,50,83::\n'
             'road:51,221,255::\n'
             'person:61,61,245:head,hand:walking\n')
_CLASSES = {'background': (0, 0, 0), 'car': (250, 50, 83),
            'road': (51, 221, 255), 'person': (61, 61, 245)}


def _reference_ids(rgb, colour_of_id, ignore_label):
  """Class ids pixel by pixel from a dict, unknown colours to `ignore_label`."""
  id_of_colour = {tuple(c): i for i, c in colour_of_id.items()}
  flat = rgb.reshape(-1, 3)
  return np.array([id_of_colour.get(tuple(p), ignore_label) for p in flat],
                  np.int64).reshape(rgb.shape[:2])


def _write(path, text):
  with open(path, 'w', encoding='utf-8') as f:
    f.write(text)
  return path


class ReadPaletteTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.dir = self.create_tempdir().full_path

  def test_cvat_labelmap_classes_in_line_order(self):
    path = _write(os.path.join(self.dir, 'labelmap.txt'), _LABELMAP)
    colours = colour_masks.read_cvat_labelmap(path)
    self.assertEqual(colours.class_names,
                     ('background', 'car', 'road', 'person'))
    self.assertAllEqual(colours.colours, list(_CLASSES.values()))
    self.assertAllEqual(colours.ids, [0, 1, 2, 3])
    self.assertEqual(colours.palette, [list(c) for c in _CLASSES.values()])
    self.assertEqual(colours.ignore_label, 255)

  def test_json_classes_in_key_order(self):
    path = _write(os.path.join(self.dir, 'p.json'), json.dumps(
        {'sky': [10, 20, 30], 'tree': [0, 200, 0], 'other': [0, 0, 0]}))
    colours = colour_masks.read_json(path, ignore_label=2)
    self.assertEqual(colours.class_names, ('sky', 'tree', 'other'))
    self.assertAllEqual(colours.ids, [0, 1, 2])
    self.assertEqual(colours.palette, [[10, 20, 30], [0, 200, 0], [0, 0, 0]])
    self.assertEqual(colours.ignore_label, 2)

  @parameterized.named_parameters(
      ('no_colour', 'a:0,0,0::\ncar::\n', ':2: .*car::'),
      ('two_values', 'a:0,0,0::\ncar:1,2::\n', ':2: .*car:1,2::'),
      ('too_bright', '# h\na:0,0,0::\ncar:1,2,256::\n', ':3: .*car:1,2,256'),
      ('words', 'a:0,0,0::\ncar:red,0,0::\n', ':2: '),
      ('twice', 'a:0,0,0::\nb:1,1,1::\na:2,2,2::\n',
       ":3: label 'a' is already given on line 1"),
      ('empty', '# label:color_rgb:parts:actions\n\n', ':1: no label lines'),
      ('same_colour', 'a:0,0,0::\nb:0,0,0::\n',
       "classes 'a' and 'b' have the same colour"))
  def test_bad_labelmap_names_file_and_line(self, text, regex):
    path = _write(os.path.join(self.dir, 'labelmap.txt'), text)
    with self.assertRaisesRegex(layouts.DatasetError, regex) as raised:
      colour_masks.read_cvat_labelmap(path)
    self.assertIn(path, str(raised.exception))
    self.assertNotIn('\n', str(raised.exception))

  @parameterized.named_parameters(
      ('syntax', '{"a": [0, 0, 0],\n "b": [1, 2, 3]\n', r':3: not JSON'),
      ('not_object', '[[0, 0, 0]]', ':1: a palette is a JSON object'),
      ('empty', '{}', ':1: a palette is a JSON object'),
      ('bad_colour', '{\n "a": [0, 0, 0],\n "b": [1, 2, 300]\n}',
       r":3: class 'b' has colour \[1, 2, 300\]"),
      ('float', '{"a": [0, 0.5, 0]}', ":1: class 'a'"),
      ('twice', '{"a": [0, 0, 0], "a": [1, 1, 1]}', "class 'a' is given twice"),
      ('unicode', '{\n "straße": [0, 0, 0],\n "größe": [1]\n}',
       ":3: class 'größe'"),
      ('same_colour', '{"a": [0, 0, 0], "b": [0, 0, 0]}', 'same colour'))
  def test_bad_json_names_file_and_line(self, text, regex):
    path = _write(os.path.join(self.dir, 'p.json'), text)
    with self.assertRaisesRegex(layouts.DatasetError, regex) as raised:
      colour_masks.read_json(path)
    self.assertIn(path, str(raised.exception))
    self.assertNotIn('\n', str(raised.exception))

  def test_a_json_file_is_json_any_other_a_labelmap(self):
    json_path = _write(os.path.join(self.dir, 'C.JSON'), '{"a": [1, 2, 3]}')
    self.assertEqual(colour_masks.read_palette_file(json_path).class_names,
                     ('a',))
    txt = _write(os.path.join(self.dir, 'labels'), _LABELMAP)
    self.assertEqual(colour_masks.read_palette_file(txt, 0).class_names,
                     tuple(_CLASSES))
    self.assertEqual(colour_masks.read_palette_file(txt, 0).ignore_label, 0)

  def test_unreadable_files(self):
    missing = os.path.join(self.dir, 'gone.json')
    with self.assertRaisesRegex(layouts.DatasetError, f'{missing}:1: cannot'):
      colour_masks.read_json(missing)
    binary = os.path.join(self.dir, 'labelmap.txt')
    with open(binary, 'wb') as f:
      f.write(b'\xff\xfe\x00bad')
    with self.assertRaisesRegex(layouts.DatasetError, f'{binary}:1: cannot'):
      colour_masks.read_cvat_labelmap(binary)


class ToClassIdsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    path = _write(os.path.join(self.create_tempdir().full_path, 'l.txt'),
                  _LABELMAP)
    self.colours = colour_masks.read_cvat_labelmap(path)
    self.rng = np.random.default_rng(0)

  def test_equals_a_numpy_reference(self):
    palette = np.array(list(_CLASSES.values()), np.uint8)
    rgb = palette[self.rng.integers(0, 4, (37, 53))]
    ids = colour_masks.to_class_ids(rgb, self.colours, 'm.png')
    self.assertAllEqual(ids, _reference_ids(rgb, dict(enumerate(palette)), 255))
    self.assertEqual(set(np.unique(ids)), {0, 1, 2, 3})

  def test_ignore_colours_map_to_the_ignore_label(self):
    colours = colour_masks.colour_map(
        'test', ['a', 'b'], [[0, 0, 0], [9, 9, 9]], 255, None,
        ignore_colours=[[224, 224, 192], [9, 9, 9]])
    rgb = np.array([[[0, 0, 0], [9, 9, 9], [224, 224, 192]]], np.uint8)
    # A class's colour stays the class even when also listed as ignore.
    self.assertAllEqual(colour_masks.to_class_ids(rgb, colours, 'm.png'),
                        [[0, 1, 255]])

  def test_unknown_colours_are_named_with_their_pixels(self):
    rgb = np.zeros((10, 10, 3), np.uint8)
    rgb[0, :7] = (1, 2, 3)
    rgb[5, :2] = (250, 50, 84)
    with self.assertRaises(layouts.DatasetError) as raised:
      colour_masks.to_class_ids(rgb, self.colours, '/data/mask/x.png')
    message = str(raised.exception)
    self.assertIn('Label /data/mask/x.png has colours of no class', message)
    self.assertIn('(1, 2, 3) in 7 pixels, (250, 50, 84) in 2 pixels', message)
    self.assertIn('--unknown_colours_to_ignore', message)
    self.assertNotIn('\n', message)

  def test_many_unknown_colours_are_summed_up(self):
    rgb = np.zeros((4, 10, 3), np.uint8)
    rgb[0, :, 0] = np.arange(1, 11)  # 10 unknown colours of 1 pixel.
    rgb[1, :3] = (7, 7, 7)
    with self.assertRaisesRegex(
        layouts.DatasetError,
        r'\(7, 7, 7\) in 3 pixels, .*and 6 more colours in 6 pixels\.'):
      colour_masks.to_class_ids(rgb, self.colours, 'm.png')

  def test_unknown_colours_to_ignore(self):
    palette = np.array(list(_CLASSES.values()) + [(5, 5, 5), (6, 7, 8)],
                       np.uint8)
    rgb = palette[self.rng.integers(0, 6, (20, 30))]
    ids = colour_masks.to_class_ids(rgb, self.colours, 'm.png',
                                    unknown_to_ignore=True)
    known = dict(enumerate(palette[:4]))
    self.assertAllEqual(ids, _reference_ids(rgb, known, 255))
    self.assertIn(255, ids)


class EncodePairTest(tf.test.TestCase, parameterized.TestCase):
  """Colour masks next to palette and grey PNGs, and bad masks."""

  def setUp(self):
    super().setUp()
    self.dir = self.create_tempdir().full_path
    self.colours = colour_masks.read_cvat_labelmap(
        _write(os.path.join(self.dir, 'l.txt'), _LABELMAP))
    self.rng = np.random.default_rng(1)
    self.image = os.path.join(self.dir, 'x.png')
    Image.fromarray(self.rng.integers(0, 256, (12, 16, 3), np.uint8)).save(
        self.image)

  def _encode(self, label, colours='default', unknown_to_ignore=False):
    path = os.path.join(self.dir, 'x_label.png')
    label.save(path)
    pair = layouts.Pair('x.png', self.image, path)
    colours = self.colours if colours == 'default' else colours
    encoded = colour_masks.encode_pair(
        pair, layouts.label_lookup(4, 255), 'classes 0-3', colours,
        unknown_to_ignore)
    return tf.io.decode_png(encoded.label_bytes).numpy()[..., 0], encoded

  @parameterized.parameters('RGB', 'RGBA')
  def test_colour_mask(self, mode):
    ids = self.rng.integers(0, 4, (12, 16))
    rgb = np.array(list(_CLASSES.values()), np.uint8)[ids]
    label, encoded = self._encode(Image.fromarray(rgb).convert(mode))
    self.assertAllEqual(label, ids)
    self.assertAllEqual(encoded.class_counts[:4], np.bincount(ids.ravel(),
                                                              minlength=4))

  def test_palette_png_reads_as_indices_not_colours(self):
    ids = self.rng.integers(0, 4, (12, 16)).astype(np.uint8)
    label = Image.fromarray(ids, 'P')
    # Colours no class has: a palette PNG is read by index all the same.
    label.putpalette([7, 7, 7, 8, 8, 8, 9, 9, 9, 10, 10, 10] + [0] * 756)
    self.assertAllEqual(self._encode(label)[0], ids)

  def test_grey_png_reads_as_ids(self):
    ids = self.rng.choice(np.array([0, 3, 255], np.uint8), (12, 16))
    self.assertAllEqual(self._encode(Image.fromarray(ids, 'L'))[0], ids)

  def test_translucent_mask_is_refused(self):
    rgba = np.zeros((12, 16, 4), np.uint8)
    rgba[..., 3] = 255
    rgba[0, :3, 3] = 128
    with self.assertRaisesRegex(layouts.DatasetError,
                                'x_label.png has 3 translucent pixels'):
      self._encode(Image.fromarray(rgba, 'RGBA'))

  def test_colour_mask_without_a_palette_asks_for_one(self):
    with self.assertRaisesRegex(
        layouts.DatasetError, r'x_label.png is an RGB image, a colour mask: '
        'give its palette with --palette'):
      self._encode(Image.fromarray(np.zeros((12, 16, 3), np.uint8)), None)

  def test_unknown_colour_names_the_mask(self):
    rgb = np.zeros((12, 16, 3), np.uint8)
    rgb[3, 3] = (1, 1, 1)
    with self.assertRaisesRegex(layouts.DatasetError,
                                r'x_label.png .*\(1, 1, 1\) in 1 pixels'):
      self._encode(Image.fromarray(rgb))
    label, _ = self._encode(Image.fromarray(rgb), unknown_to_ignore=True)
    self.assertEqual(label[3, 3], 255)
    self.assertEqual(label.sum(), 255)

  def test_size_mismatch(self):
    with self.assertRaisesRegex(layouts.DatasetError,
                                'is 16x12 but its label .* is 5x4'):
      self._encode(Image.fromarray(np.zeros((4, 5, 3), np.uint8)))


if __name__ == '__main__':
  tf.test.main()
