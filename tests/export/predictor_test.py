"""Finding exports and listing the images to predict."""

import os
import re

import tensorflow as tf

from official_seg import validation
from official_seg.export import predictor


class ListImagesTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.folder = self.create_tempdir().full_path
    for name in ('b.png', 'a.jpg', 'c.JPEG', 'd.bmp', 'e.tif', 'notes.txt'):
      with open(os.path.join(self.folder, name), 'wb') as f:
        f.write(b'')

  def test_a_folder_lists_its_jpeg_png_and_tiff_files_sorted(self):
    self.assertEqual(
        [os.path.basename(path) for path in predictor.list_images(self.folder)],
        ['a.jpg', 'b.png', 'c.JPEG', 'e.tif'])

  def test_a_glob_is_filtered_the_same_way(self):
    paths = predictor.list_images(os.path.join(self.folder, '[bd].*'))
    self.assertEqual([os.path.basename(path) for path in paths], ['b.png'])

  def test_no_image_names_the_pattern_and_the_extensions(self):
    pattern = os.path.join(self.folder, '*.bmp')
    expected = rf"'{re.escape(pattern)}' names no .jpg/.jpeg/.png"
    with self.assertRaisesRegex(validation.MissingFileError, expected):
      predictor.list_images(pattern)


class FindSavedModelTest(tf.test.TestCase):

  def test_the_largest_timestamp_wins(self):
    model_dir = self.create_tempdir().full_path
    for folder in ('export/1700000000', 'export/best/1700000005',
                   'export/latest/1700000003', 'export/tmp-1'):
      os.makedirs(os.path.join(model_dir, folder))
      with open(os.path.join(model_dir, folder, 'saved_model.pb'), 'wb'):
        pass
    self.assertEqual(predictor.find_saved_model(model_dir),
                     os.path.join(model_dir, 'export/best/1700000005'))

  def test_no_export_says_how_to_export(self):
    with self.assertRaisesRegex(validation.MissingFileError, '--mode=export'):
      predictor.find_saved_model(self.create_tempdir().full_path)


if __name__ == '__main__':
  tf.test.main()
