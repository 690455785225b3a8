"""Quantization-aware training: its warm start and step, the exports of the weights evaluated, its lazy import."""

import hashlib
import json
import math
import os
import shutil
import subprocess
import tempfile

import gin
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from official_seg.data import dataset_info
from official_seg.export import predictor
from official_seg.export import signatures
from official_seg.export import tflite
from official_seg.export import tflite_qat
from official_seg.export import tflite_runner
from official_seg.export import tflite_scoring
from official_seg.modeling import model as model_lib
from official_seg.modeling import quantized
from official_seg.runtime import experiment
from official_seg.runtime import gin_config
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.training import averaging
from tests import testing_utils

# Training at 33 and the TFLite input at 41 (the eval crop): the quantized
# model's template, built once in the process (the costly part of these
# tests), serves both sizes. A learning rate of 0 keeps every trained
# weight the float checkpoint gave, so the restore can be checked on the
# checkpoint the QAT step writes; the step runs in training mode (as with
# FINE_TUNE_BATCH_NORM = True), which updates the batch-norm statistics and
# the quantizers' ranges.
# Model Garden's QAT blocks quantize MobileNetV2, not tiny_bindings' V1.
_SIZE = ['CROP_SIZE = [33, 33]', 'EVAL_CROP_SIZE = [41, 41]',
         *testing_utils.MOBILENET_V2]
_DECAY = 0.9999
_QAT = ['BASE_LEARNING_RATE = 0.0',
        f'ModelFnOptions.moving_average_decay = {_DECAY}',
        "tflite_export.kinds = ['qat_int8']",
        'tflite_export.probabilities = True']
# The last convolution's variables, and the factor that gives its averaged
# kernel and bias the size of a trained classifier's (a few units of logit).
_CLASSIFIER = 'segmentation_output/'
_LOGIT_SCALE = 100.0
# The float model's weights, by the last part of their names.
_FLOAT_WEIGHTS = ('kernel', 'depthwise_kernel', 'bias', 'gamma', 'beta',
                  'moving_mean', 'moving_variance')
# What a training step changes even at a learning rate of 0.
_UPDATED = ('/moving_mean', '/moving_variance')
# tfmot's activation quantizers start with the range [-6, 6].
_INITIAL_RANGE = 6.0
_LEGACY_KERAS = 'TF_USE_LEGACY_KERAS'
# The binary, reporting at exit which modules of the quantization-aware path
# it loaded and TF_USE_LEGACY_KERAS (which tensorflow-model-optimization sets
# when imported).
_REPORTING_BINARY = '''
import atexit, json, os, sys
def report():
  loaded = sorted(name for name in sys.modules if name.startswith((
      'tensorflow_model_optimization', 'official.projects.qat')))
  with open({report!r}, 'w') as f:
    json.dump({{'loaded': loaded, 'legacy_keras': os.environ.get({env!r})}}, f)
atexit.register(report)
from official_seg import train_and_eval
sys.argv = ['train_and_eval'] + sys.argv[1:]
train_and_eval.run()
'''


def _parse(data_dir, files, extra):
  gin.clear_config()
  gin_config.parse(['experiments/quickstart.gin'] + files,
                   testing_utils.tiny_bindings(data_dir, 1, _SIZE + extra),
                   finalize=False)


def _float_run(data_dir, model_dir, report):
  """Trains a float step with the binary; returns what it loaded (`report`)."""
  driver = _REPORTING_BINARY.format(report=report, env=_LEGACY_KERAS)
  # As a user's shell starts it: this process may have run the QAT path.
  env = {k: v for k, v in os.environ.items() if k != _LEGACY_KERAS}
  result = subprocess.run(
      testing_utils.binary_command(
          model_dir, testing_utils.tiny_bindings(data_dir, 1, _SIZE + [
              'build_run_config.tf_random_seed = 3',
              'train/build_dataset.seed = 1']),
          'train', driver=driver),
      cwd=testing_utils.REPO, env=env, capture_output=True, text=True,
      timeout=testing_utils.BINARY_TIMEOUT_SECS, check=False)
  if result.returncode:
    raise AssertionError(result.stderr[-3000:])
  with open(report) as f:
    return json.load(f)


def _with_distinct_averages(checkpoint, path):
  """A copy of `checkpoint` whose moving averages differ from the weights.

  Each average is its weight plus noise of a third of the weight's spread
  (and at least 0.01), so that no average equals its weight; the
  classifier's averages are also scaled by `_LOGIT_SCALE`, so that the
  averaged model's logits span the range of its output quantizer (an
  untrained model's lie within one of its steps of 0). Written by one
  SaveV2 op, eagerly: the checkpoint's tensors, without a graph of their
  variables.

  Returns:
    The new checkpoint's path.
  """
  reader = tf.train.load_checkpoint(checkpoint)
  noise = np.random.RandomState(0)
  names = list(reader.get_variable_to_shape_map())
  values = []
  for name in names:
    value = reader.get_tensor(name)
    if name.endswith('/' + averaging.AVERAGE_NAME):
      value = value + noise.normal(
          0.0, value.std() / 3 + 0.01, value.shape).astype(value.dtype)
      if _CLASSIFIER in name:
        value = value * _LOGIT_SCALE
    values.append(tf.constant(value))
  tf.io.gfile.makedirs(os.path.dirname(path))
  tf.raw_ops.SaveV2(prefix=path, tensor_names=names,
                    shape_and_slices=[''] * len(names), tensors=values)
  return path


def _build_float_models():
  """A float model in a graph, then one eagerly in the process's graph."""
  with tf.Graph().as_default():
    model_lib.build_model(num_classes=4)(tf.zeros([1, 33, 33, 3]))
  model_lib.build_model(num_classes=4)(tf.zeros([1, 33, 33, 3]))


def _fingerprints(arrays):
  return {hashlib.sha1(np.ascontiguousarray(a).tobytes()).hexdigest()
          for a in arrays}


_LEGACY_KERAS_BEFORE = os.environ.get(_LEGACY_KERAS)


def tearDownModule():
  # tensorflow-model-optimization set it for this process when the tests
  # built quantized models; the suite's later tests start binaries that a
  # user would start without it.
  if _LEGACY_KERAS_BEFORE is None:
    os.environ.pop(_LEGACY_KERAS, None)
  else:
    os.environ[_LEGACY_KERAS] = _LEGACY_KERAS_BEFORE


class QuantizationAwareTrainingTest(tf.test.TestCase):
  """A float run, a QAT step from it, and its exports and evaluation.

  The exports and the evaluation are of a copy of the QAT checkpoint whose
  moving averages differ from its weights: they must all run the averages.
  """

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.data_dir = os.path.join(cls.root, 'data')
    testing_utils.write_tiny_dataset(cls.data_dir, num_train=2, num_val=2,
                                     num_shards=1)
    cls.float_dir = os.path.join(cls.root, 'float')
    cls.qat_dir = os.path.join(cls.root, 'qat')
    cls.float_run = _float_run(cls.data_dir, cls.float_dir,
                               os.path.join(cls.root, 'loaded.json'))
    _parse(cls.data_dir, ['deployment/qat.gin'],
           _QAT + [f"INIT_CHECKPOINT = '{cls.float_dir}'"])
    experiment.run('train', cls.qat_dir)
    cls.checkpoint = _with_distinct_averages(
        tf.train.latest_checkpoint(cls.qat_dir),
        os.path.join(cls.root, 'averaged', 'model.ckpt-1'))
    # The model each export converted or built is kept for the tests of
    # its weights and names: each costs a quantized model's rebuild.
    with testing_utils.recorded_calls(tflite_qat, 'restored_model') as restored:
      experiment.run('export_tflite', cls.qat_dir,
                     checkpoint_path=cls.checkpoint)
    cls.restored = restored
    cls.eval_record = experiment.run('eval', cls.qat_dir,
                                     checkpoint_path=cls.checkpoint)
    # The SavedModel's quantized model is built after float models (in a
    # graph and eagerly) and after quantized ones (the QAT step's, the
    # evaluation's, and the TFLite export's, in graphs and eagerly).
    _build_float_models()
    with testing_utils.recorded_calls(quantized, 'build_quantized_model') as built:
      experiment.run('export', cls.qat_dir, checkpoint_path=cls.checkpoint)
    cls.built_last = built
    cls.saved_dir = predictor.find_saved_model(cls.qat_dir)
    # One load serves the Predictor and the tests of other signatures.
    with testing_utils.recorded_calls(tf.saved_model, 'load') as loaded:
      cls.served = predictor.Predictor(cls.saved_dir)
    cls.saved_model = loaded[0][2]

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def setUp(self):
    super().setUp()
    _parse(self.data_dir, ['deployment/qat.gin'], _QAT)

  def _built_after_others(self):
    """The SavedModel export's quantized model, built after the others.

    Returns:
      The model's weight names (list of str), and its `checkpoint_names`
      (dict of quantized to float variable name).
    """
    self.assertLen(self.built_last, 1)
    (_, _, input_size), _, model = self.built_last[0]
    self.assertEqual(tuple(input_size), (41, 41))
    return ([w.name.split(':')[0] for w in model.weights],
            dict(model.checkpoint_names))

  def _checkpoint(self, model_dir):
    return tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))

  def test_a_float_run_does_not_load_the_quantization_aware_path(self):
    # Before: gin/base.gin -> export.tflite -> tflite_qat -> quantized
    # imported tensorflow-model-optimization in every run.
    self.assertEqual(self.float_run, {'loaded': [], 'legacy_keras': None})
    self.assertTrue(tf.train.latest_checkpoint(self.float_dir))

  def test_step_is_finite_and_checkpoints_fake_quant_ranges(self):
    losses = [value.simple_value
              for path in tf.io.gfile.glob(os.path.join(self.qat_dir,
                                                        '*.tfevents.*'))
              for event in tf.compat.v1.train.summary_iterator(path)
              for value in event.summary.value if value.tag == 'loss/total']
    self.assertTrue(losses)
    self.assertTrue(all(math.isfinite(loss) for loss in losses))
    reader = self._checkpoint(self.qat_dir)
    self.assertEqual(reader.get_tensor('global_step'), 1)
    maxima = [name for name in reader.get_variable_to_shape_map()
              if name.endswith('output_max')]
    self.assertGreater(len(maxima), 10)
    # The training step ran the fake quantizers: they moved their ranges.
    moved = [name for name in maxima
             if np.any(reader.get_tensor(name) != _INITIAL_RANGE)]
    self.assertTrue(moved)

  def test_float_weights_restored_into_the_quantized_model(self):
    float_reader = self._checkpoint(self.float_dir)
    qat_reader = self._checkpoint(self.qat_dir)
    qat_names = set(qat_reader.get_variable_to_shape_map())
    # The float model's weights as its training graph, in the float run's
    # process, saved them: the checkpoint but the optimizer's slots and
    # counters.
    float_names = [name for name in float_reader.get_variable_to_shape_map()
                   if name.rsplit('/', 1)[-1] in _FLOAT_WEIGHTS]
    self.assertGreater(len(float_names), 150)
    _, names = self._built_after_others()
    # Every float weight has one quantized home, found in the checkpoint.
    self.assertCountEqual(names.values(), float_names)
    compared = 0
    for quantized_name, float_name in names.items():
      self.assertIn(quantized_name, qat_names)
      if quantized_name.endswith(_UPDATED):
        continue
      compared += 1
      self.assertAllEqual(qat_reader.get_tensor(quantized_name),
                          float_reader.get_tensor(float_name),
                          msg=f'{quantized_name} <- {float_name}')
    self.assertGreater(compared, 150)

  def test_qat_int8_is_full_integer_and_runs(self):
    path = tflite.tflite_path(self.qat_dir, 'qat_int8')
    interpreter = tf.lite.Interpreter(model_path=path)
    interpreter.allocate_tensors()
    inputs = {d['name']: d for d in interpreter.get_input_details()}
    image = next(d for name, d in inputs.items() if 'image' in name)
    self.assertEqual(image['dtype'], np.uint8)
    self.assertEqual(list(image['shape']), [1, 41, 41, 3])
    # Full integer: float32 only where the uint8 image and the mask become
    # float before the first quantize op, and the probabilities output.
    outputs = {d['name'] for d in interpreter.get_output_details()}
    float_tensors = [d['name'] for d in interpreter.get_tensor_details()
                     if d['dtype'] == np.float32 and d['name'] not in outputs]
    self.assertLessEqual(len(float_tensors), 2)
    self.assertTrue(all(name.startswith('Cast') for name in float_tensors),
                    float_tensors)
    self.assertGreater(len([d for d in interpreter.get_tensor_details()
                            if d['dtype'] == np.int8]), 100)
    size = next(d for name, d in inputs.items() if 'image' not in name)
    pixels = np.random.RandomState(0).randint(0, 256, [1, 41, 41, 3])
    interpreter.set_tensor(image['index'], pixels.astype(np.uint8))
    interpreter.set_tensor(size['index'], np.array([30, 28], np.int32))
    interpreter.invoke()
    semantic = interpreter.get_tensor(
        interpreter.get_output_details()[0]['index'])
    self.assertEqual(semantic.shape, (1, 41, 41))
    self.assertTrue(np.all((semantic >= 0) & (semantic < 4)))

  def test_qat_int8_restores_the_moving_averages(self):
    # Identified by value: each trainable weight of the restored model is
    # an average of the checkpoint (which differ from the raw weights),
    # each other weight (batch-norm statistics, ranges) a raw value.
    reader = tf.train.load_checkpoint(self.checkpoint)
    names = reader.get_variable_to_shape_map()
    averages = _fingerprints(reader.get_tensor(name) for name in names
                             if name.endswith(averaging.AVERAGE_NAME))
    raw = _fingerprints(reader.get_tensor(name) for name in names
                        if not name.endswith(averaging.AVERAGE_NAME))
    self.assertFalse(averages & raw)
    # The model the qat_int8 export converted, restored from its checkpoint.
    self.assertLen(self.restored, 1)
    arguments, _, model = self.restored[0]
    source, *rest = arguments
    self.assertEqual(rest, [4, (41, 41), self.checkpoint])
    self.assertEqual(source.moving_average_decay, _DECAY)
    trainable = _fingerprints(w.numpy() for w in model.trainable_weights)
    self.assertGreater(len(trainable), 150)
    self.assertLessEqual(trainable, averages)
    self.assertLessEqual(
        _fingerprints(w.numpy() for w in model.non_trainable_weights), raw)

  def test_checkpoint_names_do_not_depend_on_what_was_built_before(self):
    # The QAT step's checkpoint holds the names of the first quantized
    # model this process built; setUpClass's evaluation and TFLite export,
    # then float models, were built in graphs and eagerly before the
    # SavedModel export's, the one compared.
    names, _ = self._built_after_others()
    self.assertLen(set(names), len(names))
    stored = self._checkpoint(self.qat_dir).get_variable_to_shape_map()
    self.assertContainsSubset(names, stored)

  def test_qat_int8_computes_the_saved_models_probabilities(self):
    # The SavedModel serves the fake-quantized graph of the averaged
    # weights; the integer kernels compute what its fake quantizers
    # simulate, up to the rounding of each layer's outputs to 8 bits. The
    # raw weights (which differ from their averages by a third of their
    # spread, and whose classifier is _LOGIT_SCALE times smaller) would
    # move the probabilities far beyond that. The tiny model labels every
    # pixel one class, so the probabilities of every class are compared,
    # not the labels.
    model = tflite_runner.TfliteModel(
        tflite.tflite_path(self.qat_dir, 'qat_int8'), num_threads=1)
    serve = self.saved_model.signatures[signatures.PROBABILITIES]
    differences = []
    for _, image, _ in tflite_scoring.eval_examples(dataset_info.DatasetInfo()):
      fitted, size = tflite_runner.fit_image(image, model.input_size)
      ours = model.run_probabilities(fitted, size)[:size[0], :size[1]]
      served = serve(**{signatures.INPUT_KEY: tf.constant(
          [tf.io.encode_png(image).numpy()])})['probabilities'][0].numpy()
      served = served[:size[0], :size[1]]
      self.assertEqual(ours.shape, served.shape)
      self.assertGreater(served.std(), 0.01, 'a vacuous comparison')
      differences.append(np.abs(ours - served).ravel())
    differences = np.concatenate(differences)
    self.assertLess(differences.mean(), 0.005)
    self.assertLess(differences.max(), 0.02)

  def test_saved_model_serves_the_fake_quantized_graph(self):
    # Read from saved_model.pb, without loading the model again.
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(self.saved_dir, 'saved_model.pb'), 'rb') as f:
      proto.ParseFromString(f.read())
    graph = proto.meta_graphs[0].graph_def
    fake_quants = [node for node in graph.node
                   if node.op.startswith('FakeQuantWithMinMaxVars')]
    self.assertGreater(len(fake_quants), 10)

  def test_eval_scores_what_the_saved_model_predicts(self):
    # The EVAL spec and the exported PREDICT spec build the same quantized
    # model from the checkpoint: the SavedModel's label maps, scored with
    # NumPy, give the evaluation's mean IoU and pixel accuracy.
    dataset = dataset_info.DatasetInfo()
    model = self.served
    confusion = np.zeros([4, 4], np.int64)
    images = 0
    for _, image, label in tflite_scoring.eval_examples(dataset):
      predicted = model(tf.io.encode_png(image).numpy())
      self.assertEqual(predicted.shape, label.shape)
      valid = label != dataset.ignore_label
      confusion += np.bincount(
          4 * label[valid].astype(np.int64) + predicted[valid],
          minlength=16).reshape(4, 4)
      images += 1
    union = confusion.sum(0) + confusion.sum(1) - np.diag(confusion)
    present = union > 0
    self.assertGreater(present.sum(), 1, 'a vacuous comparison')
    self.assertEqual(self.eval_record['num_images'], images)
    self.assertEqual(self.eval_record['global_step'], 1)
    self.assertAllClose(self.eval_record['mean_iou'],
                        (np.diag(confusion)[present] / union[present]).mean())
    self.assertAllClose(self.eval_record['pixel_accuracy'],
                        np.diag(confusion).sum() / confusion.sum())

  def test_saved_model_refuses_an_image_larger_than_the_eval_crop(self):
    model = self.served
    image = np.zeros([42, 30, 3], np.uint8)
    with self.assertRaisesRegex(ValueError, r'big.png: .*at most '
                                r'EVAL_CROP_SIZE = \[41 41\]'):
      model(tf.io.encode_png(image).numpy(), name='big.png')


class QuantizationErrorsTest(tf.test.TestCase):
  """What cannot be quantized names its binding."""

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def test_unsupported_models_name_the_binding(self):
    for extra, expected in (
        (['build_model.backbone = @backbones.ResNet',
          'backbones.ResNet.model_id = 10'], r'build_model.backbone builds a '
         r'ResNet; .*@backbones.MobileNet'),
        (['decoders.ASPP.output_tensor = False'],
         r'decoders.ASPP.output_tensor = True'),
        (["backbones.MobileNet.model_id = 'MobileNetV1'"],
         r"backbones.MobileNet.model_id = 'MobileNetV1': its blocks have "
         r"no quantized form")):
      _parse('/nonexistent', ['deployment/qat.gin'], extra)
      with self.assertRaisesRegex(quantized.QuantizationError, expected):
        quantized.template(model_lib.build_model, 4, (33, 33))

  def test_delay_and_combinations_name_the_binding(self):
    with self.assertRaisesRegex(
        ValueError, r'quantize_delay_step=100: only 0 .* or None; for a '
        r'delay, train float, then fine-tune .* from INIT_CHECKPOINT'):
      model_fn_lib.ModelFnOptions(quantize_delay_step=100)
    with self.assertRaisesRegex(ValueError, r"precision = 'float32'"):
      model_fn_lib.ModelFnOptions(quantize_delay_step=0,
                                  precision='mixed_bfloat16')


if __name__ == '__main__':
  tf.test.main()
