"""Every shipped gin file parses and builds its model and learning rate."""

import glob
import json
import os
from unittest import mock

from absl.testing import parameterized
import gin
import tensorflow as tf

from official_seg import validation
from official_seg.data import dataset_info
from official_seg.runtime import config_checks
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import gin_config
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.modeling import model as model_lib
from official_seg.training import schedules

_ROOT = gin_config.gin_dir()
_FILES = sorted(os.path.relpath(p, _ROOT)
                for p in glob.glob(os.path.join(_ROOT, '**', '*.gin'),
                                   recursive=True))
# Layer files are checked on top of the quickstart experiment; experiments
# and base.gin stand alone (base.gin needs a dataset and a backbone).
_STANDALONE = {'base.gin': ['datasets/synthetic.gin', 'backbones/mobilenet_v2.gin']}
_MACROS = ['TRAIN_STEPS = 10', "DATA_DIR = '/nonexistent'"]
# Semi-supervised layers need the unlabeled split, which experiments set.
_SEMI_MACROS = ["UNLABELED_SPLIT = 'train'"]


def _macros_for(name):
  return _MACROS + (_SEMI_MACROS if name.startswith('semi_supervised/')
                    else [])


def _model_key(num_classes):
  """What the model a parsed config builds depends on: build_model's
  bindings and those of the backbone, decoder and head it references."""
  parts = [num_classes]
  for key, value in sorted(gin.get_bindings(
      'build_model', resolve_references=False).items()):
    parts.append((key, repr(value)))
    if isinstance(value, gin.config.ConfigurableReference):
      parts.append(sorted((k, repr(v)) for k, v in
                          gin.get_bindings(value.selector).items()))
  return repr(parts)


# Models already built in this process: files whose model is one of these
# (a schedule or platform layer over the quickstart) are only parsed and
# checked.
_BUILT = set()


def _files_for(name):
  if name.startswith('experiments/'):
    return [name]
  if name in _STANDALONE:
    return [name] + _STANDALONE[name]
  return ['experiments/quickstart.gin', name]


class GinFilesTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_found_the_shipped_files(self):
    self.assertIn('experiments/quickstart.gin', _FILES)
    self.assertIn('datasets/pascal_voc.gin', _FILES)
    self.assertGreaterEqual(len([f for f in _FILES if f.startswith('backbones/')]), 4)

  @parameterized.parameters(*_FILES)
  def test_parses_and_builds(self, name):
    gin_config.parse(_files_for(name), _macros_for(name), finalize=False)
    if 'parameter_server' in name:  # Its settings need a "ps" cluster.
      self.enter_context(mock.patch.dict(os.environ, {'TF_CONFIG': json.dumps(
          {'cluster': {'chief': ['h:1'], 'ps': ['h:2']},
           'task': {'type': 'chief', 'index': 0}})}))
    # No shipped file sets a macro nothing reads, or reads one nothing sets,
    # or binds a value of the wrong form.
    config_checks.check_configuration(_files_for(name), _macros_for(name))
    task = dataset_info.DatasetInfo()
    if name.startswith('backbones/'):
      return  # tests/modeling/backbones_test.py builds and trains them.
    options = model_fn_lib.ModelFnOptions()
    if options.semi_supervised:
      stream = estimator_lib.unlabeled_stream(task, 8)
      self.assertEqual(stream.per_call_batch_size(8), stream.batch_size)
      self.assertIsNotNone(options.semi_supervised.labeler)
    with tf.Graph().as_default():
      rate = schedules.learning_rate(tf.constant(3, tf.int64))
    self.assertEqual(rate.dtype, tf.float32)
    key = _model_key(task.num_classes)
    if key in _BUILT:
      return
    with tf.Graph().as_default():
      model = model_lib.build_model(num_classes=task.num_classes)
      logits = model(tf.zeros([1, 65, 65, 3]), training=True)['logits']
    self.assertEqual(logits.shape[-1], task.num_classes)
    _BUILT.add(key)

  @parameterized.parameters(*[f for f in _FILES if f.endswith('_zoo.gin')])
  def test_zoo_experiments_evaluate_as_deeplab(self, name):
    # DeepLab's checkpoints reach its published mIoU under its evaluation.
    gin_config.parse([name], _MACROS, finalize=False)
    self.assertTrue(gin.query_parameter('InferenceOptions.align_corners'))

  def test_semi_supervised_file_without_unlabeled_split_names_the_macro(self):
    files = ['experiments/quickstart.gin', 'semi_supervised/pseudoseg.gin']
    gin_config.parse(files, _MACROS, finalize=False)
    with self.assertRaisesRegex(config_checks.ConfigurationError,
                                'macro UNLABELED_SPLIT is read by '
                                'unlabeled_stream.split'):
      config_checks.check_configuration(files, _MACROS)

  def test_required_macro_is_left_to_gin_which_names_it(self):
    # gin/warm_start/ sets INIT_CHECKPOINT = %gin.REQUIRED: the checks of an
    # unfinished config pass it over; finalizing names what to set.
    files = ['experiments/quickstart.gin', 'warm_start/backbone_and_decoder.gin']
    gin_config.parse(files, _MACROS, finalize=False)
    config_checks.check_configuration(files, _MACROS)
    gin.clear_config()
    with self.assertRaisesRegex(
        config_checks.ConfigurationError,
        r'^INIT_CHECKPOINT/macro.value set to `%gin.REQUIRED` but not '
        r'subsequently overridden.$'):
      gin_config.parse(files, _MACROS)
    gin.clear_config()
    gin_config.parse(files, _MACROS + ["INIT_CHECKPOINT = '/runs/start'"])
    self.assertEqual(gin.query_parameter('%INIT_CHECKPOINT'), '/runs/start')

  def test_unknown_binding_names_the_file(self):
    path = os.path.join(self.create_tempdir().full_path, 'typo.gin')
    with open(path, 'w') as f:
      f.write("include 'experiments/quickstart.gin'\nParser.crop_sise = [9, 9]\n")
    with self.assertRaisesRegex(ValueError, r'(?s)crop_sise.*typo\.gin.*line 2'):
      gin_config.parse([path], [])

  def test_missing_gin_file_names_both_places(self):
    with self.assertRaisesRegex(validation.ConfigurationError, 'nope.gin'):
      gin_config.parse(['gin/experiments/nope.gin'], [])


class DatasetWithTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_given_values_win_over_the_files(self):
    info = gin_config.dataset_with(['datasets/synthetic.gin'], (),
                                   data_dir='/d', split='train_1_16')
    self.assertEqual((info.data_dir, info.train_split, info.num_classes),
                     ('/d', 'train_1_16', 4))
    self.assertEqual(info.class_names[1], 'disk')

  def test_class_names_go_with_another_number_of_classes(self):
    info = gin_config.dataset_with(['datasets/synthetic.gin'], (),
                                   num_classes=6, ignore_label=0)
    self.assertEqual(info.class_names[5], 'class_5')
    self.assertEqual(info.ignore_label, 0)

  def test_without_files_or_classes_there_is_no_dataset(self):
    self.assertIsNone(gin_config.dataset_with([], (), data_dir='/d'))
    info = gin_config.dataset_with([], (), num_classes=3, split='s')
    self.assertEqual((info.ignore_label, info.train_split), (255, 's'))


if __name__ == '__main__':
  tf.test.main()
