"""plan: one real measurement of records and one of folders, whose written plans pass the binary's dry run, the folders' trained with --model_dir; bad input stops with one line."""

import os
import re
import shutil
import signal
import tempfile

import gin
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.commands import plan
from official_seg.runtime import config_checks
from official_seg.runtime import experiment as experiment_lib
from official_seg.data import split_metadata
from official_seg.evaluation import results
from official_seg.export import predictor
from official_seg.runtime import gin_config
from tests import testing_utils
from tests.commands import command_testing

_DATASET_GIN = 'gin/datasets/synthetic.gin'
_NO_REWRITES = 'build_run_config.graph_rewrites = False'
_TITLES = ('backbone', 'decoder', 'crop', 'evaluation', 'batch', 'steps',
           'batch norm', 'schedule', 'scale', 'normalisation', 'loss',
           'sampling')


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


def _stopped(test, result, pattern):
  """Exit 2, the contract's heading (after any progress bar), one line."""
  test.assertEqual(result.status, 2, result.stdout)
  reported = result.stderr.split('Invalid configuration:\n')[-1]
  test.assertLen(reported.strip().splitlines(), 1, result.stderr)
  test.assertRegex(reported, pattern)


def _write_folders(root, stems, channels=3, size=(37, 45)):
  """Random images and labels of classes 0-2 (and 255), by stem."""
  rng = np.random.default_rng(len(stems))
  for name in ('img', 'mask'):
    os.makedirs(os.path.join(root, name), exist_ok=True)
  for stem in stems:
    shape = size + ((channels,) if channels > 1 else ())
    Image.fromarray(rng.integers(0, 256, shape).astype(np.uint8)).save(
        os.path.join(root, 'img', f'{stem}.png'))
    label = rng.choice(np.array([0, 1, 2, 255], np.uint8), size)
    Image.fromarray(label).save(os.path.join(root, 'mask', f'{stem}.png'))


def _folder_flags(root, **flags):
  return dict(dict(image_dir=os.path.join(root, 'img'),
                   label_dir=os.path.join(root, 'mask'), num_classes=3,
                   gin_file=[]), **flags)


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

  def test_a_model_dir_it_cannot_write_stops_before_planning(self):
    blocker = os.path.join(self.root, 'a_file')
    open(blocker, 'w').close()
    output = os.path.join(self.root, 'unwritten.gin')
    result = _plan(self.data_dir, output,
                   model_dir=os.path.join(blocker, 'model'))
    self.assertEqual(result.status, 1, result.stderr)
    self.assertRegex(result.stderr.strip().splitlines()[-1],
                     rf'^Error: --model_dir={blocker}/model cannot be '
                     'created or written: ')
    self.assertNotIn('Measuring', result.stdout)
    self.assertFalse(os.path.exists(output))

  def test_an_unknown_backbone_stops(self):
    self._stopped(_plan(self.data_dir, os.path.join(self.root, 'x.gin'),
                        backbones=['vgg']), r'--backbones=vgg: name one')


class PlanFolderTest(tf.test.TestCase):
  """Folders before conversion: converted by build_tfrecords, planned, then
  trained, evaluated and exported in --model_dir (the one command)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp(prefix='plan_folder_test_')
    stems = [f'im{i}' for i in range(6)]
    _write_folders(cls.root, stems)
    os.makedirs(os.path.join(cls.root, 'lists'))
    for split, names in (('train', stems[:4]), ('val', stems[4:])):
      with open(os.path.join(cls.root, 'lists', f'{split}.txt'), 'w') as f:
        f.write('\n'.join(names) + '\n')
    cls.output = os.path.join(cls.root, 'run', 'plan.gin')
    cls.model_dir = os.path.join(cls.root, 'run', 'model')
    # The one real measurement of folders, and its plan's run: 2 steps (a
    # binding given to plan ends the file, so it wins), one export.
    sigterm = signal.getsignal(signal.SIGTERM)
    cls.result = _plan(None, cls.output, **_folder_flags(
        cls.root, split_list_dir=os.path.join(cls.root, 'lists'),
        model_dir=cls.model_dir, gin_param=[
            _NO_REWRITES, 'TRAIN_STEPS = 2', 'export_best.enabled = False']))
    # The run installs the trainer's SIGTERM handler, as the binary does.
    signal.signal(signal.SIGTERM, sigterm)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_folders_are_converted_beside_the_plan_then_planned(self):
    self.assertEqual(self.result.status, 0, self.result.stderr)
    records = os.path.join(self.root, 'run', 'records')
    dataset_gin = os.path.join(records, 'dataset.gin')
    self.assertIn(f'to {records} (splits train,val); its dataset: '
                  f'{dataset_gin}', self.result.stdout)
    for split, count in (('train', 4), ('val', 2)):
      self.assertEqual(split_metadata.read(records, split)['num_images'],
                       count)
    info = gin_config.read_dataset([dataset_gin])
    self.assertEqual((info.num_classes, info.ignore_label, info.data_dir,
                      info.train_split, info.eval_split),
                     (3, 255, records, 'train', 'val'))
    with open(self.output) as f:
      text = f.read()
    self.assertIn(f"include '{dataset_gin}'\n", text)
    for title in _TITLES:
      self.assertRegex(text, rf'\n# {title}: \S[^\n]*\n')
    # The records' plan passes the dry run (PlanTest); this one's bindings
    # are checked without timing another step.
    gin_config.parse([self.output], [], finalize=False)
    config_checks.check_configuration([self.output], [])

  def test_the_plan_is_trained_evaluated_and_exported_in_model_dir(self):
    self.assertEqual(self.result.status, 0, self.result.stderr)
    with open(self.output) as f:
      text = f.read()
    # The planned steps, then the binding given to plan, which wins.
    self.assertRegex(text, r'\nTRAIN_STEPS = \d+\n')
    self.assertTrue(text.endswith(
        'TRAIN_STEPS = 2\nexport_best.enabled = False\n'), text)
    self.assertEqual(tf.train.latest_checkpoint(self.model_dir),
                     os.path.join(self.model_dir, 'model.ckpt-2'))
    [record] = results.read_records(os.path.join(self.model_dir, 'eval'))
    self.assertEqual((record['global_step'], record['num_images']), (2, 2))
    ious = [record['per_class_iou'][f'class_{c}'] for c in range(3)]
    self.assertAllClose(record['mean_iou'], np.nanmean(ious))
    # What the user reads: the evaluation's table, each class's IoU in it.
    table = results.format_table(record)
    self.assertIn(table, self.result.stdout)
    self.assertIn(f'{record["mean_iou"]:.4f}', table)
    for c, iou in enumerate(ious):
      self.assertRegex(table, rf'\nclass_{c} +{iou:.4f} ')
    exported = predictor.find_saved_model(self.model_dir)
    self.assertStartsWith(exported, os.path.join(self.model_dir, 'export', ''))
    self.assertTrue(tf.saved_model.contains_saved_model(exported))

  def _folders(self, name, stems, **kwargs):
    root = os.path.join(self.root, name)
    _write_folders(root, stems, **kwargs)
    return root

  def test_an_empty_folder_stops_naming_it(self):
    root = self._folders('empty', [])
    _stopped(self, _plan(None, os.path.join(root, 'plan.gin'),
                         **_folder_flags(root)),
             rf"No images found for split 'train' \({root}/img\)")

  def test_an_image_without_its_label_stops_naming_the_label(self):
    root = self._folders('mismatched', ['a', 'b'])
    os.remove(os.path.join(root, 'mask', 'b.png'))
    _stopped(self, _plan(None, os.path.join(root, 'plan.gin'),
                         **_folder_flags(root)),
             rf'needs the label {root}/mask/b.png, which does not exist')

  def test_mixed_channels_stop_naming_the_image(self):
    root = self._folders('mixed', ['a', 'b'])
    _write_folders(root, ['c'], channels=4)
    _stopped(self, _plan(None, os.path.join(root, 'plan.gin'),
                         **_folder_flags(root)),
             rf'Image {root}/img/c.png has 4 channels of 8 bits but the '
             'images before it')

  def test_folders_and_a_dataset_file_stop(self):
    root = self._folders('both', ['a'])
    _stopped(self, _plan(None, os.path.join(root, 'plan.gin'),
                         **_folder_flags(root, gin_file=[_DATASET_GIN])),
             r'Give folders .* or --gin_file .*, not both')


  def test_folders_without_their_classes_stop(self):
    root = self._folders('classless', ['a'])
    _stopped(self, _plan(None, os.path.join(root, 'plan.gin'),
                         **_folder_flags(root, num_classes=None)),
             r'Folders need their classes: --num_classes .*--palette .*'
             r'--class_masks')

  def test_records_converted_before_are_not_converted_over(self):
    records = os.path.join(self.root, 'run', 'records')
    _stopped(self, _plan(None, self.output, **_folder_flags(
        self.root, split_list_dir=os.path.join(self.root, 'lists'))),
             rf'{records} already holds records: pass --overwrite .*'
             rf'--gin_file={records}/dataset.gin')

if __name__ == '__main__':
  tf.test.main()
