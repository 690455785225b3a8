"""Builds an experiment's estimator: dataset, parsers, input_fns, model_fn and estimator."""

import collections
import functools

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.data import crop_sampling
from official_seg.data import dataset_info
from official_seg.data import input_fn as input_lib
from official_seg.data import preprocess
from official_seg.runtime import cluster
from official_seg.runtime import components as components_lib
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.runtime import tpu_estimator
from official_seg.semi_supervised import views
from official_seg.training import updates

# What every mode needs of a built experiment: the estimator and its input
# functions; the dataset; the eval parser (serving preprocesses with it); the
# estimator that exports SavedModels; the TPUEstimator-contract model_fn
# and training input_fn that both estimators wrap (--dry_run builds them once:
# the training step's own input, the unlabeled stream included), with the
# model_fn's options and components; and the global batch sizes, for
# whoever reports or times them.
Built = collections.namedtuple('Built', [
    'estimator', 'train_input_fn', 'eval_input_fn', 'dataset', 'eval_parser',
    'serving_estimator', 'model_fn', 'options', 'components',
    'train_batch_size', 'eval_batch_size', 'step_input_fn'])


def per_replica_batch_size(global_batch_size, num_replicas, name):
  """Splits a global batch evenly over replicas.

  Args:
    global_batch_size: int, the experiment's batch size.
    num_replicas: int, replicas sharing it.
    name: str, the gin binding that set the batch size, for the message.

  Returns:
    int, the batch of one replica.

  Raises:
    ValueError: the replicas cannot split the batch evenly.
  """
  if global_batch_size % num_replicas:
    raise validation.ConfigurationError(
        f'{name}={global_batch_size} cannot be split evenly over '
        f'{num_replicas} replicas; use a multiple of {num_replicas}.')
  return global_batch_size // num_replicas


def num_replicas(run_config):
  """Replicas that share one training step's batch, or None if only a TPU knows.

  Asynchronous parameter-server workers each apply their own updates, so one
  step's batch belongs to one worker.
  """
  if getattr(run_config, 'cluster', None):  # A TPU RunConfig naming a TPU.
    return run_config.tpu_config.num_shards
  strategy = run_config.train_distribute
  return strategy.num_replicas_in_sync if strategy else 1


def _with_batch(input_fn, batch_size, default_context=None):
  """Adapts a TPUEstimator-contract input_fn to Estimator's fixed params."""
  def wrapped(params, input_context=None):
    return input_fn(dict(params, batch_size=batch_size),
                    input_context or default_context)
  return wrapped


def check_accumulation(steps, run_config):
  """Refuses gradient accumulation with parameter servers.

  Parameter servers would hold one set of sums for every worker.
  """
  if steps > 1 and run_config.num_ps_replicas:
    raise validation.ConfigurationError(
        f'UpdateOptions.accumulation_steps={steps} cannot be combined with '
        'parameter servers (gin/platforms/parameter_server.gin); use 1 there, '
        'or a synchronous platform.')


def _serving_estimator(model_fn, run_config):
  """A plain Estimator with the model_fn, for export.

  TPUEstimator's export adds a TPU graph, whose rewrite cannot pass the size
  features through; the SavedModel is for CPU and GPU serving, and an
  Estimator with the same model_fn restores the same checkpoint.
  """
  return tf.estimator.Estimator(model_fn_lib.estimator_model_fn(model_fn),
                                config=run_config, params={'use_tpu': False})


def make_parser(is_training, dataset, window_size=None, label_values=None):
  """The training or evaluation `Parser` of a dataset.

  Built inside the `train/` or `eval/` gin scope, so the two parsers take
  their own crop size and augmentation; the dataset's class count and
  ignore label are passed in, never bound in gin. The training parser gets
  the `CropSampling` of its scope.

  Args:
    is_training: bool.
    dataset: a `dataset_info.DatasetInfo`.
    window_size: None, or [height, width] of the windows evaluation runs
      (`InferenceOptions.window_size`).
    label_values: how many label values the labels may hold
      (`OutputKind.label_values`: the sigmoid kind's are bit masks); None
      is the dataset's classes.

  Returns:
    A `preprocess.Parser`.
  """
  with gin.config_scope('train' if is_training else 'eval'):
    sampling = crop_sampling.CropSampling() if is_training else None
    return preprocess.Parser(is_training, ignore_label=dataset.ignore_label,
                             num_classes=label_values or dataset.num_classes,
                             window_size=window_size, crop_sampling=sampling,
                             image_channels=dataset.image_channels,
                             image_bit_depth=dataset.image_bit_depth)


def serving_resize_range(model, dataset):
  """How an export's inputs are resized: its own record, else the gin files'.

  Args:
    model: a `predictor.Predictor`; exports written before the record have
      `resize_range` None.
    dataset: the `DatasetInfo` whose evaluation parser the gin files build.

  Returns:
    (min_resize_value, max_resize_value, resize_factor), each int or None.
  """
  return model.resize_range or make_parser(False, dataset).resize_range


@gin.configurable(denylist=['dataset', 'labeled_batch_size'])
def unlabeled_stream(dataset,
                     labeled_batch_size,
                     split=gin.REQUIRED,
                     batch_size=gin.REQUIRED,
                     cutmix_probability=0.0):
  """The unlabeled training stream of semi-supervised training.

  gin/semi_supervised/*.gin bind it: `split` to the macro UNLABELED_SPLIT,
  `batch_size` to UNLABELED_BATCH_SIZE; its parser is built in the
  `unlabeled/` gin scope.

  Args:
    dataset: the `DatasetInfo` (the shards' folder, classes, ignore label).
    labeled_batch_size: int, the global labeled batch.
    split: str, the split of unlabeled images (may be the labeled split's
      superset; its label maps, if any, only feed the monitors).
    batch_size: int, the global unlabeled batch, split over replicas like
      the labeled one.
    cutmix_probability: float in [0, 1], the share of strong views that get
      a box of another unlabeled image pasted in (`cutmix.cutmix`).

  Returns:
    A `views.UnlabeledStream`.

  Raises:
    validation.ConfigurationError: the images are not 8-bit RGB, which the
      strong view's colour jitter needs.
  """
  if (dataset.image_channels, dataset.image_bit_depth) != (3, 8):
    raise validation.ConfigurationError(
        f'Semi-supervised training reads 8-bit RGB images (its colour '
        f'jitter); this dataset has IMAGE_CHANNELS = {dataset.image_channels}'
        f' and IMAGE_BIT_DEPTH = {dataset.image_bit_depth}.')
  with gin.config_scope('unlabeled'):
    parser = views.UnlabeledParser(dataset.ignore_label, dataset.num_classes)
  return views.UnlabeledStream(split, batch_size, parser, cutmix_probability,
                               labeled_batch_size)


def check_output_kind(options, components):
  """What the sigmoid output kind cannot be combined with.

  Raises:
    validation.ConfigurationError: semi-supervised training, whose pseudo
      labels are one class per pixel.
  """
  if options.semi_supervised and components.inference.output.sigmoid:
    raise validation.ConfigurationError(
        "OutputKind.kind = 'sigmoid' cannot train semi-supervised (its "
        'pseudo labels are one class per pixel); leave out '
        'gin/semi_supervised/ or the sigmoid head.')


@gin.configurable(denylist=['run_config'])
@validation.checked(train_batch_size=validation.POSITIVE_WHOLE,
                    eval_batch_size=validation.POSITIVE_WHOLE)
def build_estimator(run_config,
                    train_batch_size=gin.REQUIRED,
                    eval_batch_size=gin.REQUIRED):
  """Builds the estimator, its input_fns and what export needs.

  Batch sizes are global, the examples of one training step: a strategy's
  replicas (or a TPU's cores) each get an equal share, an asynchronous
  parameter-server worker takes the whole batch for each of its steps, and
  the learning rate is never rescaled. A TPU run config (USE_TPU_ESTIMATOR)
  gets a TPUEstimator, which runs on a TPU when the run config names one
  (--tpu), else on the CPU.

  This is the composition root: the dataset, the model_fn's options and its
  `Components` (model builder, loss, optimizer, learning rate, inference
  options) are built here, once, and handed to everything below.

  Args:
    run_config: from `run_config.build_run_config`.
    train_batch_size: int, global training batch (TRAIN_BATCH_SIZE).
    eval_batch_size: int, global evaluation batch (EVAL_BATCH_SIZE).

  Returns:
    A `Built`.

  Raises:
    ValueError: a batch size that the replicas cannot split, a TPU named
      without the TPU platform, or float16 or gradient accumulation where
      they do not run.
  """
  dataset = dataset_info.DatasetInfo()
  options = model_fn_lib.ModelFnOptions()
  components = components_lib.Components()
  check_output_kind(options, components)
  model_fn = model_fn_lib.make_model_fn(dataset, options, components)
  values = components.inference.output.label_values(dataset.num_classes)
  eval_parser = make_parser(False, dataset, components.inference.window_size,
                            values)
  unlabeled = (unlabeled_stream(dataset, train_batch_size)
               if options.semi_supervised else None)
  train_fn = input_lib.make_input_fn(
      dataset, True, make_parser(True, dataset, label_values=values),
      unlabeled=unlabeled)
  eval_fn = input_lib.make_input_fn(dataset, False, eval_parser)
  replicas = num_replicas(run_config)
  built = functools.partial(
      Built, dataset=dataset, eval_parser=eval_parser, model_fn=model_fn,
      options=options, components=components,
      train_batch_size=train_batch_size, eval_batch_size=eval_batch_size,
      step_input_fn=train_fn)
  if isinstance(run_config, tpu_estimator.tpu.RunConfig):
    updates.check_platform(components.updates, options.precision, tpu=True,
                           on_tpu=run_config.cluster is not None)
    if replicas:  # On a TPU, known only when num_shards is bound.
      per_replica_batch_size(train_batch_size, replicas,
                             'build_estimator.train_batch_size')
      per_replica_batch_size(eval_batch_size, replicas,
                             'build_estimator.eval_batch_size')
    estimator, tpu_train_fn, tpu_eval_fn = tpu_estimator.build(
        model_fn, run_config, train_fn, eval_fn, train_batch_size,
        eval_batch_size)
    return built(estimator=estimator, train_input_fn=tpu_train_fn,
                 eval_input_fn=tpu_eval_fn,
                 serving_estimator=_serving_estimator(model_fn, run_config))
  check_accumulation(components.updates.accumulation_steps, run_config)
  train_batch = per_replica_batch_size(train_batch_size, replicas,
                                       'build_estimator.train_batch_size')
  if unlabeled:  # Fails before any work when the replicas cannot split it.
    unlabeled.per_call_batch_size(train_batch)
  estimator = tf.estimator.Estimator(
      model_fn=model_fn_lib.estimator_model_fn(model_fn), config=run_config,
      params={'use_tpu': False})
  return built(
      estimator=estimator,
      train_input_fn=_with_batch(
          train_fn, train_batch,
          cluster.parameter_server_input_context(run_config)),
      eval_input_fn=_with_batch(eval_fn, eval_batch_size),
      serving_estimator=estimator)
