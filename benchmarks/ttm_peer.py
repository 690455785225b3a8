"""The Model Garden's registered recipe: its time to a mean IoU on our data."""

import gin
import tensorflow as tf
from official.core import exp_factory
from official.core import train_utils
from official.modeling import performance

from benchmarks import measure
from benchmarks import peer
from benchmarks import peer_config as peer_config_lib
from benchmarks import peer_model
from benchmarks import time_to_miou
from official_seg.data import dataset_info
from official_seg.data import input_fn
from official_seg.data import preprocess
from official_seg.data import tfexample
# Registers run, whose train_steps is the default --max_steps.
from official_seg.runtime import gin_config

# The fields of the registered recipe that `recipe_config` sets, and why.
# Everything else (optimizer, learning-rate schedule and warm-up, batch-norm
# momentum and epsilon, activation, augmentation, loss, ASPP and head) stays
# as exp_factory registers it.
RECIPE_OVERRIDES = {
    'task.train_data.input_path': 'our training shards (DeepLab keys)',
    'task.train_data.output_size': "our training crop (train/Parser)",
    'task.train_data.global_batch_size': 'TRAIN_BATCH_SIZE',
    'task.validation_data.input_path': 'our eval shards; scored by '
                                       'official_seg\'s evaluation code',
    'task.model.num_classes': 'the dataset\'s classes',
    'task.losses.ignore_label': 'the dataset\'s ignore label',
    'task.model.backbone': 'the experiment\'s backbone (width, output '
                           'stride): the same architecture size',
    'task.model.decoder.aspp.level': 'the backbone\'s output stride',
    'task.model.head.level': 'the backbone\'s output stride',
    'task.model.norm_activation.use_sync_bn': 'one CPU replica: the same '
                                              'statistics, no collectives',
    'task.init_checkpoint': 'nothing is downloaded: from scratch, as ours',
    'task.evaluation.report_train_mean_iou': '--peer_train_mean_iou',
    'trainer.train_steps': '--max_steps (the schedule keeps its own steps)',
    'trainer.steps_per_loop': '--eval_every_steps: one Orbit loop per '
                              'evaluation',
    'runtime.distribution_strategy': 'one CPU device',
}


def recipe_config(max_steps, eval_every_steps, train_mean_iou=False):
  """The registered recipe of the parsed experiment's backbone, on our data.

  Args:
    max_steps: int, trainer.train_steps.
    eval_every_steps: int, trainer.steps_per_loop.
    train_mean_iou: bool, the recipe's report_train_mean_iou (its default is
      True: a training mean IoU every step, which ours does not compute).

  Returns:
    (validated `ExperimentConfig`, the recipe's registered name).
  """
  model, base = peer_model.model_config()
  info = dataset_info.DatasetInfo()
  config = exp_factory.get_exp_config(base)
  level = model.decoder.aspp.level  # log2 of the backbone's output stride.
  config.task.model.backbone = model.backbone
  config.override({
      'task': {
          'model': {'num_classes': info.num_classes,
                    'decoder': {'aspp': {'level': level}},
                    'head': {'level': level},
                    'norm_activation': {'use_sync_bn': False}},
          'losses': {'ignore_label': info.ignore_label},
          'train_data': {
              'input_path': tfexample.shard_pattern(info.data_dir,
                                                    info.train_split),
              'output_size': list(gin_config.binding('Parser.crop_size',
                                                     'train')),
              'global_batch_size': gin_config.binding(
                  'build_estimator.train_batch_size')},
          'validation_data': {'input_path': tfexample.shard_pattern(
              info.data_dir, info.eval_split)},
          'evaluation': {'report_train_mean_iou': train_mean_iou},
          'init_checkpoint': None},
      'trainer': {'train_steps': max_steps,
                  'steps_per_loop': eval_every_steps},
      'runtime': {'distribution_strategy': 'one_device'},
  }, is_strict=True)
  config.validate()
  return config, base


def eval_dataset(config):
  """Our eval split placed as official_seg's eval Parser places it.

  Each image at its own resolution, padded at the bottom and right to
  EVAL_CROP_SIZE (labels with the ignore label), normalized with the
  recipe's own mean and stddev (the same formula as the Model Garden's).
  """
  info = dataset_info.DatasetInfo()
  image = config.task.train_data.image_feature
  with gin.config_scope('eval'):
    parser = preprocess.Parser(
        False, ignore_label=info.ignore_label, num_classes=info.num_classes,
        mean_rgb=list(image.mean), stddev_rgb=list(image.stddev))
  batch = gin_config.binding('build_estimator.eval_batch_size')
  return input_fn.make_input_fn(info, False, parser)({'batch_size': batch})


def _train_to_target(trainer, evaluate, curve, steps):
  """Orbit's loop: train to each evaluation step, evaluate, stop at target."""
  for step in steps:
    trainer.train(tf.constant(step - int(trainer.global_step.numpy()),
                              tf.int32))
    with curve.evaluating():
      miou = time_to_miou.mean_iou(evaluate())
    tf.get_logger().info('Step %d: mean IoU %.4f (target %.4f).', step, miou,
                         curve.target)
    if curve.add(step, miou):
      return


def run(gin_files, gin_params, model_dir, target, eval_every_steps,
        max_steps=None, train_mean_iou=False):
  """Trains the Model Garden recipe until the target mean IoU; its result.

  Args:
    gin_files, gin_params: the experiment (data, classes, crop, batch and
      backbone come from it).
    model_dir: str, where params.yaml is written.
    target, eval_every_steps, max_steps: see `runner.run_time_to_miou`.
    train_mean_iou: bool, see `recipe_config`.

  Returns:
    dict: `time_to_miou.Curve.result` with the trainer and its recipe.
  """
  gin_config.parse(gin_files, gin_params, finalize=False)
  max_steps = max_steps or gin_config.binding('run.train_steps')
  steps = time_to_miou.evaluation_steps(eval_every_steps, max_steps)
  config, base = recipe_config(max_steps, eval_every_steps, train_mean_iou)
  info = dataset_info.DatasetInfo()
  previous_policy = tf.keras.mixed_precision.global_policy()
  # As official/vision/train.py: the policy is set before anything is built.
  performance.set_mixed_precision_policy(
      config.runtime.mixed_precision_dtype or 'float32')
  try:
    curve = time_to_miou.Curve(target)
    strategy, _, trainer = peer.build_trainer(config, model_dir)
    train_utils.serialize_config(config, model_dir)
    evaluator = time_to_miou.KerasEvaluator(trainer.model, info.num_classes,
                                            info.ignore_label)
    dataset = eval_dataset(config)
    with strategy.scope():
      _train_to_target(trainer, lambda: evaluator(dataset), curve, steps)
  finally:
    tf.keras.mixed_precision.set_global_policy(previous_policy)
  result = curve.result()
  result.update({
      'trainer': 'model_garden', 'recipe': base,
      'recipe_overrides': sorted(RECIPE_OVERRIDES),
      'optimizer_config': config.trainer.optimizer_config.as_dict(),
      'norm_momentum': config.task.model.norm_activation.norm_momentum,
      'eval_every_steps': eval_every_steps, 'max_steps': max_steps,
      'batch_size': config.task.train_data.global_batch_size,
      'crop_size': config.task.train_data.output_size,
      'precision': peer_config_lib.precision_name(config),
      'peak_rss_mb': measure.peak_rss_mb()})
  return result
