"""--dry_run: data, batch split and model checked, config printed, nothing written."""

import json
import os
import re
import subprocess
import sys
from unittest import mock

import gin
import numpy as np
import tensorflow as tf

from official_seg.data import dataset_info
from official_seg.data import split_metadata
from official_seg.modeling import model as model_lib
from official_seg.runtime import config_checks
from official_seg.runtime import dry_run
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import experiment
from official_seg.runtime import gin_config
from official_seg.runtime import run_config as run_config_lib
from official_seg.semi_supervised import views
from tests import testing_utils

_REPO = testing_utils.REPO


def _trainable_parameters():
  """The quickstart model's trainable parameters, built on its own."""
  with tf.Graph().as_default():
    model = model_lib.build_model(
        num_classes=dataset_info.DatasetInfo().num_classes)
    model(tf.zeros([1, 33, 33, 3]), training=True)
    return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


class CpuLineTest(tf.test.TestCase):
  """Which bfloat16 instructions /proc/cpuinfo's flags name."""

  _CPUINFO = ('processor\t: 0\nflags\t\t: fpu sse2 avx2 {}\n'
              'bugs\t\t: spectre_v1\n\nprocessor\t: 1\n'
              'flags\t\t: fpu sse2 avx2 {}\n')

  def test_flags_of_each_kind_of_cpu(self):
    cases = {('', ''): [],
             ('avx512f avx512_bf16', 'avx512f avx512_bf16'): ['avx512_bf16'],
             ('amx_tile amx_bf16 avx512_bf16', 'amx_tile amx_bf16'):
                 ['amx_bf16', 'avx512_bf16'],
             # A flag of another name holding the text is not the flag.
             ('avx512_bf16x avx_vnni', ''): []}
    for (first, second), expected in cases.items():
      cpuinfo = self._CPUINFO.format(first, second)
      self.assertEqual(dry_run.bfloat16_flags(cpuinfo), expected, cpuinfo)

  def test_lines(self):
    with_flag = self._CPUINFO.format('avx512_bf16', 'avx512_bf16')
    self.assertEqual(dry_run.cpu_line(with_flag),
                     'cpu: bfloat16 instructions (avx512_bf16): '
                     'gin/platforms/bfloat16.gin can train faster here')
    self.assertIn('keep float32',
                  dry_run.cpu_line(self._CPUINFO.format('avx2', 'avx2')))
    self.assertIn('unknown', dry_run.cpu_line(None))


class DryRunTest(testing_utils.TinyDataTestCase):

  def setUp(self):
    super().setUp()
    self.model_dir = os.path.join(self.create_tempdir().full_path, 'model')

  def test_reports_data_batches_parameters_and_config(self):
    testing_utils.parse_tiny_quickstart(
        self.data_dir, extra=['UpdateOptions.accumulation_steps = 2'])
    report = experiment.run('train_and_eval', self.model_dir, check_only=True)
    self.assertIn(f"train: split 'train' in {self.data_dir}: 2 shards", report)
    self.assertIn(f"eval: split 'val' in {self.data_dir}: 2 shards", report)
    self.assertIn('build_estimator.train_batch_size: global 2 = 1 replica(s) '
                  'x 2', report)
    self.assertIn(f'model: {_trainable_parameters():,} trainable parameters, '
                  'built on training images [2, 33, 33, 3]', report)
    config = report.split('Operative gin config:\n', 1)[1]
    # What the model_fn called is there, not only what the files bind.
    self.assertIn('build_model.backbone = @backbones.MobileNet', config)
    self.assertIn('make_optimizer.optimizer = @tf.train.AdamOptimizer', config)
    self.assertIn('MobileNet.norm_momentum = 0.9', config)
    self.assertFalse(os.path.exists(self.model_dir))
    self.assertIn('update: 2 micro-batch(es) x 2 images x 1 replica(s) = 4 '
                  'images a step', report)
    self.assertRegex(report, r'cpu: (no )?bfloat16 instructions')
    # tiny_bindings: 3 steps of 2 x 2 images over 6, a checkpoint every 2.
    self.assertIn("plan: 3 steps of 4 images = 2.0 epochs of split 'train' "
                  '(6 images); 2 checkpoint(s), every 2 steps and at the '
                  "last, each evaluated on split 'val' (5 images)", report)
    self.assertRegex(report, r'time: \d+\.\d{3} s a training step on this '
                     r'machine .* x 2 micro-batches\)')
    held = float(re.search(r'memory: variables ([\d.]+) MiB', report)[1])
    # Adam keeps two slots per weight: at least 3 floats per parameter.
    self.assertGreaterEqual(held, 3 * 4 * _trainable_parameters() / 2**20 - 0.1)
    self.assertRegex(report, r'a training step of 2 images took this process '
                     r'from \d+ MiB to a peak of \d+ MiB')
    # The writer left metadata beside the shards: nothing to compute.
    self.assertNotIn('save this line', report)

  def test_every_timed_fetch_ran_before_the_clock_started(self):
    # A session's first run of a fetch prunes and rewrites the graph for it
    # and takes many steps' time: a timed fetch must have run before.
    testing_utils.parse_tiny_quickstart(self.data_dir)
    events = []
    run = tf.compat.v1.Session.run

    def recorded_run(session, fetches, *args, **kwargs):
      events.append(('run', repr(fetches)))
      return run(session, fetches, *args, **kwargs)

    def clock():
      events.append(('clock', None))
      return len(events)

    config = run_config_lib.build_run_config(self.model_dir)
    built = estimator_lib.build_estimator(config)
    with mock.patch.object(tf.compat.v1.Session, 'run', recorded_run), \
        mock.patch.object(dry_run.time, 'perf_counter', clock):
      dry_run.count_and_time(built, config, built.train_batch_size,
                             timed_steps=3)
    start = events.index(('clock', None))
    timed = events[start + 1:-1]
    self.assertLen(timed, 3)
    self.assertEqual(events[-1], ('clock', None))
    for event in timed:
      self.assertIn(event, events[:start])

  def test_semi_supervised_step_is_built_on_its_own_input(self):
    # The step reads the unlabeled stream's views: a labeled-only input would
    # fail in the model_fn with a KeyError naming 'unlabeled/...'. Every
    # shipped semi-supervised experiment dry-runs in
    # tests/experiments_dry_run_test.py.
    testing_utils.parse_tiny_semi_supervised(self.data_dir, 'fixmatch.gin')
    with testing_utils.recorded_calls(views, 'zip_unlabeled') as calls:
      report = experiment.run('train_and_eval', self.model_dir,
                              check_only=True)
    self.assertLen(calls, 1)
    self.assertIn('built on training images [2, 33, 33, 3]', report)
    self.assertRegex(report, r'time: \d+\.\d{3} s a training step')
    self.assertFalse(os.path.exists(self.model_dir))

  def test_shards_without_metadata_get_their_line(self):
    written = split_metadata.read(self.data_dir, 'val')
    os.remove(split_metadata.path(self.data_dir, 'val'))
    testing_utils.parse_tiny_quickstart(self.data_dir)
    report = experiment.run('train_and_eval', self.model_dir, check_only=True)
    self.assertIn(f"split 'val': no metadata beside its shards, so every "
                  f'record was read; save this line as '
                  f"{split_metadata.path(self.data_dir, 'val')}:\n"
                  f'{split_metadata.line(written)}', report)
    self.assertNotIn("split 'train': no metadata", report)

  def test_data_that_contradicts_the_config_is_a_configuration_error(self):
    os.remove(split_metadata.path(self.data_dir, 'val'))
    testing_utils.parse_tiny_quickstart(self.data_dir,
                                        extra=['EVAL_CROP_SIZE = [20, 20]'])
    with self.assertRaisesRegex(config_checks.ConfigurationError,
                                r'EVAL_CROP_SIZE .* \[20, 20\] is smaller'):
      experiment.run('train_and_eval', self.model_dir, check_only=True)

  def test_missing_split_names_the_pattern(self):
    empty = self.create_tempdir().full_path
    testing_utils.parse_tiny_quickstart(empty)
    with self.assertRaisesRegex(config_checks.ConfigurationError,
                                f'{empty}/train-.....-of-.....'):
      experiment.run('train_and_eval', self.model_dir, check_only=True)

  def test_unreadable_shard_names_it(self):
    path = os.path.join(self.data_dir, 'val-00002-of-00003.tfrecord')
    with open(path, 'wb') as f:
      f.write(b'not a TFRecord file at all')
    testing_utils.parse_tiny_quickstart(self.data_dir)
    with self.assertRaisesRegex(OSError, 'val-00002-of-00003.tfrecord'):
      experiment.run('train_and_eval', self.model_dir, check_only=True)

  def test_batch_the_replicas_cannot_split_names_both_numbers(self):
    testing_utils.parse_tiny_quickstart(self.data_dir, extra=[
        'TRAIN_BATCH_SIZE = 3',
        'build_run_config.train_distribute = @tf.distribute.MirroredStrategy',
        "tf.distribute.MirroredStrategy.devices = ['/cpu:0', '/cpu:1']"])
    with self.assertRaisesRegex(ValueError,
                                r'train_batch_size=3 .* 2 replicas'):
      experiment.run('train_and_eval', self.model_dir, check_only=True)

  def test_multi_worker_batch_counts_every_trainer_without_joining(self):
    gin.clear_config()
    gin_config.parse(['experiments/quickstart.gin',
                      'platforms/multi_worker.gin'],
                     testing_utils.tiny_bindings(self.data_dir),
                     finalize=False)
    tf_config = {'cluster': {'chief': ['127.0.0.1:1'],
                             'worker': ['127.0.0.1:2', '127.0.0.1:3']},
                 'task': {'type': 'chief', 'index': 0}}
    with mock.patch.dict(os.environ, {'TF_CONFIG': json.dumps(tf_config)}):
      with self.assertRaisesRegex(ValueError,
                                  r'train_batch_size=2 .* 3 replicas'):
        experiment.run('train_and_eval', self.model_dir, check_only=True)

  def test_binary_flag(self):
    args = [sys.executable, '-m', 'official_seg.train_and_eval',
            '--gin_file=gin/experiments/quickstart.gin',
            f'--model_dir={self.model_dir}', '--dry_run']
    bindings = testing_utils.tiny_bindings(self.data_dir)
    proc = subprocess.run(args + [f'--gin_param={b}' for b in bindings],
                          cwd=_REPO, capture_output=True, text=True,
                          timeout=300, check=False)
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    self.assertIn('trainable parameters', proc.stdout)
    self.assertIn('Operative gin config:', proc.stdout)
    self.assertFalse(os.path.exists(self.model_dir))


if __name__ == '__main__':
  tf.test.main()
