"""dataset_stats: the dataset of gin files or flags; report, chart."""

import os

from PIL import Image
import tensorflow as tf

from official_seg.commands import dataset_stats
from official_seg.data import image_classes
from official_seg.runtime import gin_config
from tests import testing_utils
from tests.commands import command_testing


class DatasetStatsToolTest(testing_utils.TinyDataTestCase):

  num_train = 3
  num_val = 2

  def setUp(self):
    super().setUp()
    self.chart = os.path.join(self.create_tempdir().full_path, 'chart.png')

  def _run(self, **flags):
    result = command_testing.run(dataset_stats, chart=self.chart, **flags)
    self.assertEqual(result.status, 0, result.stderr)
    return result.stdout

  def test_the_gin_files_the_tool_reads_set_the_dataset(self):
    info = gin_config.read_dataset(['datasets/cityscapes.gin'],
                                   ["DATA_DIR = '/data/cs'"])
    self.assertEqual((info.num_classes, info.ignore_label, info.data_dir),
                     (19, 255, '/data/cs'))
    self.assertEqual(info.class_names[-1], 'bicycle')
    self.assertEqual(info.split_sizes,
                     {'train': 2975, 'val': 500, 'test': 1525})

  def test_gin_files_name_classes_and_split_and_the_chart_is_saved(self):
    printed = self._run(gin_file=['gin/datasets/synthetic.gin'],
                        gin_param=[f"DATA_DIR = '{self.data_dir}'"])
    self.assertIn(f"Split 'train' of {self.data_dir}", printed)
    self.assertIn('3 images', printed)
    self.assertRegex(printed, r'3 triangle\s+\d')
    self.assertIn('segmentation_loss.class_weights = [', printed)
    with Image.open(self.chart) as image:
      self.assertEqual(image.format, 'PNG')

  def test_flags_alone_name_the_shards(self):
    printed = self._run(data_dir=self.data_dir, split='val', num_classes=4)
    self.assertIn(f"Split 'val' of {self.data_dir}", printed)
    self.assertIn('2 images', printed)
    self.assertRegex(printed, r'3 class_3\s+\d')

  def test_sampling_settings_are_printed_and_written_on_request(self):
    classes_file = image_classes.path(self.data_dir, 'train')
    os.remove(classes_file)  # As for shards made elsewhere.
    snippet = os.path.join(self.create_tempdir().full_path, 'sampling.gin')
    printed = self._run(gin_file=['gin/datasets/synthetic.gin'],
                        gin_param=[f"DATA_DIR = '{self.data_dir}'"],
                        sampling_gin=snippet, write_image_classes=True)
    self.assertIn('Suggested sampling settings', printed)
    self.assertIn('CropSampling.cat_max_ratio = ', printed)
    with open(snippet) as f:
      self.assertIn('import official_seg.data.crop_sampling\n', f.read())
    self.assertEqual(image_classes.read(self.data_dir, 'train', 'S'),
                     testing_utils.shard_image_labels(self.data_dir, 'train'))

  def test_a_chart_path_that_is_a_folder_is_named_before_any_work(self):
    # A process: the exit status and stderr that the user sees.
    self.chart = os.path.dirname(self.chart)
    result = command_testing.run_process(
        dataset_stats, chart=self.chart, data_dir=self.data_dir, split='val',
        num_classes=4)
    self.assertEqual(result.returncode, 2, result.stderr)
    self.assertNotIn('Traceback', result.stderr)
    self.assertEqual(result.stderr.splitlines()[-2:], [
        'Invalid configuration:',
        f'--chart={self.chart} is a folder; give a file to write.'])


if __name__ == '__main__':
  tf.test.main()
