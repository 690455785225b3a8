"""Tests for semi_supervised: arms over seeds, read back and summarized."""

import dataclasses
import glob
import os
import re

import numpy as np
import tensorflow as tf

from benchmarks import semi_supervised
from official_seg import validation
from official_seg.datasets import synthetic
from tests import testing_utils

_ARMS = ('labeled_only', 'fixmatch')
_SEEDS = (0, 1)
_STEPS = 2
# The runs' model is not the subject: no pictures are summarized (the
# tiny bindings already pick MobileNetV1).
_CHEAP = ['host_call.image_summary_steps = 0']


def _event_values(model_dir, tag):
  """{step: value} of one tag, read from the event files here."""
  values = {}
  for path in glob.glob(os.path.join(model_dir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == tag:
          kind = value.WhichOneof('value')
          values[event.step] = (value.simple_value if kind == 'simple_value'
                                else tf.make_ndarray(value.tensor).item())
  return values


def _record(arm, seed, miou, secs_per_step=None):
  return {'arm': arm, 'seed': seed, 'mean_iou': miou,
          'secs_per_step': secs_per_step, 'monitors': {}}


class RunTest(testing_utils.TinyDataTestCase):
  """Two arms at two seeds of two steps, on tiny shards."""

  def setUp(self):
    super().setUp()
    synthetic.write_dataset(self.data_dir, {'labeled': 3}, num_shards=1,
                            **testing_utils.TINY_SIZES)
    self.spec = semi_supervised.Spec(
        gin_files=['experiments/quickstart.gin'],
        gin_params=testing_utils.tiny_bindings(self.data_dir, extra=_CHEAP),
        labeled_split='labeled', unlabeled_split='train', arms=_ARMS,
        seeds=_SEEDS, train_steps=_STEPS)
    self.work_dir = self.create_tempdir().full_path

  def test_runs_read_back_and_summarized(self):
    records = semi_supervised.run(self.spec, self.work_dir, log=lambda _: None)
    self.assertEqual([(r['arm'], r['seed']) for r in records],
                     [(a, s) for s in _SEEDS for a in _ARMS])
    ious = {}
    for r in records:
      line = testing_utils.eval_records(r['model_dir'])[-1]
      self.assertEqual(line['global_step'], _STEPS)
      self.assertEqual(r['mean_iou'], line['mean_iou'])
      self.assertEqual(r['per_class_iou'], line['per_class_iou'])
      ious.setdefault(r['arm'], []).append(line['mean_iou'])
      with open(os.path.join(r['model_dir'], 'operative_config-0.gin')) as f:
        config = f.read()
      self.assertIn(f"SEED = {r['seed']}", config)
      self.assertEqual("UNLABELED_SPLIT = 'train'" in config,
                       r['arm'] == 'fixmatch')
      rates = list(_event_values(r['model_dir'], 'global_step/sec').values())
      self.assertAlmostEqual(r['secs_per_step'], 1 / np.median(rates))
    fixmatch = records[1]
    for tag in ('semi/pseudo_accuracy', 'semi/kept_share'):
      # Logged every step (tiny_bindings); the second half is step 1.
      self.assertAlmostEqual(fixmatch['monitors'][tag],
                             _event_values(fixmatch['model_dir'], tag)[1])
    self.assertIsNone(records[0]['monitors']['semi/kept_share'])
    summary = semi_supervised.summarize(records)
    self.assertEqual(list(summary), list(_ARMS))
    for arm in _ARMS:
      self.assertAlmostEqual(summary[arm]['mean_iou_mean'],
                             np.mean(ious[arm]))
      self.assertEqual(summary[arm]['mean_iou_min'], np.min(ious[arm]))
      self.assertEqual(summary[arm]['mean_iou_max'], np.max(ious[arm]))
    self.assertIsNone(summary['fixmatch']['recovery'])  # No full arm.
    table = semi_supervised.table(summary)
    self.assertIn(f"{np.mean(ious['fixmatch']):.4f}", table)

  def test_a_used_run_folder_is_refused(self):
    used = os.path.join(self.work_dir, 'labeled_only-seed0')
    os.makedirs(used)
    open(os.path.join(used, 'checkpoint'), 'w').close()
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'labeled_only-seed0'):
      semi_supervised.run(self.spec, self.work_dir, log=lambda _: None)

  def test_a_gin_file_changed_after_the_start_stops_it(self):
    experiment = os.path.join(self.create_tempdir().full_path, 'mine.gin')
    with open(experiment, 'w') as stream:
      stream.write("include 'experiments/quickstart.gin'\n")
    spec = dataclasses.replace(self.spec, gin_files=[experiment])
    def edit_as_the_run_starts(message):
      del message  # Any: the first comes after the benchmark's start.
      with open(experiment, 'a') as stream:
        stream.write('BASE_LEARNING_RATE = 0.5\n')
    with self.assertRaisesRegex(validation.ConfigurationError,
                                f"changed .*{re.escape(experiment)}"):
      semi_supervised.run(spec, self.work_dir, log=edit_as_the_run_starts)
    self.assertEmpty(os.listdir(self.work_dir))


class SummarizeTest(tf.test.TestCase):

  def test_spread_and_recovery_against_numpy(self):
    ious = {'labeled_only': [0.50, 0.54, 0.46], 'pseudoseg': [0.60, 0.66, 0.57],
            'fixmatch': [0.71, 0.69, 0.70], 'full': [0.80, 0.82, 0.84]}
    secs = {'labeled_only': 0.2, 'pseudoseg': 0.5, 'fixmatch': 0.44,
            'full': 0.2}
    records = [_record(arm, seed, miou, secs[arm])
               for arm, values in ious.items()
               for seed, miou in enumerate(values)]
    summary = semi_supervised.summarize(records)
    self.assertEqual(list(summary), list(semi_supervised.ARMS))
    low, high = np.mean(ious['labeled_only']), np.mean(ious['full'])
    for arm in ('pseudoseg', 'fixmatch'):
      self.assertAlmostEqual(summary[arm]['recovery'],
                             (np.mean(ious[arm]) - low) / (high - low))
      self.assertAlmostEqual(summary[arm]['step_cost'], secs[arm] / 0.2)
      self.assertEqual(summary[arm]['runs'], 3)
    self.assertNotIn('recovery', summary['full'])

  def test_no_gap_has_no_recovery(self):
    records = [_record('labeled_only', 0, 0.7), _record('full', 0, 0.7),
               _record('fixmatch', 0, 0.72)]
    summary = semi_supervised.summarize(records)
    self.assertIsNone(summary['fixmatch']['recovery'])
    self.assertIsNone(summary['fixmatch']['step_cost'])

  def test_unknown_arm_is_named(self):
    spec = semi_supervised.Spec(['experiments/quickstart.gin'], [], 'a', 'b',
                                ['mean_teacher'], [0], 2)
    with self.assertRaisesRegex(ValueError, "'mean_teacher'"):
      semi_supervised.arm_config(spec, 'mean_teacher', 0)


if __name__ == '__main__':
  tf.test.main()
