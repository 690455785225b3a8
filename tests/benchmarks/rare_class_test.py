"""Tests for rare_class: arms and their bindings, the split's facts, runs recorded and resumed."""

import dataclasses
import json
import os
import re

import gin
import numpy as np
import tensorflow as tf

from benchmarks import rare_class
from official_seg import validation
from official_seg.data import input_fn
from official_seg.data import tfexample
from official_seg.datasets import rare
from tests import testing_utils

_STEPS = 2
# The runs' model is not the subject: no pictures are summarized.
_CHEAP = ['host_call.image_summary_steps = 0']
_FILES = ['experiments/quickstart.gin', 'datasets/rare.gin']


def _write_tiny_rare_set(data_dir):
  rare.write_dataset(data_dir, {'train': 4, 'val': 2}, num_shards=1,
                     min_size=32, max_size=40)


def _label_counts(data_dir, split):
  """int [C, 256]: each image's pixels of each label value, by NumPy."""
  decoder = tfexample.Decoder()
  records = tf.data.TFRecordDataset(input_fn.list_shards(data_dir, split))
  return np.array([np.bincount(decoder.decode(r)['label'].numpy().ravel(),
                               minlength=256) for r in records])


def _facts():
  return rare_class.Facts(
      class_names=rare.CLASS_NAMES, rare_class=3,
      class_weights=[0.1, 1.0, 1.5, 20.0],
      sampling=[('CropSampling.cat_max_ratio', 0.75),
                ('CropSampling.foreground_classes', [3])])


class ArmTest(tf.test.TestCase):

  def test_parts_and_combinations(self):
    self.assertEqual(rare_class.arm_parts('cross_entropy'),
                     ('cross_entropy', frozenset()))
    self.assertEqual(rare_class.arm_parts('crops'),
                     ('cross_entropy', frozenset({'crops'})))
    self.assertEqual(rare_class.arm_parts('ce_dice+crops+class_weights'),
                     ('ce_dice', frozenset({'crops', 'class_weights'})))
    for arm in rare_class.ARMS:
      rare_class.arm_parts(arm)

  def test_arms_it_cannot_run_are_named(self):
    for arm, problem in (('dice+tversky', "'tversky' is none of"),
                         ('focal+dice', 'it names two losses'),
                         ('crops+crops', 'it names a part twice'),
                         ('lovasz+class_weights', 'lovasz takes no class')):
      with self.assertRaisesRegex(validation.ConfigurationError,
                                  re.escape(f'Arm {arm!r}: {problem}')):
        rare_class.arm_parts(arm)

  def test_each_arm_s_files_and_bindings(self):
    spec = rare_class.Spec(_FILES, ["DATA_DIR = 'd'"], [], [], 7)
    tail = ['SEED = 3', 'build_run_config.tf_random_seed = %SEED',
            'build_dataset.seed = %SEED', 'TRAIN_STEPS = 7',
            'make_exporters.latest = False', 'export_best.enabled = False']
    weights = 'class_weights = [0.1, 1.0, 1.5, 20.0]'
    crops = ['CropSampling.cat_max_ratio = 0.75',
             'CropSampling.foreground_classes = [3]']
    for arm, files, params in (
        ('cross_entropy', [], []),
        ('class_weights', [], [f'segmentation_loss.{weights}']),
        ('lovasz', ['losses/lovasz.gin'], []),
        ('crops', [], crops),
        ('focal+class_weights', ['losses/focal.gin'],
         [f'focal_loss.{weights}']),
        ('ce_dice+crops', ['losses/ce_dice.gin'], crops)):
      self.assertEqual(rare_class.arm_config(spec, _facts(), arm, 3),
                       (_FILES + files, ["DATA_DIR = 'd'"] + params + tail))


class FactsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.data_dir = self.create_tempdir().full_path
    _write_tiny_rare_set(self.data_dir)

  def test_weights_rare_class_and_crops_of_the_training_split(self):
    spec = rare_class.Spec(_FILES, [f"DATA_DIR = '{self.data_dir}'"], [],
                           [], 2)
    facts = rare_class.dataset_facts(spec)
    counts = _label_counts(self.data_dir, 'train')[:, :4]
    # Median frequency balancing: a class's pixels over the pixels of the
    # images holding it.
    frequency = counts.sum(0) / ((counts > 0) * counts.sum(1, keepdims=True)
                                 ).sum(0)
    self.assertAllClose(facts.class_weights,
                        np.median(frequency) / frequency, atol=5e-5)
    self.assertEqual(facts.class_names, rare.CLASS_NAMES)
    self.assertEqual(facts.rare_class, int(np.argmin(counts.sum(0))))
    self.assertEqual(facts.rare_class, rare.CRACK)
    # Background holds over half the pixels and the crack under 1%, in
    # more than a tenth of the images.
    self.assertEqual(facts.sampling, [
        ('CropSampling.cat_max_ratio', 0.75),
        ('CropSampling.foreground_share', 0.33),
        ('CropSampling.foreground_classes', [rare.CRACK]),
        ('train/build_dataset.repeat_factor_threshold', 0.0)])
    named = rare_class.dataset_facts(dataclasses.replace(spec,
                                                         rare_class='box'))
    self.assertEqual(named.rare_class, 2)
    with self.assertRaisesRegex(validation.ConfigurationError, "'crak'"):
      rare_class.dataset_facts(dataclasses.replace(spec, rare_class='crak'))


class ResumeTest(tf.test.TestCase):
  """What a second start finds: records, stopped runs, other benchmarks."""

  def setUp(self):
    super().setUp()
    gin.clear_config()
    self.data_dir = self.create_tempdir().full_path
    _write_tiny_rare_set(self.data_dir)
    self.work_dir = self.create_tempdir().full_path
    self.output = os.path.join(self.work_dir, 'records.jsonl')
    self.spec = rare_class.Spec(_FILES, [f"DATA_DIR = '{self.data_dir}'"],
                                ['cross_entropy', 'dice'], [0, 1], _STEPS)

  def _recorded(self, spec):
    key = rare_class.experiment_key(spec, rare_class.dataset_facts(spec))
    return [{'arm': arm, 'seed': seed, 'mean_iou': 0.5, 'experiment': key}
            for seed in spec.seeds for arm in spec.arms]

  def test_recorded_runs_are_not_run_again(self):
    records = self._recorded(self.spec)
    rare_class.write_records(self.output, records)
    lines = []
    self.assertEqual(rare_class.run(self.spec, self.work_dir, self.output,
                                    log=lines.append), records)
    self.assertEqual(os.listdir(self.work_dir), ['records.jsonl'])
    self.assertLen(lines, 4)
    self.assertEqual(lines[0],
                     f'cross_entropy, seed 0: recorded in {self.output}.')
    with open(self.output) as stream:
      self.assertEqual([json.loads(line) for line in stream], records)

  def test_records_of_another_benchmark_stop_it(self):
    other = dataclasses.replace(self.spec, train_steps=_STEPS + 1)
    rare_class.write_records(self.output, self._recorded(other)[:1])
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'holds runs of another benchmark .*'
                                'train_steps'):
      rare_class.run(self.spec, self.work_dir, self.output, log=print)

  def test_a_stopped_run_starts_again_and_a_foreign_folder_is_refused(self):
    stopped = os.path.join(self.work_dir, 'dice-seed0')
    os.makedirs(stopped)
    for name in (rare_class.STARTED_FILE, 'model.ckpt-1.index'):
      open(os.path.join(stopped, name), 'w').close()
    lines = []
    rare_class.prepare_run_dir(stopped, log=lines.append)
    self.assertFalse(os.path.exists(stopped))
    self.assertIn('stopped before its record', lines[0])
    foreign = os.path.join(self.work_dir, 'focal-seed0')
    os.makedirs(foreign)
    open(os.path.join(foreign, 'checkpoint'), 'w').close()
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'focal-seed0 is not empty'):
      rare_class.prepare_run_dir(foreign)
    self.assertEqual(os.listdir(foreign), ['checkpoint'])


class RunTest(tf.test.TestCase):
  """Two arms at one seed of two steps, on tiny shards of the rare set."""

  def test_runs_are_recorded_with_their_evaluation(self):
    gin.clear_config()
    data_dir = self.create_tempdir().full_path
    _write_tiny_rare_set(data_dir)
    work_dir = self.create_tempdir().full_path
    output = os.path.join(work_dir, 'rare_class.jsonl')
    spec = rare_class.Spec(
        _FILES, testing_utils.tiny_bindings(data_dir, extra=_CHEAP),
        ['cross_entropy', 'ce_dice+crops'], [0], _STEPS)
    records = rare_class.run(spec, work_dir, output, log=lambda _: None)
    self.assertEqual([(r['arm'], r['seed']) for r in records],
                     [('cross_entropy', 0), ('ce_dice+crops', 0)])
    with open(output) as stream:
      self.assertEqual([json.loads(line) for line in stream], records)
    for record in records:
      last = testing_utils.eval_records(record['model_dir'])[-1]
      self.assertEqual(last['global_step'], _STEPS)
      self.assertEqual(record['mean_iou'], last['mean_iou'])
      self.assertEqual(record['rare_class'], 'crack')
      for key in ('iou', 'dice', 'boundary_iou'):
        self.assertEqual(record[f'rare_{key}'],
                         last[f'per_class_{key}']['crack'])
      self.assertAlmostEqual(record['wall_secs'],
                             record['train_secs'] + record['eval_secs'])
      with open(os.path.join(record['model_dir'],
                             'operative_config-0.gin')) as f:
        config = f.read()
      self.assertEqual('Components.loss = @ce_dice_loss' in config,
                       record['arm'] == 'ce_dice+crops')
      self.assertEqual("CropSampling.foreground_classes = [3]" in config,
                       record['arm'] == 'ce_dice+crops')


if __name__ == '__main__':
  tf.test.main()
