"""Mistakes users make, caught before the run starts: units and the real binary."""

import os
import sys
from unittest import mock

from absl.testing import parameterized
import gin
import tensorflow as tf

from official_seg import validation
from official_seg.data import dataset_info
from official_seg.data import preprocess
from official_seg.modeling import inference
from official_seg.runtime import config_checks
from official_seg.runtime import estimator
from official_seg.runtime import experiment
from official_seg.runtime import gin_config
from tests import testing_utils

# (name, extra bindings, extra gin files, TPU flags, what the error says).
# Each runs in-process what the binary runs before any work (parse, the
# checks, then experiment.run up to its data check) on tiny data of images
# 24-40 pixels with 4 classes; each must raise ConfigurationError, which
# the binary turns into exit status 2 and its message (BinaryTest).
_MISTAKES = (
    ('macro_typo', ['TRAIN_STEP = 10'], [], {},
     r'macro TRAIN_STEP \(set at --gin_param="TRAIN_STEP = 10"\).*'
     r'did you mean TRAIN_STEPS\?'),
    ('learning_rate_text', ["BASE_LEARNING_RATE = 'fast'"], [], {},
     r"BASE_LEARNING_RATE = 'fast': expected a number >= 0"),
    ('crop_of_one_number', ['CROP_SIZE = [100]'], [], {},
     r'CROP_SIZE \(train/Parser.crop_size\) = \[100\]: expected two'),
    ('crop_of_zeros', ['CROP_SIZE = [0, 0]'], [], {},
     r'CROP_SIZE \(train/Parser.crop_size\) = \[0, 0\]'),
    ('batch_of_zero', ['TRAIN_BATCH_SIZE = 0'], [], {},
     r'TRAIN_BATCH_SIZE \(build_estimator.train_batch_size\) = 0: expected '
     r'a positive whole number'),
    ('eval_batch_negative', ['EVAL_BATCH_SIZE = -2'], [], {},
     r'EVAL_BATCH_SIZE \(build_estimator.eval_batch_size\) = -2'),
    ('negative_steps', ['TRAIN_STEPS = -5'], [], {},
     r'TRAIN_STEPS \(run.train_steps\) = -5'),
    ('eval_crop_too_small', ['EVAL_CROP_SIZE = [17, 17]'], [], {},
     r"EVAL_CROP_SIZE \(eval/Parser.crop_size\) = \[17, 17\] is smaller "
     r"than the largest image of split 'val'"),
    ('too_few_classes', ['NUM_CLASSES = 3', "CLASS_NAMES = ['a', 'b', 'c']"],
     [], {}, r"NUM_CLASSES = 3, but the labels of split 'train' go up to "
     r'class 3'),
    ('class_names_count', ['NUM_CLASSES = 5'], [], {},
     r'NUM_CLASSES \(DatasetInfo.num_classes\) = 5, CLASS_NAMES '
     r'\(DatasetInfo.class_names\) = .*: expected one class name per class'),
    ('ignore_label_range', ['IGNORE_LABEL = 300'], [], {},
     r'IGNORE_LABEL \(DatasetInfo.ignore_label\) = 300'),
    ('scale_range_reversed', ['train/Parser.min_scale_factor = 2.0'], [], {},
     r'train/Parser.min_scale_factor = 2.0, .*train/Parser.max_scale_factor'
     r'\) = .*: expected min <= max'),
    ('no_eval_scales', ['InferenceOptions.eval_scales = []'], [], {},
     r'InferenceOptions.eval_scales = \[\]: expected a list'),
    # Sliding windows, refused before the run, not when evaluation builds
    # its graph after training.
    ('window_of_zeros', ['WINDOW_SIZE = [0, 17]'], [], {},
     r'WINDOW_SIZE \(InferenceOptions.window_size\) = \[0, 17\]: '
     r'expected None or two positive whole numbers'),
    ('window_stride_beyond_window',
     ['WINDOW_SIZE = [17, 17]', 'InferenceOptions.window_stride = '
      '[18, 9]'], [], {},
     r'WINDOW_SIZE \(InferenceOptions.window_size\) = \[17, 17\], '
     r'InferenceOptions.window_stride = \[18, 9\]: expected '
     r'window_stride at most window_size'),
    ('window_blending_unknown',
     ['WINDOW_SIZE = [17, 17]', "InferenceOptions.window_blending = "
      "'cosine'"], [], {},
     r"InferenceOptions.window_blending = 'cosine': expected one of "
     r"\('uniform', 'gaussian'\)"),
    ('window_batch_of_zero',
     ['WINDOW_SIZE = [17, 17]', 'InferenceOptions.window_batch_size = 0'],
     [], {}, r'InferenceOptions.window_batch_size = 0: expected a '
     r'positive whole number'),
    ('unknown_binding', ['Parser.crop_sise = [9, 9]'], [], {}, r'crop_sise'),
    # A loss of gin/losses/, refused before the run, not when the model_fn
    # builds the loss.
    ('lovasz_classes_unknown', ["lovasz_softmax_loss.classes = 'some'"],
     ['losses/lovasz.gin'], {},
     r"lovasz_softmax_loss.classes = 'some': expected one of 'present', "
     r"'all'"),
    ('tpu_zone_without_tpu', [], [], {'tpu_zone': 'europe-west4-a'},
     r'--tpu_zone or --gcp_project is set but --tpu names no TPU'),
    ('ps_platform_without_cluster', [], ['platforms/parameter_server.gin'],
     {}, r'build_run_config.max_worker_delay_secs = 60: expected None outside'
     r'.*parameter_server.gin needs a TF_CONFIG cluster with "ps" tasks'),
    ('sync_batch_norm_over_merging_all_reduce',
     ['tf.distribute.MirroredStrategy.cross_device_ops = '
      '@tf.distribute.HierarchicalCopyAllReduce()'],
     ['platforms/multi_gpu.gin'],
     {}, r'cross_device_ops = HierarchicalCopyAllReduce\(\) cannot build a '
     r'step with synchronised batch norm \(USE_SYNC_BN'),
    ('missing_split', ["EVAL_SPLIT = 'valid'"], [], {},
     r'No TFRecord shards match .*valid-\?\?\?\?\?-of-'),
    ('missing_gin_file', [], ['experiments/quickstrat.gin'], {},
     r'quickstrat.gin'),
    ('import_of_no_module', [], ['{tmp}/typo.gin'], {},
     r"No module named 'official_seg.runtime.experimnt'"),
    ('typo_in_gin_file', [], ['{tmp}/mine.gin'], {},
     r'(?s)build_modle.*mine\.gin.*line 3'),
    ('init_checkpoint_missing', ["INIT_CHECKPOINT = '{tmp}/nope.ckpt'"], [],
     {}, r"INIT_CHECKPOINT \(warm_start.init_checkpoint\) = '.*/nope.ckpt': "
     r'expected None, a checkpoint prefix'),
    ('init_checkpoint_empty_folder', ["INIT_CHECKPOINT = '{tmp}'"], [], {},
     r'INIT_CHECKPOINT \(warm_start.init_checkpoint\) = .*: expected None'),
    ('checkpoint_flag_missing', [], [], {'checkpoint': '/nope/model.ckpt-3'},
     r'--checkpoint=/nope/model.ckpt-3 names no checkpoint'),
    ('unknown_palette', ["DatasetInfo.palette = 'viridis'"], [], {},
     r"DatasetInfo.palette = 'viridis': expected None, one of"),
    ('data_dir_without_shards', ["DATA_DIR = '{tmp}'"], [], {},
     r'No TFRecord shards match .*/train-\?\?\?\?\?-of-\?\?\?\?\?'
     r'\.tfrecord'),
)


class MistakesTest(testing_utils.TinyDataTestCase, parameterized.TestCase):
  """Each mistake stops before any work with our error, naming it."""

  def _stops(self, bindings, files, flags,
             expected=validation.ConfigurationError, mode='train_and_eval'):
    tmp = self.create_tempdir().full_path
    with open(os.path.join(tmp, 'typo.gin'), 'w') as f:
      f.write('import official_seg.runtime.experimnt\n')
    with open(os.path.join(tmp, 'mine.gin'), 'w') as f:
      f.write("include 'experiments/quickstart.gin'\n\n"
              'build_modle.weight_decay = 0.1\n')
    files = ['experiments/quickstart.gin'] + [f.format(tmp=tmp) for f in files]
    params = testing_utils.tiny_bindings(
        self.data_dir, extra=[b.format(tmp=tmp) for b in bindings])
    model_dir = os.path.join(tmp, 'model')
    with self.assertRaises(expected) as raised:
      # What train_and_eval.main runs before any work, in its order.
      gin_config.parse(files, params, finalize=False)
      config_checks.check_configuration(files, params)
      config_checks.check_platform(flags.get('tpu'), flags.get('tpu_zone'),
                                   flags.get('gcp_project'))
      config_checks.check_checkpoint(flags.get('checkpoint'))
      experiment.run(mode, model_dir)
    self.assertIsNone(tf.train.latest_checkpoint(model_dir))
    return raised.exception

  @parameterized.named_parameters(*_MISTAKES)
  def test_stops_before_training(self, bindings, files, flags, message):
    self.assertRegex(str(self._stops(bindings, files, flags)), message)

  def test_eval_of_a_model_dir_without_checkpoints_names_it(self):
    error = self._stops([], [], {}, expected=validation.MissingFileError,
                        mode='eval')
    self.assertRegex(str(error), r'^No checkpoint to evaluate in .*/model; '
                     'train first or pass --checkpoint.')

  @parameterized.parameters(FileNotFoundError, TimeoutError, ValueError)
  def test_an_error_of_a_bug_in_a_builder_is_not_a_mistake(self, kind):
    # The binary exits 2 only for ConfigurationError and prints only
    # validation.RunError without a traceback; anything else is a bug.
    def broken(*args, **kwargs):
      raise kind('an injected bug inside library code')
    self.enter_context(mock.patch.object(estimator, 'make_parser', broken))
    error = self._stops([], [], {}, expected=kind)
    self.assertRegex(str(error), '^an injected bug inside library code')
    self.assertNotIsInstance(
        error, (validation.ConfigurationError, validation.RunError))

  def test_model_dir_that_cannot_be_created_names_it(self):
    blocker = os.path.join(self.create_tempdir().full_path, 'a_file')
    with open(blocker, 'w') as f:
      f.write('not a folder')
    result = testing_utils.run_binary(
        os.path.join(blocker, 'model'),
        testing_utils.tiny_bindings(self.data_dir), mode='train')
    self.assertEqual(result.returncode, 1, result.stderr)
    self.assertIn(f'--model_dir={blocker}/model cannot be created or written',
                  result.stderr)
    self.assertNotIn('Traceback', result.stderr)


# The binary with a bug injected into library code that a builder calls: a
# FileNotFoundError, a type the binary once took for a user's mistake
# whatever raised it.
_INJECTED_BUG = """
import sys
from official_seg.runtime import estimator
def broken(*args, **kwargs):
  raise FileNotFoundError('an injected bug inside library code')
estimator.make_parser = broken
from official_seg import train_and_eval
sys.argv = ['train_and_eval'] + sys.argv[1:]
train_and_eval.run()
"""


class BinaryTest(testing_utils.TinyDataTestCase):
  """What only a process shows: exit status and stderr, once per kind."""

  def _run(self, bindings, driver=None):
    model_dir = os.path.join(self.create_tempdir().full_path, 'model')
    result = testing_utils.run_binary(
        model_dir, testing_utils.tiny_bindings(self.data_dir, extra=bindings),
        driver=driver)
    self.assertIsNone(tf.train.latest_checkpoint(model_dir))
    return result

  def test_mistake_exits_2_with_its_line_and_no_traceback(self):
    result = self._run(['TRAIN_STEPS = -5'])
    self.assertEqual(result.returncode, 2, result.stderr[-3000:])
    self.assertTrue(result.stderr.endswith(
        'Invalid configuration:\nTRAIN_STEPS (run.train_steps) = -5: '
        'expected a positive whole number.\n'), result.stderr[-3000:])
    self.assertNotIn('Traceback', result.stderr)

  def test_a_backbone_setting_it_rejects_exits_2_naming_the_binding(self):
    result = self._run(['import official_seg.deeplab.xception',
                        'build_model.backbone = @backbones.Xception',
                        'backbones.Xception.output_stride = 4'])
    self.assertEqual(result.returncode, 2, result.stderr[-3000:])
    self.assertTrue(result.stderr.endswith(
        'Invalid configuration:\nbackbones.Xception.output_stride = 4: '
        'expected one of 8, 16, 32.\n'), result.stderr[-3000:])
    self.assertNotIn('Traceback', result.stderr)

  def test_bug_in_a_builder_exits_1_with_its_traceback(self):
    result = self._run([], driver=_INJECTED_BUG)
    self.assertEqual(result.returncode, 1, result.stderr[-3000:])
    self.assertIn('Traceback (most recent call last)', result.stderr)
    self.assertIn('FileNotFoundError: an injected bug inside library code',
                  result.stderr)
    self.assertIn('in build_estimator', result.stderr)
    self.assertNotIn('Invalid configuration', result.stderr)
    self.assertRegex(result.stderr.splitlines()[-1],
                     r'^This is a bug in official_seg, not a mistake in your '
                     r'settings\. .*--gin_file=gin/experiments/quickstart.gin'
                     r'.*--gin_param="TRAIN_STEPS = 3"')


class ValidationTest(tf.test.TestCase):
  """Checks live in the configurable; the check before the run calls them."""

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_a_check_of_a_renamed_parameter_fails_at_import(self):
    def build(batch_size=1):  # Was `train_batch_size`.
      return batch_size
    with self.assertRaisesRegex(TypeError, r"takes no parameter "
                                r"\['train_batch_size'\]"):
      validation.checked(train_batch_size=validation.POSITIVE_WHOLE)(build)

  def test_the_check_before_the_run_calls_every_bound_configurable(self):
    def scratch_builder(size=4, other=1):
      return size, other
    validation.checked(size=validation.POSITIVE_WHOLE)(scratch_builder)
    configurable = gin.external_configurable(
        scratch_builder, module='scratch')
    self.addCleanup(validation._CHECKS.pop, scratch_builder)  # pylint: disable=protected-access
    del configurable
    gin.parse_config(['scratch.scratch_builder.size = 0',
                      'inner/scratch.scratch_builder.other = 2'])
    self.assertIn('scratch.scratch_builder.size = 0: expected a positive '
                  'whole number.', config_checks.value_problems())
    gin.clear_config()
    gin.parse_config(['scratch.scratch_builder.size = 3'])
    self.assertNotIn('scratch', ' '.join(config_checks.value_problems()))

  def test_a_bug_in_a_module_a_gin_file_imports_keeps_its_type(self):
    folder = self.create_tempdir().full_path
    with open(os.path.join(folder, 'buggy_module_for_test.py'), 'w') as f:
      f.write("raise TypeError('a bug at import')\n")
    with open(os.path.join(folder, 'buggy.gin'), 'w') as f:
      f.write('import buggy_module_for_test\n')
    sys.path.insert(0, folder)
    self.addCleanup(sys.path.remove, folder)
    with self.assertRaisesRegex(TypeError, 'a bug at import'):
      gin_config.parse([os.path.join(folder, 'buggy.gin')], [],
                       finalize=False)

  def test_eval_scales_are_checked_by_their_owner_alone(self):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                r'InferenceOptions.eval_scales = '
                                r'\(0.5, -1\): expected a list of positive'):
      inference.InferenceOptions(eval_scales=(0.5, -1))


class ChecksTest(testing_utils.TinyDataTestCase, parameterized.TestCase):
  """The checks themselves, without a process."""

  def _parse(self, extra=(), files=('experiments/quickstart.gin',)):
    gin.clear_config()
    params = testing_utils.tiny_bindings(self.data_dir, extra=extra)
    gin_config.parse(list(files), params, finalize=False)
    return list(files), params

  def test_shipped_quickstart_passes(self):
    config_checks.check_configuration(*self._parse())

  def test_every_problem_gets_its_own_line(self):
    files, params = self._parse(['TRAIN_STEPS = 0', 'TRAIN_BATCH_SIZE = 1.5',
                                 'WARMUP_STEPS = 3'])
    with self.assertRaises(config_checks.ConfigurationError) as raised:
      config_checks.check_configuration(files, params)
    lines = str(raised.exception).splitlines()
    self.assertLen(lines, 3)
    self.assertRegex(lines[0], r'^macro WARMUP_STEPS .* used by no binding')
    self.assertCountEqual(lines[1:], [
        'TRAIN_STEPS (run.train_steps) = 0: expected a positive whole '
        'number.',
        'TRAIN_BATCH_SIZE (build_estimator.train_batch_size) = 1.5: '
        'expected a positive whole number.'])

  def test_a_macro_set_nowhere_names_its_reader(self):
    gin.clear_config()
    gin_config.parse(['base.gin', 'backbones/mobilenet_v2.gin'],
                     ['TRAIN_STEPS = 3'], finalize=False)
    lines = gin_config.missing_macros()
    self.assertIn('macro NUM_CLASSES is read by DatasetInfo.num_classes but '
                  'set by no gin file or --gin_param.', lines)

  def test_where_a_macro_is_set_names_file_and_line(self):
    path = os.path.join(self.create_tempdir().full_path, 'mine.gin')
    with open(path, 'w') as f:
      f.write("include 'experiments/quickstart.gin'\n# comment\n"
              'TRAIN_STPES = 3\n')
    gin.clear_config()
    gin_config.parse([path], [f"DATA_DIR = '{self.data_dir}'"],
                     finalize=False)
    self.assertEqual(gin_config.unused_macros([path], []), [
        f'macro TRAIN_STPES (set at {path}:3) is used by no binding of this '
        'configuration; did you mean TRAIN_STEPS?'])

  def _data_lines(self, metadata, crop=(41, 41), **parser_kwargs):
    gin.clear_config()
    dataset = dataset_info.DatasetInfo(num_classes=4, data_dir='/d',
                                       train_split='train', eval_split='val')
    parser = preprocess.Parser(False, ignore_label=255, crop_size=crop,
                               **parser_kwargs)
    return config_checks.data_problems(dataset, parser, metadata)

  @parameterized.named_parameters(
      ('hierarchical_copy', 'HierarchicalCopyAllReduce'),
      ('reduction_to_one_device', 'ReductionToOneDevice'))
  def test_merging_all_reduce_with_sync_batch_norm(self, all_reduce):
    files = ('experiments/quickstart.gin', 'platforms/multi_gpu.gin')
    bound = [f'tf.distribute.MirroredStrategy.cross_device_ops = '
             f'@tf.distribute.{all_reduce}()']
    self._parse(bound, files)
    self.assertEqual(config_checks.strategy_problems(), [
        f'tf.distribute.MirroredStrategy.cross_device_ops = {all_reduce}() '
        'cannot build a step with synchronised batch norm (USE_SYNC_BN '
        '(backbones.DilatedResNet.use_sync_bn) = True): set USE_SYNC_BN = '
        'False, or keep the default all-reduce (docs/distributed.md).'])
    self._parse(bound + ['USE_SYNC_BN = False'], files)
    self.assertEmpty(config_checks.strategy_problems())
    self._parse([], files)  # The default all-reduce.
    self.assertEmpty(config_checks.strategy_problems())

  def test_data_facts(self):
    fine = {'num_images': 3, 'max_height': 40, 'max_width': 33,
            'label_histogram': {'0': 5, '3': 2, '255': 1}}
    self.assertEmpty(self._data_lines({'train': fine, 'val': fine}))
    self.assertEqual(self._data_lines({'val': fine}, crop=(39, 41)), [
        "EVAL_CROP_SIZE (eval/Parser.crop_size) = [39, 41] is smaller than "
        "the largest image of split 'val', [40, 33] (height, width): set it "
        'to at least [40, 41], or set WINDOW_SIZE (sliding windows, '
        'docs/large_images.md).'])
    # With sliding windows the eval parser pads larger images itself.
    self.assertEmpty(self._data_lines({'val': fine}, crop=(39, 41),
                                      window_size=[17, 17]))
    empty = dict(fine, num_images=0)
    self.assertEqual(self._data_lines({'train': empty}),
                     ["split 'train' in /d has no images."])
    extra_class = dict(fine, label_histogram={'4': 1})
    self.assertEqual(len(self._data_lines({'train': extra_class})), 1)

  def test_bit_mask_labels_of_the_sigmoid_kind(self):
    # 4 classes, one bit each: label values up to 15 (build_estimator
    # hands the parser OutputKind.label_values).
    all_bits = {'num_images': 1, 'max_height': 4, 'max_width': 4,
                'label_histogram': {'0': 1, '15': 1, '255': 1}}
    self.assertEmpty(self._data_lines({'train': all_bits}, num_classes=16))
    beyond = dict(all_bits, label_histogram={'16': 1})
    self.assertEqual(self._data_lines({'train': beyond}, num_classes=16), [
        "NUM_CLASSES = 4, but the labels of split 'train' hold the bit mask "
        '16 (IGNORE_LABEL = 255): the sigmoid output kind reads bit c as '
        'class c; set NUM_CLASSES to the mask classes.'])

  @parameterized.parameters(
      ((1, 8), []), ((4, 8), []), ((3, 8), []),
      ((3, 16), ["IMAGE_CHANNELS = 3 and IMAGE_BIT_DEPTH = 8, but the images "
                 "of split 'train' have 3 channels of 16 bits; set them so "
                 '(the dataset gin build_tfrecords writes does).']),
      ((5, 8), ["IMAGE_CHANNELS = 3 and IMAGE_BIT_DEPTH = 8, but the images "
                "of split 'train' have 5 channels of 8 bits; set them so "
                '(the dataset gin build_tfrecords writes does).']))
  def test_images_that_decode_otherwise_name_the_macros(self, kind, lines):
    # JPEGs and PNGs of 1, 3 and 4 channels decode into one another.
    metadata = {'num_images': 1, 'max_height': 4, 'max_width': 4,
                'label_histogram': {'0': 16}, 'channels': kind[0],
                'bit_depth': kind[1]}
    self.assertEqual(self._data_lines({'train': metadata}), lines)

  def test_a_bounded_resize_bounds_the_eval_size(self):
    large = {'num_images': 1, 'max_height': 900, 'max_width': 700,
             'label_histogram': {'0': 1}}
    # DeepLab's resize_to_range caps the longer side at 49 (= 16 * 3 + 1).
    self.assertEmpty(self._data_lines(
        {'val': large}, crop=(49, 49), min_resize_value=49,
        max_resize_value=50, resize_factor=16))
    self.assertLen(self._data_lines(
        {'val': large}, crop=(48, 49), min_resize_value=49,
        max_resize_value=50, resize_factor=16), 1)


if __name__ == '__main__':
  tf.test.main()
