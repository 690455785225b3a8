"""Tests for whole-file writes, path rules and the model-dir probe."""

import os
from unittest import mock

import tensorflow as tf

from official_seg import validation
from official_seg.data import storage


class StorageTest(tf.test.TestCase):

  def _folder_and_file(self):
    folder = self.create_tempdir().full_path
    path = os.path.join(folder, 'a_file')
    with open(path, 'w') as f:
      f.write('not a folder')
    return folder, path

  def test_check_input_names_the_flag_and_the_path(self):
    folder, path = self._folder_and_file()
    storage.check_input('--in', folder, folder=True)
    storage.check_input('--in', path, folder=False)
    missing = os.path.join(folder, 'nope')
    for expected, arguments, message in (
        (validation.MissingFileError, (missing, True),
         f'--in={missing}: no such folder.'),
        (validation.MissingFileError, (missing, False),
         f'--in={missing}: no such file.'),
        (validation.ConfigurationError, (path, True),
         f'--in={path} is a file, not a folder.'),
        (validation.ConfigurationError, (folder, False),
         f'--in={folder} is a folder, not a file.')):
      with self.assertRaises(expected) as raised:
        storage.check_input('--in', arguments[0], folder=arguments[1])
      self.assertEqual(str(raised.exception), message)

  def test_check_output_takes_what_can_be_created(self):
    folder, path = self._folder_and_file()
    storage.check_output('--out', folder, folder=True)
    storage.check_output('--out', os.path.join(folder, 'new', 'deeper'),
                         folder=True)
    storage.check_output('--out', path, folder=False)
    storage.check_output('--out', os.path.join(folder, 'new.json'),
                         folder=False)
    storage.check_output('--out', 'ram://storage_test/new', folder=True)
    self.assertFalse(os.path.exists(os.path.join(folder, 'new')))
    for arguments, message in (
        ((path, True), f'--out={path} is a file; give a folder to write.'),
        ((folder, False), f'--out={folder} is a folder; give a file to '
         'write.'),
        ((os.path.join(path, 'a', 'b'), True),
         f'--out={path}/a/b cannot be created: {path} is a file.'),
        ((os.path.join(path, 'c.json'), False),
         f'--out={path}/c.json cannot be created: {path} is a file.')):
      with self.assertRaises(validation.ConfigurationError) as raised:
        storage.check_output('--out', arguments[0], folder=arguments[1])
      self.assertEqual(str(raised.exception), message)

  def test_object_store_and_absolute_paths(self):
    self.assertTrue(storage.is_object_store('gs://bucket/model'))
    self.assertTrue(storage.is_object_store('s3://bucket/model'))
    self.assertFalse(storage.is_object_store('/tmp/model'))
    self.assertFalse(storage.is_object_store('runs/model'))
    # os.path.isabs alone calls a gs:// path relative.
    self.assertFalse(os.path.isabs('gs://bucket/model.ckpt-2'))
    self.assertTrue(storage.is_absolute('gs://bucket/model.ckpt-2'))
    self.assertTrue(storage.is_absolute('/m/model.ckpt-2'))
    self.assertFalse(storage.is_absolute('model.ckpt-2'))

  def test_write_whole_replaces_the_file_and_leaves_nothing_else(self):
    folder = os.path.join(self.create_tempdir().full_path, 'new', 'folder')
    path = os.path.join(folder, 'a.json')
    storage.write_whole(path, 'first, longer contents')
    storage.write_whole(path, 'second')
    with open(path) as f:
      self.assertEqual(f.read(), 'second')
    storage.write_whole(path, b'\x00\x01')
    with open(path, 'rb') as f:
      self.assertEqual(f.read(), b'\x00\x01')
    self.assertEqual(os.listdir(folder), ['a.json'])

  def test_write_whole_on_a_scheme_path_writes_in_place(self):
    # TensorFlow's in-memory file system stands for a scheme:// store here;
    # tests/runtime/object_store_test.py runs a real one.
    path = 'ram://storage_test/folder/a.json'
    self.assertEqual(storage.write_whole(path, 'contents'), path)
    with tf.io.gfile.GFile(path) as f:
      self.assertEqual(f.read(), 'contents')
    self.assertEqual(tf.io.gfile.listdir('ram://storage_test/folder'),
                     ['a.json'])

  def test_copy_whole(self):
    folder = self.create_tempdir().full_path
    source = os.path.join(folder, 'source')
    with open(source, 'wb') as f:
      f.write(b'checkpoint bytes')
    target = os.path.join(folder, 'target')
    storage.copy_whole(source, target)
    with open(target, 'rb') as f:
      self.assertEqual(f.read(), b'checkpoint bytes')
    self.assertCountEqual(os.listdir(folder), ['source', 'target'])
    with self.assertRaises(tf.errors.NotFoundError):
      storage.copy_whole(os.path.join(folder, 'gone'), target)

  def test_copy_folder_whole_copies_every_file_and_the_named_one_last(self):
    source = self.create_tempdir().full_path
    contents = {'saved_model.pb': b'graph', 'variables/variables.index': b'i',
                'variables/variables.data-00000-of-00001': b'd',
                'assets.extra/segmentation.json': b'{}'}
    for name, data in contents.items():
      os.makedirs(os.path.dirname(os.path.join(source, name)), exist_ok=True)
      with open(os.path.join(source, name), 'wb') as f:
        f.write(data)
    target = 'ram://storage_test/export/1'
    with mock.patch.object(storage, 'copy_whole',
                           wraps=storage.copy_whole) as copy:
      storage.copy_folder_whole(source, target, last='saved_model.pb')
    self.assertEqual(copy.call_args_list[-1], mock.call(
        os.path.join(source, 'saved_model.pb'),
        f'{target}/saved_model.pb'))
    self.assertLen(copy.call_args_list, 4)
    for name, data in contents.items():
      with tf.io.gfile.GFile(f'{target}/{name}', 'rb') as f:
        self.assertEqual(f.read(), data)

  def test_check_writable_creates_the_folder_and_removes_its_probe(self):
    folder = os.path.join(self.create_tempdir().full_path, 'model')
    storage.check_writable(folder, timeout_secs=60)
    self.assertEqual(os.listdir(folder), [])

  def test_check_writable_raises_for_a_folder_under_a_file(self):
    blocker = os.path.join(self.create_tempdir().full_path, 'a_file')
    with open(blocker, 'w') as f:
      f.write('not a folder')
    with self.assertRaises(tf.errors.OpError):
      storage.check_writable(os.path.join(blocker, 'model'), timeout_secs=60)

  def test_gcs_plugin_defaults_fill_only_what_is_unset(self):
    environ = {'GCS_STAT_CACHE_MAX_AGE': '30', 'HOME': '/root'}
    storage.set_gcs_plugin_defaults(environ)
    self.assertEqual(environ['GCS_STAT_CACHE_MAX_AGE'], '30')
    self.assertEqual(environ['HOME'], '/root')
    for name in storage.GCS_PLUGIN_DEFAULTS:
      self.assertTrue(environ[name].isdigit(), name)
    self.assertLen(environ, len(storage.GCS_PLUGIN_DEFAULTS) + 1)


if __name__ == '__main__':
  tf.test.main()
