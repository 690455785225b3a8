"""Every shipped experiment passes --dry_run on data of its dataset's kind."""

import glob
import os
import shutil
import tempfile

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg.data import dataset_info
from official_seg.data import tfexample
from official_seg.datasets import scarce
from official_seg.datasets import synthetic
# Registers the stand-in of the Xception experiments (see _STAND_INS).
from official_seg.deeplab import mobilenet_v2  # pylint: disable=unused-import
from official_seg.runtime import config_checks
from official_seg.runtime import experiment as experiment_lib
from official_seg.runtime import gin_config
from tests import testing_utils

_EXPERIMENTS = sorted(
    os.path.relpath(path, gin_config.gin_dir()) for path in
    glob.glob(os.path.join(gin_config.gin_dir(), 'experiments', '*.gin')))

# {experiment: why its data cannot be made here}; every other experiment
# under gin/experiments/ is dry-run.
_SKIPPED = {}

# (height, width) of the images written for a dataset, by its class count:
# PASCAL VOC's largest, Cityscapes' only size, an ADE20K scene above the
# 513 its parser resizes to. The synthetic (4) and scarce (9) sets are
# written by their own generators, at the tests' small sizes.
_SHAPES = {21: (375, 500), 19: (1024, 2048), 151: (512, 683)}

# The deep backbones' training graphs (Xception-65, ResNet-101 and -50) are
# the costliest of the suite to build and run on a CPU, several times a
# MobileNet's: their experiments dry-run on a MobileNetV2 of the same kind of
# head (Model Garden's, or DeepLab's own), everything else (data, input
# pipeline, semi-supervised step, decoder, head, loss, optimizer, schedule,
# batch split) as shipped. The deep backbones themselves are built at the
# experiments' sizes in tests/runtime/gin_config_test.py and train a step of
# the model_fn's graph in tests/modeling/backbones_test.py.
_STAND_INS = {
    'backbones.DilatedResNet': [
        'build_model.backbone = @backbones.MobileNet',
        "backbones.MobileNet.model_id = 'MobileNetV2'",
        'backbones.MobileNet.filter_size_scale = 0.35'],
    'backbones.Xception': [
        'build_model.backbone = @backbones.DeepLabMobileNetV2',
        'backbones.DeepLabMobileNetV2.depth_multiplier = 0.5'],
}

# The dry run times three training steps of the experiment's batch at its
# crop. At the shipped sizes (a ResNet-101 on 64 crops of 513, Cityscapes'
# crops of 769) those are minutes of CPU; a batch of 2 and crops of 65 build
# the same graph, input pipeline and checks. Crops that are small already
# (the quickstart's 97) are kept.
_MAX_CROP = 97
_SMALL_CROP = [65, 65]
_SMALL_BATCH = 2


def _striped_examples(num_classes, ignore_label, shape):
  """`make_examples` for `synthetic.write_splits`: every class in stripes.

  Each label holds every class from 0 to `num_classes` - 1 (so the split's
  metadata reaches the dataset's class count) and a row of the ignore label.
  """
  height, width = shape

  def make(count, seed, tally):
    columns = np.arange(width) * num_classes // width
    label = np.broadcast_to(columns, (height, width)).astype(np.uint8).copy()
    label[0] = ignore_label
    ramp = np.linspace(0, 255, width, dtype=np.uint8)
    for index in range(count):
      image = np.stack([np.broadcast_to(ramp, (height, width))] * 3, -1)
      image = np.roll(image, seed + index, axis=1)
      tally.add(height, width, np.bincount(label.ravel(), minlength=256))
      yield tfexample.make_example(
          image_bytes=tf.io.encode_jpeg(image).numpy(),
          label_bytes=tf.io.encode_png(label[..., None]).numpy(),
          filename=f'striped_{seed}_{index}.jpg', image_format='jpeg',
          height=height, width=width)
  return make


def _write_splits(data_dir, dataset, splits):
  """Writes two images in one shard for each split of `splits`."""
  sizes = {split: 2 for split in splits}
  if dataset.num_classes == 4:
    synthetic.write_dataset(data_dir, sizes, num_shards=1,
                            **testing_utils.TINY_SIZES)
  elif dataset.num_classes == 9:
    scarce.write_dataset(data_dir, sizes, num_shards=1, min_size=48,
                         max_size=64)
  else:
    synthetic.write_splits(data_dir, sizes, 1, _striped_examples(
        dataset.num_classes, dataset.ignore_label,
        _SHAPES[dataset.num_classes]))


def _shrunk():
  """What shrinks a parsed experiment's step; see _STAND_INS and _MAX_CROP.

  The dry run's session takes the run's options: grappler's rewrites, which
  cost seconds at the session's start and change no value, a check or a
  report line, are off (the shipped session config runs in
  tests/quickstart_e2e_test.py).
  """
  bindings = ['build_run_config.graph_rewrites = False']
  if max(gin.query_parameter('%CROP_SIZE')) > _MAX_CROP:
    bindings.append(f'CROP_SIZE = {_SMALL_CROP}')
  if gin.query_parameter('%TRAIN_BATCH_SIZE') > _SMALL_BATCH:
    bindings.append(f'TRAIN_BATCH_SIZE = {_SMALL_BATCH}')
  backbone = gin.query_parameter('build_model.backbone').selector
  return bindings + _STAND_INS.get(backbone, [])


class ExperimentsDryRunTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # The datasets' folders are shared by every experiment of the class.
    cls.root = tempfile.mkdtemp(prefix='experiments_dry_run_')
    cls._data = {}

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def _data_dir(self, dataset, splits):
    """A folder holding `splits` of data like `dataset`'s, shared by the class.

    Folders are by class count and ignore label; a split is written the
    first time an experiment reads it.
    """
    key = (dataset.num_classes, dataset.ignore_label)
    if key[0] not in (4, 9) and key[0] not in _SHAPES:
      self.fail(f'No data can be written for NUM_CLASSES = {key[0]}: add '
                'its image shape to _SHAPES or the experiment to _SKIPPED.')
    data_dir = os.path.join(self.root, f'classes_{key[0]}_ignore_{key[1]}')
    written = self._data.setdefault(key, set())
    _write_splits(data_dir, dataset, sorted(set(splits) - written))
    written.update(splits)
    return data_dir

  def test_found_the_experiments(self):
    self.assertIn('experiments/quickstart.gin', _EXPERIMENTS)
    self.assertEmpty(set(_SKIPPED) - set(_EXPERIMENTS))

  @parameterized.named_parameters(
      (os.path.basename(name)[:-len('.gin')], name) for name in _EXPERIMENTS)
  def test_dry_run(self, experiment):
    if experiment in _SKIPPED:
      self.skipTest(_SKIPPED[experiment])
    self._dry_run(experiment)

  def _dry_run(self, experiment):
    """Writes the experiment's splits, then dry-runs it as the binary does."""
    gin_config.parse([experiment], [], finalize=False)
    dataset = dataset_info.DatasetInfo()
    splits = {dataset.train_split, dataset.eval_split,
              gin_config.binding('unlabeled_stream.split', default=None)}
    data_dir = self._data_dir(dataset, splits - {None})
    bindings = [f"DATA_DIR = '{data_dir}'"] + _shrunk()
    gin.clear_config()
    gin_config.parse([experiment], bindings, finalize=False)
    config_checks.check_configuration([experiment], bindings)
    model_dir = os.path.join(self.root, 'model')
    report = experiment_lib.run('train_and_eval', model_dir, check_only=True)
    self.assertIn(f"train: split '{dataset.train_split}' in {data_dir}: 1 "
                  'shards', report)
    self.assertRegex(report, r'model: [\d,]+ trainable parameters')
    self.assertNotIn('save this line', report)
    self.assertFalse(os.path.exists(model_dir))


if __name__ == '__main__':
  tf.test.main()
