"""plan: one real measurement whose written plan passes the binary's dry run; bad input stops with one line."""

import os
import re
import shutil
import tempfile

import gin
import tensorflow as tf

from official_seg.commands import plan
from official_seg.runtime import config_checks
from official_seg.runtime import experiment as experiment_lib
from official_seg.runtime import gin_config
from tests import testing_utils
from tests.commands import command_testing

_DATASET_GIN = 'gin/datasets/synthetic.gin'
_NO_REWRITES = 'build_run_config.graph_rewrites = False'
_TITLES = ('backbone', 'crop', 'evaluation', 'batch', 'steps', 'schedule',
           'scale', 'normalisation', 'loss', 'sampling')


def _plan(data_dir, output, **flags):
  # Grappler's rewrites cost seconds at a session's start and change no
  # choice; a binding given to plan ends the written file, so the dry run
  # skips them too.
  values = dict(gin_file=[_DATASET_GIN], data_dir=data_dir,
                gin_param=[_NO_REWRITES],
                time_budget='30m', memory_budget='64G', output=output,
                max_batch=1, backbones=['mobilenet_v2_035'])
  values.update(flags)
  return command_testing.run(plan, **values)


class PlanTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp(prefix='plan_test_')
    cls.data_dir = os.path.join(cls.root, 'data')
    testing_utils.write_tiny_dataset(cls.data_dir, num_train=6, num_val=3)
    cls.output = os.path.join(cls.root, 'plan.gin')
    # The one real measurement: the cheapest backbone at batch 1.
    cls.result = _plan(cls.data_dir, cls.output)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_each_choice_is_written_with_its_reason(self):
    self.assertEqual(self.result.status, 0, self.result.stderr)
    with open(self.output) as f:
      text = f.read()
    for title in _TITLES:
      self.assertRegex(text, rf'\n# {title}: \S[^\n]*\n')
    self.assertIn("include 'base.gin'\n", text)
    self.assertIn(f"include '{os.path.abspath(_DATASET_GIN)}'\n", text)
    self.assertRegex(text, r'measured peaks by batch \(1: \d+ MiB\)')
    self.assertIn('TRAIN_BATCH_SIZE = 1\n', text)
    # --data_dir wins over the dataset file's DATA_DIR.
    self.assertTrue(text.endswith(
        f'{_NO_REWRITES}\nDATA_DIR = {self.data_dir!r}\n'))

  def test_the_written_plan_passes_the_dry_run(self):
    self.assertEqual(self.result.status, 0, self.result.stderr)
    steps = int(re.search(r'\nTRAIN_STEPS = (\d+)\n',
                          open(self.output).read()).group(1))
    gin_config.parse([self.output], [], finalize=False)
    config_checks.check_configuration([self.output], [])
    model_dir = os.path.join(self.root, 'model')
    report = experiment_lib.run('train_and_eval', model_dir, check_only=True)
    self.assertIn(f"train: split 'train' in {self.data_dir}: ", report)
    self.assertIn(f'plan: {steps} steps of 1 images', report)
    self.assertFalse(os.path.exists(model_dir))

  def _stopped(self, result, pattern):
    self.assertEqual(result.status, 2, result.stdout)
    # The contract's heading, then the one line of the mistake.
    self.assertEqual(result.stderr.strip().splitlines()[:-1],
                     ['Invalid configuration:'])
    self.assertRegex(result.stderr.strip().splitlines()[-1], pattern)

  def _copy(self, name):
    data_dir = os.path.join(self.root, name)
    shutil.copytree(self.data_dir, data_dir)
    return data_dir

  def test_an_empty_split_stops(self):
    data_dir = self._copy('empty')
    for name in os.listdir(data_dir):
      if name.startswith('val'):
        os.remove(os.path.join(data_dir, name))
    tf.io.TFRecordWriter(os.path.join(
        data_dir, 'val-00000-of-00001.tfrecord')).close()
    self._stopped(_plan(data_dir, os.path.join(data_dir, 'plan.gin')),
                  r"Split 'val' of .* has no images")

  def test_an_unreadable_shard_stops(self):
    data_dir = self._copy('corrupt')
    with open(os.path.join(data_dir, 'train-00001-of-00002.tfrecord'),
              'wb') as f:
      f.write(b'not a record' * 10)
    self._stopped(_plan(data_dir, os.path.join(data_dir, 'plan.gin')),
                  r"Split 'train' of .* has unreadable shards: .*00001")

  def test_a_budget_start_up_uses_up_stops(self):
    self._stopped(_plan(self.data_dir, os.path.join(self.root, 'x.gin'),
                        time_budget='60s'), r'raise --time_budget')

  def test_an_unknown_backbone_stops(self):
    self._stopped(_plan(self.data_dir, os.path.join(self.root, 'x.gin'),
                        backbones=['vgg']), r'--backbones=vgg: name one')


if __name__ == '__main__':
  tf.test.main()
