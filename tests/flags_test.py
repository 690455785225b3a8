"""Tests for official_seg/flags.py: the gin and data flags of the binary and commands."""

import os
from unittest import mock

from absl import app
from absl import flags
from absl.testing import flagsaver
import gin
import tensorflow as tf

from official_seg import flags as seg_flags
from official_seg.data import storage
from official_seg.runtime import gin_config


class SharedFlagsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_data_dir_binds_data_dir_after_every_gin_param(self):
    with flagsaver.flagsaver(gin_param=["DATA_DIR = '/from/param'"],
                             data_dir='/from/flag'):
      self.assertEqual(seg_flags.gin_params(['TRAIN_STEPS = 3']),
                       ["DATA_DIR = '/from/param'", 'TRAIN_STEPS = 3',
                        "DATA_DIR = '/from/flag'"])
    with flagsaver.flagsaver(gin_param=['TRAIN_STEPS = 3'], data_dir=None):
      self.assertEqual(seg_flags.gin_params(), ['TRAIN_STEPS = 3'])

  def test_a_commands_own_flags_are_read_when_given(self):
    own = flags.FlagValues()
    seg_flags.define_gin_flags(own)
    own(['command', '--gin_file=experiments/quickstart.gin',
         '--gin_param=TRAIN_STEPS = 9', '--data_dir=/own'])
    with flagsaver.flagsaver(gin_param=['TRAIN_STEPS = 3'], data_dir=None):
      self.assertEqual(seg_flags.gin_params(flag_values=own),
                       ['TRAIN_STEPS = 9', "DATA_DIR = '/own'"])
      seg_flags.parse_gin(finalize=False, flag_values=own)
      seg_flags.check_run_tool_args(['command'], own)
    self.assertEqual(gin_config.binding('run.train_steps'), 9)
    self.assertEqual(gin_config.macro_value('DATA_DIR'), '/own')

  def test_parse_gin_reads_the_flags_and_sets_the_store_defaults(self):
    kept = {'GCS_STAT_CACHE_MAX_AGE': '60'}
    with mock.patch.dict(os.environ, kept), flagsaver.flagsaver(
        gin_file=['experiments/quickstart.gin'],
        gin_param=['TRAIN_STEPS = 7', "DATA_DIR = '/from/param'"],
        data_dir='/from/flag'):
      for name in set(storage.GCS_PLUGIN_DEFAULTS) - set(kept):
        os.environ.pop(name, None)
      seg_flags.parse_gin(finalize=False)
      environment = dict(os.environ)
    self.assertEqual(gin_config.macro_value('DATA_DIR'), '/from/flag')
    self.assertEqual(gin_config.binding('run.train_steps'), 7)
    self.assertEqual(environment['GCS_STAT_CACHE_MAX_AGE'], '60')
    self.assertEqual(environment['GCS_READ_CACHE_BLOCK_SIZE_MB'], '0')
    self.assertEqual(environment['GCS_STAT_CACHE_MAX_ENTRIES'], '1024')

  def test_a_run_tool_needs_gin_files_and_no_stray_arguments(self):
    with flagsaver.flagsaver(gin_file=['experiments/quickstart.gin']):
      seg_flags.check_run_tool_args(['tool'])
      with self.assertRaisesRegex(app.UsageError, r"Unexpected.*\['x'\]"):
        seg_flags.check_run_tool_args(['tool', 'x'])
    with flagsaver.flagsaver(gin_file=None):
      with self.assertRaisesRegex(app.UsageError, 'Give the gin files'):
        seg_flags.check_run_tool_args(['tool'])

  def test_parse_gin_takes_a_tools_own_files(self):
    with flagsaver.flagsaver(gin_file=['experiments/quickstart.gin'],
                             gin_param=[], data_dir=None):
      seg_flags.parse_gin(['datasets/dataset.gin', 'datasets/cityscapes.gin'],
                          finalize=False)
    self.assertEqual(gin_config.macro_value('NUM_CLASSES'), 19)
    self.assertIsNone(gin_config.binding('run.train_steps', default=None))

  def test_dataset_with_gin_files_or_flags_alone(self):
    with flagsaver.flagsaver(gin_file=['datasets/cityscapes.gin'],
                             gin_param=[], data_dir='/data/cs'):
      info = seg_flags.dataset_with(split='val')
    self.assertEqual((info.num_classes, info.data_dir, info.train_split),
                     (19, '/data/cs', 'val'))
    gin.clear_config()
    with flagsaver.flagsaver(gin_file=None, gin_param=[], data_dir='/mine'):
      info = seg_flags.dataset_with(num_classes=3, split='train')
      self.assertIsNone(seg_flags.dataset_with())
    self.assertEqual((info.num_classes, info.ignore_label, info.data_dir,
                      info.train_split), (3, 255, '/mine', 'train'))


if __name__ == '__main__':
  tf.test.main()
