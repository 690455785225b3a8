"""build_tfrecords: flags, summaries, bad data; one run a process."""

import os

import gin
import numpy as np
import tensorflow as tf

from official_seg.commands import build_tfrecords
from official_seg.data import split_metadata
from official_seg.runtime import gin_config
from tests import testing_utils
from tests import tool_testing
from tests.commands import command_testing
from tests.datasets import convert_test
from tests.datasets import convert_test

# Random images and labels saved as files, and a split's records decoded.
_image = convert_test._image  # pylint: disable=protected-access
_label = convert_test._label  # pylint: disable=protected-access
_read_split = convert_test._read_split  # pylint: disable=protected-access
_save = convert_test._save  # pylint: disable=protected-access


class ToolTest(tf.test.TestCase):

  def _run(self, **flags):
    return command_testing.run(build_tfrecords, layout='folders', **flags)

  def test_converts_folders_and_reports_bad_data(self):
    root = self.create_tempdir().full_path
    rng = np.random.default_rng(2)
    for name in ('p', 'q', 'r'):
      _save(os.path.join(root, 'img', f'{name}.png'), _image(rng, 20, 26))
      _save(os.path.join(root, 'mask', f'{name}.png'),
            _label(rng, 20, 26, [0, 1, 255]))
    flags = dict(image_dir=f'{root}/img', label_dir=f'{root}/mask',
                 output_dir=f'{root}/out', num_classes=2, splits=['train'],
                 num_workers=2)
    result = self._run(**flags)
    self.assertEqual(result.status, 0, result.stderr)
    self.assertIn('train: 3 images in 3 shards', result.stdout)
    self.assertLen(_read_split(f'{root}/out', 'train'), 3)
    self.assertEqual(
        split_metadata.read(f'{root}/out', 'train')['num_images'], 3)
    # Class ids of --num_classes: a dataset.gin of them, as of a palette.
    self.assertIn(f'Wrote {root}/out/dataset.gin', result.stdout)
    info = gin_config.read_dataset([f'{root}/out/dataset.gin'])
    self.assertEqual((info.num_classes, info.ignore_label, info.data_dir,
                      info.split_sizes), (2, 255, f'{root}/out', {'train': 3}))
    _save(os.path.join(root, 'mask', 'q.png'), np.full((20, 26), 9, np.uint8))
    result = self._run(overwrite=True, **flags)
    self.assertEqual(result.status, 2)
    # After the progress bar of the split: the mistake alone.
    reported = result.stderr.split('Invalid configuration:\n')[1]
    self.assertLen(reported.splitlines(), 1, result.stderr)
    self.assertIn(f'{root}/mask/q.png has values [9]', reported)

  def test_a_dataset_gin_of_macros_only(self):
    root = self.create_tempdir().full_path
    rng = np.random.default_rng(3)
    for name in ('p', 'q'):
      _save(os.path.join(root, 'img', f'{name}.png'), _image(rng, 8, 6))
      _save(os.path.join(root, 'mask', f'{name}.png'),
            _label(rng, 8, 6, [0, 1, 2, 7]))
    gin_file = os.path.join(root, 'mine.gin')
    with open(gin_file, 'w') as f:
      f.write("NUM_CLASSES = 3\nCLASS_NAMES = ['sky', 'road', 'car']\n"
              "IGNORE_LABEL = 7\nDATA_DIR = 'data/mine'\n"
              "TRAIN_SPLIT = 'train'\nEVAL_SPLIT = 'val'\n"
              "SPLIT_SIZES = {'train': 5}\n")
    result = self._run(image_dir=f'{root}/img', label_dir=f'{root}/mask',
                       output_dir=f'{root}/out', dataset_gin=gin_file,
                       splits=['train'], num_workers=1)
    self.assertEqual(result.status, 0, result.stderr)
    self.assertIn('train: 2 images in 2 shards', result.stdout)
    self.assertIn("expects 5 images for 'train'", result.stdout)
    self.assertRegex(result.stdout, r'2 car\s+\d')
    self.assertRegex(result.stdout, r'7 ignore\s+\d')

  def test_folders_need_a_dataset_gin_or_num_classes(self):
    # A process: the exit status and stderr of a mistake in the flags.
    root = self.create_tempdir().full_path
    result = command_testing.run_process(
        build_tfrecords, layout='folders', image_dir=root, label_dir=root,
        output_dir=f'{root}/out')
    self.assertEqual(result.returncode, 2, result.stderr)
    self.assertEqual(result.stderr.splitlines()[-2:], [
        'Invalid configuration:', '--layout=folders needs --dataset_gin, '
        '--palette or --num_classes (and --ignore_label).'])

  def test_colour_masks_of_a_cvat_export_and_the_written_gin_file(self):
    root = self.create_tempdir().full_path
    rng = np.random.default_rng(4)
    colours = np.array([[0, 0, 0], [250, 50, 83], [51, 221, 255]], np.uint8)
    with open(os.path.join(root, 'labelmap.txt'), 'w') as f:
      f.write('# label:color_rgb:parts:actions\nbackground:0,0,0::\n'
              'car:250,50,83::\nroad:51,221,255::\n')
    ids = {}
    for name in ('p', 'q'):
      ids[name] = rng.integers(0, 3, (20, 26))
      _save(os.path.join(root, 'img', f'{name}.jpg'), _image(rng, 20, 26))
      _save(os.path.join(root, 'mask', f'{name}.png'), colours[ids[name]])
    out = os.path.join(root, 'out')
    result = self._run(image_dir=f'{root}/img', label_dir=f'{root}/mask',
                       output_dir=out, palette=f'{root}/labelmap.txt',
                       splits=['train'], num_workers=1)
    self.assertEqual(result.status, 0, result.stderr)
    self.assertRegex(result.stdout, r'1 car\s+[\d,]+')
    self.assertIn(f'Wrote {out}/dataset.gin', result.stdout)
    records = _read_split(out, 'train')
    for name in ('p', 'q'):
      self.assertAllEqual(records[f'{name}.jpg']['label'][..., 0], ids[name])
    gin.clear_config()
    info = gin_config.read_dataset([f'{out}/dataset.gin'])
    self.assertEqual(info.class_names, ('background', 'car', 'road'))
    self.assertEqual((info.data_dir, info.train_split), (out, 'train'))
    self.assertEqual(info.palette, colours.tolist())


if __name__ == '__main__':
  tf.test.main()
