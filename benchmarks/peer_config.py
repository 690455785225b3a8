"""The Model Garden ExperimentConfig of an official_seg gin experiment."""

import tensorflow as tf
from official.core import exp_factory
from official.modeling import optimization
from official.modeling.optimization import lr_schedule
from official.vision.configs import semantic_segmentation as seg_cfgs

from benchmarks import peer_model
from official_seg.data import dataset_info
from official_seg.data import input_fn
from official_seg.data import preprocess
from official_seg.data import tfexample
from official_seg.modeling import inference
from official_seg.modeling import losses
from official_seg.modeling import model as model_lib
# Registers run, whose train_steps the peer trains for.
from official_seg.runtime import gin_config
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.training import optimizers

_OPTIMIZERS = {
    'tf.train.MomentumOptimizer': tf.compat.v1.train.MomentumOptimizer,
    'tf.train.AdamOptimizer': tf.compat.v1.train.AdamOptimizer}
_POLY = {'tf.keras.optimizers.schedules.PolynomialDecay':
             tf.keras.optimizers.schedules.PolynomialDecay}
_SCHEDULES = dict(_POLY, **{'schedules.LinearWarmup': lr_schedule.LinearWarmup})
_POLY_FIELDS = ('initial_learning_rate', 'decay_steps', 'end_learning_rate',
                'power', 'cycle')
# Bindings the Model Garden trainer has no counterpart for, each with the
# values under which both trainers do the same: (selector, gin scope,
# constructor, accepted values).
_MATCHING_ONLY = (
    ('gradient_multipliers.last_layer_gradient_multiplier', None,
     optimizers.gradient_multipliers, (1.0,)),
    ('gradient_multipliers.bias_multiplier', None,
     optimizers.gradient_multipliers, (1.0,)),
    ('trainable_variables.freeze', None, optimizers.trainable_variables,
     ((), [])),
    ('ModelFnOptions.fine_tune_batch_norm', None,
     model_fn_lib.ModelFnOptions, (True,)),
    ('InferenceOptions.eval_scales', None,
     inference.InferenceOptions, ((1.0,), [1.0])),
    ('InferenceOptions.add_flipped_images', None,
     inference.InferenceOptions, (False,)),
    ('Parser.min_resize_value', 'train', preprocess.Parser, (None,)),
    ('Parser.min_resize_value', 'eval', preprocess.Parser, (None,)),
)
# Our precision names -> the Model Garden's runtime.mixed_precision_dtype.
PRECISIONS = {'float32': None, 'mixed_bfloat16': 'bfloat16'}



def _data_config(scope, is_training):
  """The Model Garden DataConfig reading the shards of the `scope` split.

  The numbers are ours; the methods stay the Model Garden's: its training
  scale is relative to the crop size (the image is first fitted into it) and
  continuous, and its evaluation fits each image into EVAL_CROP_SIZE and
  scores predictions resized back to the label's size.

  Args:
    scope: 'train' or 'eval', the gin scope of build_dataset and Parser.
    is_training: bool.

  Returns:
    A `semantic_segmentation.DataConfig`.
  """
  info = dataset_info.DatasetInfo()
  crop = list(gin_config.binding('Parser.crop_size', scope))
  parser = lambda param: gin_config.binding(
      f'Parser.{param}', scope,
      **peer_model.signature_default(preprocess.Parser, param))
  dataset = lambda param: gin_config.binding(
      f'build_dataset.{param}', scope,
      **peer_model.signature_default(input_fn.build_dataset, param))
  batch = gin_config.binding(f'build_estimator.{scope}_batch_size')
  image = seg_cfgs.DenseFeatureConfig(mean=list(parser('mean_rgb')),
                                      stddev=list(parser('stddev_rgb')))
  data = seg_cfgs.DataConfig(
      input_path=tfexample.shard_pattern(
          info.data_dir, info.train_split if is_training else info.eval_split),
      output_size=crop, global_batch_size=batch, is_training=is_training,
      image_feature=image, cycle_length=dataset('cycle_length'))
  if is_training:
    data.override({'aug_scale_min': parser('min_scale_factor'),
                   'aug_scale_max': parser('max_scale_factor'),
                   'aug_rand_hflip': parser('random_flip'),
                   'shuffle_buffer_size': dataset('shuffle_buffer_size')})
  else:
    # Labels keep their size, padded like ours; a partial batch still counts.
    data.override({'resize_eval_groundtruth': False,
                   'groundtruth_padded_size': crop, 'drop_remainder': False})
  return data


def optimizer_config():
  """OptimizationConfig of make_optimizer and learning_rate.schedule."""
  # The schedules gin builds for learning_rate: their configs hold the
  # values training uses, defaults included.
  name, schedule = peer_model.mapped('learning_rate.schedule', _SCHEDULES)
  warmup = {}
  if name == 'schedules.LinearWarmup':
    config = schedule.get_config()
    warmup = {'type': 'linear', 'linear': {
        key: config[key] for key in ('warmup_steps', 'warmup_learning_rate')}}
    _, schedule = peer_model.mapped(
        'schedules.LinearWarmup.after_warmup_lr_sched', _POLY)
  poly = {key: schedule.get_config()[key] for key in _POLY_FIELDS}
  return optimization.OptimizationConfig({
      'optimizer': _optimizer(),
      'learning_rate': {'type': 'polynomial', 'polynomial': poly},
      'warmup': warmup})


def _optimizer():
  """The OptimizationConfig 'optimizer' entry of make_optimizer's."""
  name, _ = peer_model.mapped('make_optimizer.optimizer', _OPTIMIZERS)
  constructor = _OPTIMIZERS[name]
  param = lambda field: gin_config.binding(
      f'{name}.{field}', **peer_model.signature_default(constructor, field))
  if name == 'tf.train.AdamOptimizer':
    # The same update as tf.compat.v1's, epsilon included: the Keras
    # optimizer's default epsilon differs (1e-7 against 1e-8).
    return {'type': 'adam', 'adam': {
        'beta_1': param('beta1'), 'beta_2': param('beta2'),
        'epsilon': param('epsilon')}}
  return {'type': 'sgd', 'sgd': {
      'momentum': gin_config.binding(f'{name}.momentum'),
      'nesterov': param('use_nesterov')}}


def precision_name(config):
  """'float32' or 'mixed_bfloat16': the precision a `peer_config` runs in."""
  return {dtype: name for name, dtype in PRECISIONS.items()}[
      config.runtime.mixed_precision_dtype]


def _losses():
  """Losses of segmentation_loss and build_model.weight_decay."""
  loss = lambda param: gin_config.binding(
      f'segmentation_loss.{param}',
      **peer_model.signature_default(losses.segmentation_loss, param))
  return seg_cfgs.Losses(
      l2_weight_decay=gin_config.binding(
          'build_model.weight_decay',
          **peer_model.signature_default(model_lib.build_model,
                                         'weight_decay')),
      ignore_label=dataset_info.DatasetInfo().ignore_label,
      label_smoothing=loss('label_smoothing'),
      top_k_percent_pixels=loss('top_k_percent_pixels'),
      class_weights=list(loss('class_weights') or []))


def _check_matching():
  """Raises ValueError naming a binding of _MATCHING_ONLY set otherwise."""
  for selector, scope, constructor, accepted in _MATCHING_ONLY:
    param = selector.rsplit('.', 1)[1]
    value = gin_config.binding(
        selector, scope, **peer_model.signature_default(constructor, param))
    if value not in accepted:
      name = f'{scope}/{selector}' if scope else selector
      raise ValueError(
          f'gin binding {name} = {value!r} has no Model Garden '
          f'counterpart; the peer benchmark needs {accepted[0]!r}.')


def peer_config(precision=None, steps_per_loop=10, eval_batches=None,
                train_mean_iou=False):
  """The Model Garden ExperimentConfig of the parsed gin experiment.

  Args:
    precision: 'float32' or 'mixed_bfloat16'; None takes
      ModelFnOptions.precision.
    steps_per_loop: int, training steps per Orbit loop (one loss point each).
    eval_batches: optional int, validation steps; None reads the split.
    train_mean_iou: bool, the Model Garden's `report_train_mean_iou`: its
      configurations compute a training mean IoU every step (True), which
      our trainer does not; False measures the peer without that cost.

  Returns:
    A validated `ExperimentConfig` that downloads nothing.

  Raises:
    ValueError: a binding (named) has no Model Garden counterpart.
  """
  _check_matching()
  precision = precision or model_fn_lib.ModelFnOptions().precision
  if precision not in PRECISIONS:
    raise ValueError(f'--precision={precision!r}: use one of {PRECISIONS}.')
  model, base = peer_model.model_config()
  config = exp_factory.get_exp_config(base)
  config.task = seg_cfgs.SemanticSegmentationTask(
      model=model,
      train_data=_data_config('train', True),
      validation_data=_data_config('eval', False),
      losses=_losses(),
      # Our trainer writes no eval images.
      evaluation=seg_cfgs.Evaluation(report_train_mean_iou=train_mean_iou),
      allow_image_summary=False,
      init_checkpoint=None)
  config.trainer.override({
      'train_steps': gin_config.binding('run.train_steps'),
      'steps_per_loop': steps_per_loop,
      'validation_steps': eval_batches or -1,
      'optimizer_config': optimizer_config()})
  config.runtime.override({'distribution_strategy': 'one_device',
                           'num_gpus': 0,
                           'mixed_precision_dtype': PRECISIONS[precision]})
  config.validate()
  return config
