"""convert_split: each layout's records, labels, shards, metadata, bad data."""

import os

from absl.testing import parameterized
import gin
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.data import dataset_info
from official_seg.data import image_classes
from official_seg.data import layouts
from official_seg.data import split_metadata
from official_seg.data import tfexample
from official_seg.datasets import colour_masks
from official_seg.datasets import convert
from official_seg.runtime import gin_config
from tests import testing_utils

# VOC's colour map for the indices used here: the palette colour of index 1
# is dark red, whose grey value (38) is no class, so reading RGB would fail.
_VOC_COLOURS = {0: (0, 0, 0), 1: (128, 0, 0), 2: (0, 128, 0), 15: (192, 128, 128),
                255: (224, 224, 192)}


def _palette():
  palette = np.zeros((256, 3), np.uint8)
  for index, colour in _VOC_COLOURS.items():
    palette[index] = colour
  return palette.ravel().tolist()


def _save(path, array, mode=None, palette=False):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  image = Image.fromarray(array, mode)
  if palette:
    image.putpalette(_palette())
  image.save(path)


def _image(rng, height, width):
  return rng.integers(0, 256, (height, width, 3), dtype=np.uint8)


def _label(rng, height, width, values):
  return rng.choice(np.array(values, np.uint8), size=(height, width))


def _read_split(output_dir, split):
  """Decodes every record of a split: {filename: decoded numpy dict}."""
  files = sorted(tf.io.gfile.glob(tfexample.shard_pattern(output_dir, split)))
  decoder = tfexample.Decoder()
  out = {}
  for record in tf.data.TFRecordDataset(files):
    decoded = decoder.decode(record)
    out[decoded['filename'].numpy().decode()] = {
        key: value.numpy() for key, value in decoded.items()}
  return out


class ConvertLayoutsTest(tf.test.TestCase, parameterized.TestCase):
  """Each layout's split converted to shards, read back and compared."""

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.voc = dataset_info.DatasetInfo(num_classes=21)
    self.root = self.create_tempdir().full_path
    self.out = os.path.join(self.create_tempdir().full_path, 'records')
    self.rng = np.random.default_rng(0)

  def _convert(self, layout, split, info=None, **kwargs):
    info = info or self.voc
    pairs = layouts.find_pairs(layout, split, **kwargs)
    lookup = layouts.layout_lookup(layout, info.num_classes, info.ignore_label)
    return convert.convert_split(
        pairs, self.out, split, lookup, convert.valid_label_text(layout, info),
        num_shards=2, progress=False)

  def _voc_tree(self, label_dir='SegmentationClass', palette=True,
                splits=(('train', 'a b'), ('val', 'c'))):
    labels = {}
    for index, name in enumerate('abc'):
      height, width = 16 + index * 5, 40 - index * 7
      _save(os.path.join(self.root, 'JPEGImages', f'{name}.jpg'),
            _image(self.rng, height, width))
      labels[name] = _label(self.rng, height, width, [0, 1, 2, 15, 255])
      _save(os.path.join(self.root, label_dir, f'{name}.png'), labels[name],
            'P' if palette else 'L', palette)
    for split, names in splits:
      _save_list(os.path.join(self.root, 'ImageSets', 'Segmentation',
                              f'{split}.txt'), names.split())
    return labels

  @parameterized.parameters(('SegmentationClass', True),
                            ('SegmentationClassRaw', False))
  def test_voc_labels_are_palette_indices_and_lossless(self, label_dir, palette):
    labels = self._voc_tree(label_dir, palette)
    summary = self._convert('voc', 'train', input_dir=self.root)
    records = _read_split(self.out, 'train')
    self.assertEqual(summary.num_images, 2)
    self.assertCountEqual(records, ['JPEGImages/a.jpg', 'JPEGImages/b.jpg'])
    for name in 'ab':
      decoded = records[f'JPEGImages/{name}.jpg']
      self.assertAllEqual(decoded['label'][..., 0], labels[name])
      self.assertEqual(decoded['image'].shape, labels[name].shape + (3,))
    # A known pixel: palette index 1 (shown dark red) is class 1.
    self.assertIn(1, records['JPEGImages/a.jpg']['label'])
    expected = np.bincount(np.concatenate(
        [labels['a'].ravel(), labels['b'].ravel()]), minlength=256)
    self.assertAllEqual(summary.class_counts, expected)

  def test_cityscapes_maps_label_ids_to_train_ids(self):
    ids = np.array([[7, 8, 33, 26], [0, 9, 1, 24]] * 8, np.uint8)
    image = _image(self.rng, 16, 4)
    stem = 'aachen_000000_000019'
    _save(os.path.join(self.root, 'leftImg8bit', 'train', 'aachen',
                       f'{stem}_leftImg8bit.png'), image)
    _save(os.path.join(self.root, 'gtFine', 'train', 'aachen',
                       f'{stem}_gtFine_labelIds.png'), ids)
    info = dataset_info.DatasetInfo(num_classes=19)
    self._convert('cityscapes', 'train', info, input_dir=self.root)
    decoded = _read_split(self.out, 'train')[
        f'leftImg8bit/train/aachen/{stem}_leftImg8bit.png']
    # road 0, sidewalk 1, bicycle 18, car 13; unlabeled, parking and ego
    # vehicle are ignored; person 11.
    self.assertAllEqual(decoded['label'][:2, :, 0],
                        [[0, 1, 18, 13], [255, 255, 255, 11]])
    self.assertAllEqual(decoded['image'], image)

  def test_ade20k_keeps_all_151_values(self):
    values = np.arange(151, dtype=np.uint8).reshape(1, 151).repeat(2, axis=0)
    _save(os.path.join(self.root, 'images', 'validation', 'ADE_val_1.jpg'),
          _image(self.rng, 2, 151))
    _save(os.path.join(self.root, 'annotations', 'validation', 'ADE_val_1.png'),
          values)
    info = dataset_info.DatasetInfo(num_classes=151, ignore_label=0)
    self._convert('ade20k', 'val', info, input_dir=self.root)
    decoded = _read_split(self.out, 'val')['images/validation/ADE_val_1.jpg']
    self.assertAllEqual(decoded['label'][..., 0], values)
    self.assertEqual(decoded['image'].shape, (2, 151, 3))

  @parameterized.parameters(True, False)
  def test_folders_match_by_stem(self, with_lists):
    images, labels = {}, {}
    for index, name in enumerate(['x1', 'x2', 'x3']):
      images[name] = _image(self.rng, 24 + index, 30)
      labels[name] = _label(self.rng, 24 + index, 30, [0, 1, 2, 3, 255])
      _save(os.path.join(self.root, 'img', f'{name}.png'), images[name])
      _save(os.path.join(self.root, 'mask', f'{name}.png'), labels[name])
    lists = None
    if with_lists:
      lists = os.path.join(self.root, 'lists')
      _save_list(os.path.join(lists, 'val.txt'), ['x3', 'x1'])
    self._convert('folders', 'val', dataset_info.DatasetInfo(num_classes=4),
                  image_dir=os.path.join(self.root, 'img'),
                  label_dir=os.path.join(self.root, 'mask'),
                  split_list_dir=lists)
    records = _read_split(self.out, 'val')
    names = ['x1', 'x3'] if with_lists else ['x1', 'x2', 'x3']
    self.assertCountEqual(records, [f'{n}.png' for n in names])
    for name in names:
      self.assertAllEqual(records[f'{name}.png']['image'], images[name])
      self.assertAllEqual(records[f'{name}.png']['label'][..., 0], labels[name])

  def test_two_workers_write_the_same_records(self):
    self._voc_tree()
    pairs = layouts.find_pairs('voc', 'train', input_dir=self.root)
    lookup = layouts.layout_lookup('voc', 21, 255)
    for workers, split in ((1, 'one'), (2, 'two')):
      convert.convert_split(pairs, self.out, split, lookup, '', 2, workers,
                            progress=False)
    one, two = _read_split(self.out, 'one'), _read_split(self.out, 'two')
    self.assertCountEqual(one, two)
    for name in one:
      self.assertAllEqual(one[name]['label'], two[name]['label'])

  def test_existing_shards_need_overwrite(self):
    self._voc_tree()
    self._convert('voc', 'val', input_dir=self.root)
    with self.assertRaisesRegex(layouts.DatasetError, 'val-.*--overwrite'):
      self._convert('voc', 'val', input_dir=self.root)

  @parameterized.parameters('voc', 'folders')
  def test_written_metadata_equals_computed(self, layout):
    # VOC's images are JPEGs, the folders' PNGs.
    if layout == 'voc':
      labels = self._voc_tree()
      self._convert('voc', 'train', input_dir=self.root)
      labels = [labels['a'], labels['b']]
    else:
      labels = [_label(self.rng, 24 + i, 30 - 3 * i, [0, 1, 2, 255])
                for i in range(3)]
      for index, label in enumerate(labels):
        _save(os.path.join(self.root, 'img', f'x{index}.png'),
              _image(self.rng, *label.shape))
        _save(os.path.join(self.root, 'mask', f'x{index}.png'), label)
      self._convert('folders', 'train', dataset_info.DatasetInfo(num_classes=3),
                    image_dir=os.path.join(self.root, 'img'),
                    label_dir=os.path.join(self.root, 'mask'))
    written = split_metadata.read(self.out, 'train')
    # Only the converter knows the images' channels and depth.
    self.assertEqual((written.pop('channels'), written.pop('bit_depth')),
                     (3, 8))
    self.assertEqual(written, split_metadata.compute(self.out, 'train'))
    self.assertEqual(image_classes.read(self.out, 'train', 'S'),
                     testing_utils.shard_image_labels(self.out, 'train'))
    counts = np.bincount(np.concatenate([l.ravel() for l in labels]))
    self.assertEqual(written['label_histogram'],
                     {str(v): int(counts[v]) for v in np.flatnonzero(counts)})
    self.assertEqual((written['max_height'], written['max_width']),
                     tuple(np.max([l.shape for l in labels], axis=0)))

  def test_failed_overwrite_leaves_no_metadata(self):
    self._voc_tree()
    self._convert('voc', 'val', input_dir=self.root)
    self.assertIsNotNone(split_metadata.read(self.out, 'val'))
    _save(os.path.join(self.root, 'SegmentationClass', 'c.png'),
          np.full((26, 26), 30, np.uint8))
    pairs = layouts.find_pairs('voc', 'val', input_dir=self.root)
    with self.assertRaisesRegex(layouts.DatasetError, 'c.png'):
      convert.convert_split(pairs, self.out, 'val',
                            layouts.layout_lookup('voc', 21, 255), '',
                            overwrite=True, progress=False)
    self.assertIsNone(split_metadata.read(self.out, 'val'))

  def test_summary_counts_classes_and_checks_split_size(self):
    labels = self._voc_tree()
    summary = self._convert('voc', 'val', input_dir=self.root)
    info = dataset_info.DatasetInfo(num_classes=21,
                                       split_sizes={'val': 1449})
    text = convert.format_summary(summary, info)
    self.assertIn('val: 1 images in 1 shards', text)
    self.assertIn('\n  images of 3 channels, 8 bits (IMAGE_CHANNELS, '
                  'IMAGE_BIT_DEPTH)\n', text)
    self.assertIn('expects 1449 images', text)
    self.assertRegex(text, rf'255 ignore\s+{(labels["c"] == 255).sum()} ')


# Class colours of a colour-mask dataset, and the NumPy reference of its ids.
_MASK_COLOURS = np.array([[0, 0, 0], [250, 50, 83], [51, 221, 255]], np.uint8)


def _reference_ids(rgb):
  """Class ids of a colour mask, pixel by pixel, 255 for any other colour."""
  ids = np.full(rgb.shape[:2], 255, np.int64)
  for class_id, colour in enumerate(_MASK_COLOURS):
    ids[(rgb == colour).all(axis=-1)] = class_id
  return ids


class ColourMaskTest(tf.test.TestCase):
  """A folder of colour masks to records, and its dataset gin file."""

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.root = self.create_tempdir().full_path
    self.out = os.path.join(self.root, 'out')
    self.rng = np.random.default_rng(5)
    self.colours = colour_masks.colour_map(
        'test palette', ['background', 'car', 'road'], _MASK_COLOURS, 255,
        _MASK_COLOURS.tolist(), ignore_colours=[[224, 224, 192]])

  def _folder(self, masks):
    for name, mask in masks.items():
      _save(os.path.join(self.root, 'img', f'{name}.png'),
            _image(self.rng, *mask.shape[:2]))
      _save(os.path.join(self.root, 'mask', f'{name}.png'), mask,
            'P' if mask.ndim == 2 else None, mask.ndim == 2)

  def _convert(self, split='train', workers=1, unknown_to_ignore=False):
    pairs = layouts.find_pairs('folders', split,
                               image_dir=os.path.join(self.root, 'img'),
                               label_dir=os.path.join(self.root, 'mask'))
    return convert.convert_split(
        pairs, self.out, split, layouts.label_lookup(3, 255), 'classes 0-2',
        num_shards=2, num_workers=workers, progress=False,
        colours=self.colours, unknown_to_ignore=unknown_to_ignore)

  def test_colour_masks_and_palette_pngs_in_one_split(self):
    colour = np.concatenate([_MASK_COLOURS, [[224, 224, 192]]]).astype(
        np.uint8)[self.rng.integers(0, 4, (21, 30))]
    indices = self.rng.choice(np.array([0, 1, 2, 255], np.uint8), (17, 25))
    self._folder({'a': colour, 'b': indices})
    for workers in (1, 2):
      summary = self._convert(f'w{workers}' if workers > 1 else 'train',
                              workers)
    records = _read_split(self.out, 'train')
    self.assertAllEqual(records['a.png']['label'][..., 0],
                        np.where((colour == [224, 224, 192]).all(-1), 255,
                                 _reference_ids(colour)))
    # The palette PNG is read by index, not by the colours it shows.
    self.assertAllEqual(records['b.png']['label'][..., 0], indices)
    two = _read_split(self.out, 'w2')
    for name in records:
      self.assertAllEqual(two[name]['label'], records[name]['label'])
    self.assertEqual(summary.num_images, 2)

  def test_unknown_colour_stops_or_is_ignored(self):
    mask = _MASK_COLOURS[self.rng.integers(0, 3, (10, 12))]
    mask[2, 3:7] = (9, 8, 7)
    self._folder({'a': mask})
    path = os.path.join(self.root, 'mask', 'a.png')
    with self.assertRaisesRegex(
        layouts.DatasetError,
        rf'Label {path} has colours of no class of test palette: '
        r'\(9, 8, 7\) in 4 pixels\.'):
      self._convert()
    self.assertEmpty(tf.io.gfile.glob(tfexample.shard_pattern(self.out,
                                                              'train')))
    self._convert(unknown_to_ignore=True)
    label = _read_split(self.out, 'train')['a.png']['label'][..., 0]
    self.assertAllEqual(label, _reference_ids(mask))
    self.assertAllEqual(label[2, 3:7], [255] * 4)

  def test_written_gin_file_parses_into_the_dataset(self):
    self._folder({'a': _MASK_COLOURS[self.rng.integers(0, 3, (40, 70))]})
    self._convert('train')
    path = convert.write_dataset_gin(self.colours, self.out)
    with open(path) as f:
      self.assertIn("EVAL_SPLIT = 'train'", f.read())
    # A later run of another split rewrites the file with both.
    self._convert('val')
    self.assertEqual(convert.write_dataset_gin(self.colours, self.out), path)
    self.assertEqual(path, os.path.join(self.out, 'dataset.gin'))
    info = gin_config.read_dataset([path])
    self.assertEqual(info, dataset_info.DatasetInfo(
        num_classes=3, class_names=['background', 'car', 'road'],
        ignore_label=255, palette=_MASK_COLOURS.tolist(), data_dir=self.out,
        train_split='train', eval_split='val',
        split_sizes={'train': 1, 'val': 1}, image_channels=3,
        image_bit_depth=8))
    with open(path) as f:
      self.assertIn('IMAGE_CHANNELS = 3\nIMAGE_BIT_DEPTH = 8\n', f.read())
    # An experiment on top: the crops cover the largest image, 16k + 1.
    gin.clear_config()
    gin_config.parse(['experiments/quickstart.gin', path], [], finalize=False)
    self.assertEqual(gin_config.binding('eval/Parser.crop_size'), [49, 81])
    self.assertEqual(gin_config.binding('train/Parser.crop_size'), [49, 81])
    self.assertEqual(dataset_info.DatasetInfo().palette,
                     _MASK_COLOURS.tolist())

  def test_one_split_evaluates_on_itself_and_says_so(self):
    text = convert.dataset_gin_text(
        self.colours, 'gs://b/d',
        {'default': {'num_images': 3, 'max_height': 600, 'max_width': 513}})
    self.assertIn("TRAIN_SPLIT = 'default'\nEVAL_SPLIT = 'default'", text)
    self.assertIn('evaluation reads the training\n# images', text)
    self.assertIn('CROP_SIZE = [513, 513]\nEVAL_CROP_SIZE = [609, 513]', text)


def _save_list(path, names):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write(''.join(f'{name}\n' for name in names))


class ValidationTest(tf.test.TestCase, parameterized.TestCase):
  """Each kind of bad data stops the conversion with the file in the message."""

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.root = self.create_tempdir().full_path
    self.out = os.path.join(self.root, 'out')
    rng = np.random.default_rng(1)
    for name, height in (('good', 20), ('bad', 24)):
      _save(os.path.join(self.root, 'img', f'{name}.jpg'),
            _image(rng, height, 30))
      _save(os.path.join(self.root, 'mask', f'{name}.png'),
            _label(rng, height, 30, [0, 1, 255]))

  def _convert(self, workers=1, split_list_dir=None):
    pairs = layouts.find_pairs(
        'folders', 'train', image_dir=os.path.join(self.root, 'img'),
        label_dir=os.path.join(self.root, 'mask'),
        split_list_dir=split_list_dir)
    convert.convert_split(pairs, self.out, 'train', layouts.label_lookup(3, 255),
                          'classes 0-2', 2, workers, progress=False)

  def _assert_names(self, path, regex, workers=1, split_list_dir=None):
    with self.assertRaisesRegex(layouts.DatasetError,
                                f'(?s){regex}.*' if regex else '') as raised:
      self._convert(workers, split_list_dir)
    self.assertIn(path, str(raised.exception))
    self.assertEmpty(tf.io.gfile.glob(tfexample.shard_pattern(self.out, 'train')))

  @parameterized.parameters(1, 2)
  def test_size_mismatch(self, workers):
    path = os.path.join(self.root, 'mask', 'bad.png')
    _save(path, np.zeros((23, 30), np.uint8))
    self._assert_names(path, 'is 30x24 but its label', workers)

  def test_label_value_of_no_class(self):
    path = os.path.join(self.root, 'mask', 'bad.png')
    label = np.zeros((24, 30), np.uint8)
    label[3, 4], label[5, 6] = 7, 200
    _save(path, label)
    self._assert_names(path, r'values \[7, 200\].*neither a class')

  def test_colour_label(self):
    path = os.path.join(self.root, 'mask', 'bad.png')
    _save(path, np.zeros((24, 30, 3), np.uint8))
    self._assert_names(path, 'RGB image')

  def test_truncated_image(self):
    path = os.path.join(self.root, 'img', 'bad.jpg')
    with open(path, 'rb') as f:
      data = f.read()
    with open(path, 'wb') as f:
      f.write(data[:len(data) // 2])
    self._assert_names(path, 'truncated')

  def test_unreadable_image(self):
    path = os.path.join(self.root, 'img', 'bad.jpg')
    with open(path, 'wb') as f:
      f.write(b'not an image at all')
    self._assert_names(path, 'Cannot read image')

  def test_split_list_names_a_missing_file(self):
    lists = os.path.join(self.root, 'lists')
    _save_list(os.path.join(lists, 'train.txt'), ['good', 'gone'])
    self._assert_names(os.path.join(self.root, 'img', 'gone'),
                       'lists/train.txt', split_list_dir=lists)

  def test_empty_split_list(self):
    lists = os.path.join(self.root, 'lists')
    _save_list(os.path.join(lists, 'train.txt'), [])
    self._assert_names(os.path.join(lists, 'train.txt'), 'is empty',
                       split_list_dir=lists)

  def test_empty_split_folder(self):
    for name in os.listdir(os.path.join(self.root, 'img')):
      os.remove(os.path.join(self.root, 'img', name))
    self._assert_names(os.path.join(self.root, 'img'), 'the split is empty')


if __name__ == '__main__':
  tf.test.main()


class ChannelsAndDepthTest(tf.test.TestCase, parameterized.TestCase):
  """Images of any channels and 16 bits go through the converter exactly."""

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.root = self.create_tempdir().full_path
    self.out = os.path.join(self.root, 'out')
    self.rng = np.random.default_rng(2)
    self.labels = {}
    for name in ('a', 'b'):
      self.labels[name] = _label(self.rng, 6, 7, [0, 1, 255])
      _save(os.path.join(self.root, 'mask', f'{name}.png'), self.labels[name])

  def _write_png(self, name, pixels):
    with open(os.path.join(self.root, 'img', f'{name}.png'), 'wb') as f:
      f.write(tf.io.encode_png(pixels).numpy())

  def _convert(self):
    pairs = layouts.find_pairs(
        'folders', 'train', image_dir=os.path.join(self.root, 'img'),
        label_dir=os.path.join(self.root, 'mask'))
    return convert.convert_split(
        pairs, self.out, 'train', layouts.label_lookup(3, 255), 'classes 0-2',
        2, 1, progress=False)

  @parameterized.parameters(1, 3, 4)
  def test_12_bit_values_in_16_bit_pngs_round_trip_exactly(self, channels):
    os.makedirs(os.path.join(self.root, 'img'))
    images = {name: self.rng.integers(0, 4096, (6, 7, channels)).astype(
        np.uint16) for name in self.labels}
    for name, pixels in images.items():
      self._write_png(name, pixels)
    self._convert()
    files = tf.io.gfile.glob(tfexample.shard_pattern(self.out, 'train'))
    decoder = tfexample.Decoder(channels=channels, bit_depth=16)
    decoded = [decoder.decode(r) for r in tf.data.TFRecordDataset(files)]
    self.assertLen(decoded, 2)
    for example in decoded:
      name = example['filename'].numpy().decode()[0]
      self.assertAllEqual(example['image'], images[name])
      self.assertAllEqual(example['label'][..., 0], self.labels[name])
    metadata = split_metadata.read(self.out, 'train')
    self.assertEqual((metadata['channels'], metadata['bit_depth']),
                     (channels, 16))

  def test_image_of_another_depth_stops_naming_it(self):
    os.makedirs(os.path.join(self.root, 'img'))
    self._write_png('a', np.zeros((6, 7, 3), np.uint16))
    self._write_png('b', np.zeros((6, 7, 3), np.uint8))
    with self.assertRaisesRegex(
        layouts.DatasetError,
        r'^Image .*b\.png has 3 channels of 8 bits but the images before it, '
        r'from .*a\.png, have 3 of 16;[^\n]*$'):
      self._convert()
    self.assertEmpty(tf.io.gfile.glob(tfexample.shard_pattern(self.out,
                                                              'train')))

  def test_image_of_another_channel_count_stops_naming_it(self):
    os.makedirs(os.path.join(self.root, 'img'))
    self._write_png('a', np.zeros((6, 7, 1), np.uint16))
    self._write_png('b', np.zeros((6, 7, 3), np.uint16))
    with self.assertRaisesRegex(
        layouts.DatasetError,
        r'^Image .*b\.png has 3 channels of 16 bits but the images before '
        r'it, from .*a\.png, have 1 of 16;[^\n]*$'):
      self._convert()
    self.assertEmpty(tf.io.gfile.glob(tfexample.shard_pattern(self.out,
                                                              'train')))

  def test_tiff_the_reader_cannot_open_stops_naming_it(self):
    os.makedirs(os.path.join(self.root, 'img'))
    self._write_png('a', np.zeros((6, 7, 1), np.uint16))
    path = os.path.join(self.root, 'img', 'b.tif')
    with open(path, 'wb') as f:
      f.write(b'II*\x00 not a TIFF past its header')
    with self.assertRaisesRegex(
        layouts.DatasetError,
        r'^Cannot read image .*b\.tif: [^\n]*unreadable or truncated'):
      self._convert()
    self.assertEmpty(tf.io.gfile.glob(tfexample.shard_pattern(self.out,
                                                              'train')))

  def test_grey_among_colour_8_bit_images_is_colour(self):
    _save(os.path.join(self.root, 'img', 'a.png'),
          self.rng.integers(0, 256, (6, 7), dtype=np.uint8))
    _save(os.path.join(self.root, 'img', 'b.png'), _image(self.rng, 6, 7))
    self._convert()
    metadata = split_metadata.read(self.out, 'train')
    self.assertEqual((metadata['channels'], metadata['bit_depth']), (3, 8))

  def test_16_bit_mask_stops_in_one_line(self):
    _save(os.path.join(self.root, 'img', 'a.png'), _image(self.rng, 6, 7))
    _save(os.path.join(self.root, 'img', 'b.png'), _image(self.rng, 6, 7))
    path = os.path.join(self.root, 'mask', 'b.png')
    with open(path, 'wb') as f:
      f.write(tf.io.encode_png(np.ones((6, 7, 1), np.uint16)).numpy())
    with self.assertRaisesRegex(layouts.DatasetError,
                                r'^Label .*b\.png is a I;16 image of more than'
                                r' 8 bits[^\n]*$'):
      self._convert()
