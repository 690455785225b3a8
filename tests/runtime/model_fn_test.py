"""model_fn under both estimators: modes, options, bfloat16, first replica."""

import os

from absl.testing import parameterized
import gin
import numpy as np
import tensorflow as tf

from official_seg import validation
from official_seg.data import dataset_info
from official_seg.export import saved_model
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import components as components_lib
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.runtime import run_config as run_config_lib
from tests import testing_utils


class ModelBuilderArgumentsTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    # DatasetInfo and ModelFnOptions are configurables: bindings another
    # test left (its class names) would apply here.
    gin.clear_config()

  def test_the_model_is_built_for_the_datasets_channels(self):
    dataset = dataset_info.DatasetInfo(num_classes=2, image_channels=5)
    components = components_lib.Components(model=lambda **kwargs: kwargs)
    # pylint: disable-next=protected-access
    arguments = model_fn_lib._build_model(
        dataset, model_fn_lib.ModelFnOptions(), components,
        tf.estimator.ModeKeys.EVAL, None)
    self.assertEqual(arguments, {'num_classes': 2, 'cam_attention_dim': None,
                                 'input_channels': 5})


class ModelFnTest(testing_utils.TinyDataTestCase, parameterized.TestCase):

  # {options: (graph, ops)} of _train_graph: the default options serve two
  # tests, and no test changes a graph.
  _train_graphs = {}

  def _estimator(self, use_tpu_estimator, model_dir):
    testing_utils.parse_tiny_quickstart(
        self.data_dir, train_steps=3,
        extra=[f'USE_TPU_ESTIMATOR = {use_tpu_estimator}'])
    config = run_config_lib.build_run_config(model_dir)
    return estimator_lib.build_estimator(config)[:3]

  @parameterized.named_parameters(('estimator', False),
                                  ('tpu_estimator', True))
  def test_train_eval_predict(self, use_tpu_estimator):
    model_dir = self.create_tempdir().full_path
    estimator, train_fn, eval_fn = self._estimator(use_tpu_estimator, model_dir)
    if use_tpu_estimator:
      self.assertIsInstance(estimator, tf.compat.v1.estimator.tpu.TPUEstimator)

    estimator.train(train_fn, max_steps=3)
    # The Estimator saves the initial weights as model.ckpt-0.
    first = tf.train.load_checkpoint(os.path.join(model_dir, 'model.ckpt-0'))
    last = tf.train.load_checkpoint(estimator.latest_checkpoint())
    self.assertEqual(last.get_tensor('global_step'), 3)
    moving = [name for name in last.get_variable_to_shape_map()
              if name.endswith('moving_variance')]
    self.assertNotEmpty(moving)
    changed = [name for name in moving
               if not np.array_equal(first.get_tensor(name), last.get_tensor(name))]
    # Every batch-norm layer's statistics move with training steps.
    self.assertCountEqual(changed, moving)

    result = estimator.evaluate(eval_fn, steps=None)
    self.assertEqual(result['global_step'], 3)
    self.assertEqual(result['num_images'], 5)
    for key in ('mean_iou', 'pixel_accuracy', 'loss', 'iou/background',
                'iou/disk', 'iou/box', 'iou/triangle',
                'expected_calibration_error'):
      self.assertIn(key, result)
    self.assertBetween(result['mean_iou'], 0.0, 1.0)
    self.assertBetween(result['expected_calibration_error'], 1e-6, 1.0)

    predictions = list(estimator.predict(eval_fn, yield_single_examples=True))
    # Eval batches are padded to EVAL_BATCH_SIZE=2: 5 images give 6 rows.
    self.assertLen(predictions, 6)
    self.assertEqual(predictions[0]['semantic'].shape, (41, 41))
    self.assertEqual(predictions[0]['probabilities'].shape, (41, 41, 4))
    self.assertAllClose(predictions[0]['probabilities'].sum(-1),
                        np.ones((41, 41)), rtol=1e-5)
    self.assertTrue(os.path.isdir(os.path.join(model_dir, 'eval')))

  def _train_graph(self, options):
    """Builds (once per options) one TRAIN spec of a tiny model.

    Returns:
      (graph, the ops the train op runs: its inputs and control inputs).
    """
    if options not in self._train_graphs:
      self._train_graphs[options] = self._build_train_graph(options)
    return self._train_graphs[options]

  def _build_train_graph(self, options):
    """See `_train_graph`."""
    testing_utils.parse_tiny_quickstart(self.data_dir)
    model_fn = model_fn_lib.make_model_fn(dataset_info.DatasetInfo(), options,
                                          components_lib.Components())
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    with tf.Graph().as_default() as graph:
      spec = model_fn({'image': tf.zeros([2, 33, 33, 3])},
                      tf.zeros([2, 33, 33, 1], tf.int32),
                      tf.estimator.ModeKeys.TRAIN, {'use_tpu': False}, config)
    runs, pending = set(), [spec.train_op]
    while pending:
      op = pending.pop()
      if op not in runs:
        runs.add(op)
        pending += [t.op for t in op.inputs] + list(op.control_inputs)
    return graph, runs

  @parameterized.parameters(True, False)
  def test_jit_compile_marks_the_model_ops(self, jit_compile):
    graph, _ = self._train_graph(model_fn_lib.ModelFnOptions(
        jit_compile=jit_compile))
    compiled = {op.type for op in graph.get_operations()
                if op.node_def.attr['_XlaCompile'].b}
    if jit_compile:
      self.assertContainsSubset({'Conv2D', 'Conv2DBackpropFilter'}, compiled)
    else:
      self.assertEmpty(compiled)

  @parameterized.parameters(True, False)
  def test_fine_tune_batch_norm_decides_the_statistics_updates(self, fine_tune):
    _, runs = self._train_graph(model_fn_lib.ModelFnOptions(
        fine_tune_batch_norm=fine_tune))
    # Batch norm's moving statistics change only through AssignMovingAvg
    # updates; the train op runs them only in training mode.
    updates = [op for op in runs if op.type == 'AssignSubVariableOp'
               and 'AssignMovingAvg' in op.name]
    self.assertEqual(bool(updates), fine_tune)

  def test_unknown_precision_names_the_binding(self):
    gin.clear_config()
    with self.assertRaisesRegex(ValueError, r'ModelFnOptions.precision=.fp8'):
      model_fn_lib.ModelFnOptions(precision='fp8')

  def test_options_name_their_bindings(self):
    with self.assertRaisesRegex(
        ValueError, r'ModelFnOptions.quantize_delay_step=7: only 0'):
      model_fn_lib.ModelFnOptions(quantize_delay_step=7)
    with self.assertRaisesRegex(
        ValueError, r'ModelFnOptions.moving_average_decay=1.5'):
      model_fn_lib.ModelFnOptions(moving_average_decay=1.5)
    self.assertIsNone(model_fn_lib.ModelFnOptions().quantize_delay_step)
    for tolerance in (0, 2.5):
      with self.assertRaisesRegex(
          validation.ConfigurationError,
          rf'ModelFnOptions.boundary_tolerance = {tolerance}: expected a '
          'positive whole number'):
        model_fn_lib.ModelFnOptions(boundary_tolerance=tolerance)


class PrecisionTest(testing_utils.TinyDataTestCase):
  """bfloat16 from the platform files, under both estimators' model_fns."""

  def _assert_bfloat16_step(self, model_fn, config, params):
    """A training step of `model_fn`: bfloat16 convolutions, float32 loss."""
    with tf.Graph().as_default() as graph:
      spec = model_fn({'image': tf.zeros([2, 33, 33, 3])},
                      tf.zeros([2, 33, 33, 1], tf.int32),
                      tf.estimator.ModeKeys.TRAIN, params, config)
    convolutions = [op for op in graph.get_operations()
                    if op.type in ('Conv2D', 'DepthwiseConv2dNative')]
    self.assertNotEmpty(convolutions)
    self.assertTrue(all(op.get_attr('T') == tf.bfloat16
                        for op in convolutions))
    self.assertEqual(spec.loss.dtype, tf.float32)
    self.assertEqual(tf.keras.mixed_precision.global_policy().name, 'float32')

  def test_model_fn_computes_in_bfloat16_and_restores_the_policy(self):
    testing_utils.parse_tiny_platform(self.data_dir, 'tpu.gin')
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    built = estimator_lib.build_estimator(config)
    self._assert_bfloat16_step(built.model_fn, config,
                               {'use_tpu': False, 'batch_size': 2})

  def test_bfloat16_with_a_one_device_estimator(self):
    testing_utils.parse_tiny_platform(self.data_dir, 'bfloat16.gin')
    config = run_config_lib.build_run_config(self.create_tempdir().full_path)
    built = estimator_lib.build_estimator(config)
    self.assertIsInstance(built.estimator, tf.estimator.Estimator)
    self._assert_bfloat16_step(
        model_fn_lib.estimator_model_fn(built.model_fn), config,
        {'use_tpu': False})

  def test_float16_accumulated_steps_count_updates_and_write_the_scale(self):
    testing_utils.parse_tiny_platform(
        self.data_dir, 'float16.gin',
        extra=['UpdateOptions.accumulation_steps = 2',
               'host_call.every_n_steps = 1'])
    model_dir = self.create_tempdir().full_path
    config = run_config_lib.build_run_config(model_dir)
    built = estimator_lib.build_estimator(config)
    with tf.Graph().as_default() as graph:
      spec = built.model_fn(
          {'image': tf.zeros([2, 33, 33, 3])},
          tf.zeros([2, 33, 33, 1], tf.int32), tf.estimator.ModeKeys.TRAIN,
          {'use_tpu': False}, config)
      convolutions = [op for op in graph.get_operations()
                      if op.type == 'Conv2D']
      self.assertTrue(convolutions)
      self.assertTrue(all(op.get_attr('T') == tf.float16
                          for op in convolutions))
      global_step = tf.compat.v1.train.get_global_step()
      # The CPU path of the host_call: the hook as_estimator_spec adds.
      hooks = spec.as_estimator_spec().training_hooks
      with tf.compat.v1.train.MonitoredSession(hooks=hooks) as session:
        steps = []
        for _ in range(2):
          session.run(spec.train_op)
          # Read without the hooks, whose fetches would run a step.
          steps.append(session.run_step_fn(
              lambda step_context: step_context.session.run(global_step)))
        self.assertEqual(steps, [0, 1])
    self.assertEqual(spec.loss.dtype, tf.float32)
    self.assertIn('loss_scale', testing_utils.scalar_tags(model_dir))


class _ReadVariable(tf.estimator.SessionRunHook):
  """Reads a variable's value once the session is created (and restored)."""

  def __init__(self, name):
    self._name = name
    self.value = None

  def begin(self):
    self._variable, = [v for v in tf.compat.v1.global_variables()
                       if v.op.name == self._name]

  def after_create_session(self, session, coord):
    self.value = session.run(self._variable)


class MovingAverageTest(testing_utils.TinyDataTestCase):
  """EVAL, PREDICT and export restore the averages training kept."""

  _KERNEL = 'segmentation_head/segmentation_output/kernel'

  def test_eval_predict_and_export_restore_the_averages(self):
    # TPUEstimator(use_tpu=False) trains and evaluates; the plain Estimator
    # that serves it (same model_fn) predicts and exports.
    testing_utils.parse_tiny_quickstart(self.data_dir, train_steps=2, extra=[
        'ModelFnOptions.moving_average_decay = 0.5',
        'USE_TPU_ESTIMATOR = True'])
    built = estimator_lib.build_estimator(
        run_config_lib.build_run_config(self.create_tempdir().full_path))
    built.estimator.train(built.train_input_fn, max_steps=2)
    reader = tf.train.load_checkpoint(built.estimator.latest_checkpoint())
    name, = [key for key in reader.get_variable_to_shape_map()
             if key.endswith(self._KERNEL)]
    average = reader.get_tensor(name + '/ExponentialMovingAverage')
    self.assertGreater(np.abs(average - reader.get_tensor(name)).max(), 1e-4)

    read = _ReadVariable(name)
    built.estimator.evaluate(built.eval_input_fn, hooks=[read])
    self.assertAllEqual(read.value, average)
    read = _ReadVariable(name)
    eval_fn = testing_utils.make_input_fn(False)
    next(built.serving_estimator.predict(
        lambda params: eval_fn(dict(params, batch_size=2)), hooks=[read]))
    self.assertAllEqual(read.value, average)
    # The SavedModel carries the averages: loaded, its variable holds them.
    export_dir = saved_model.export_checkpoint(saved_model.Serving(
        built.serving_estimator,
        saved_model.serving_input_receiver_fn(built.eval_parser),
        built.dataset))
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      tf.compat.v1.saved_model.load(session, ['serve'], export_dir)
      variable, = [v for v in tf.compat.v1.global_variables()
                   if v.op.name == name]
      self.assertAllEqual(session.run(variable), average)


if __name__ == '__main__':
  tf.test.main()
