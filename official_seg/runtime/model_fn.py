"""The model_fn: glues model, loss, optimizer, metrics and exports; its two adapters."""

import contextlib
import dataclasses
from typing import Optional, Sequence

import gin
import tensorflow as tf

from official_seg import validation
from official_seg.evaluation import boundary
from official_seg.evaluation import eval_metrics
from official_seg.export import signatures
from official_seg.modeling import inference
from official_seg.modeling import losses
from official_seg.modeling import quantized
from official_seg.runtime import dtype_policy
from official_seg.runtime import tpu_estimator
from official_seg.semi_supervised import step as semi_lib
from official_seg.training import averaging
from official_seg.training import optimizers
from official_seg.training import step as step_lib
from official_seg.training import summaries
from official_seg.training import updates
from official_seg.training import warm_start

ModeKeys = tf.estimator.ModeKeys
TPUEstimatorSpec = tpu_estimator.tpu.TPUEstimatorSpec
PRECISIONS = ('float32', 'mixed_bfloat16', 'mixed_float16')


@gin.configurable
@validation.checked(boundary_tolerance=validation.POSITIVE_WHOLE)
@dataclasses.dataclass(frozen=True)
class ModelFnOptions:
  """How the model_fn builds its graph; built once and handed to `make_model_fn`.

  Attributes:
    fine_tune_batch_norm: bool (macro FINE_TUNE_BATCH_NORM). DeepLab's
      `fine_tune_batch_norm=False`, for batches too small for good
      statistics, runs the whole model in inference mode while training:
      batch norm normalises with its moving statistics and never updates
      them; gamma, beta and all other variables still train. Keras has one
      `training` flag per call, so this differs from DeepLab only for dropout
      and stochastic depth, which the shipped gin files leave off.
    precision: the Keras dtype policy of the model: 'float32',
      'mixed_bfloat16' (activations in bfloat16 on TPUs and on CPUs with
      AMX or AVX512_BF16; variables, loss and metrics in float32; no loss
      scaling needed), or 'mixed_float16' (for GPUs: activations in
      float16, the rest in float32, with a dynamic loss scale that skips
      steps whose gradients overflow; `updates.UpdateOptions`).
    jit_compile: bool, compile the forward pass, loss and gradients with XLA
      (a `jit_scope`, as Estimator builds a graph). For GPUs: on CPUs it is
      slower than oneDNN (docs/performance.md).
    moving_average_decay: float in (0, 1) or None (off). Training keeps
      exponential moving averages of the trainable variables; evaluation,
      prediction and export restore them in place of the raw weights
      (training/averaging.py). DeepLab-style runs use 0.9999.
    quantize_delay_step: int or None (float). 0 trains, evaluates and
      exports Model Garden's quantization-aware model (fake quantization,
      modeling/quantized.py), started from a float INIT_CHECKPOINT
      (gin/deployment/qat.gin). DeepLab's delay (float steps first) is
      not available: train float, then fine-tune from that checkpoint.
    semi_supervised: a `semi_supervised.SemiSupervisedOptions`, or None
      (supervised). Set by gin/semi_supervised/*.gin, with the unlabeled
      stream's split and batch; evaluation and export are unchanged.
    last_layers: list of regular expressions over variable names (macro
      LAST_LAYERS): DeepLab's last layers, which the gradient multipliers
      scale (`gradient_multipliers`) and the warm start leaves freshly
      initialised with INITIALIZE_LAST_LAYER = False.
    boundary_tolerance: int >= 1, pixels: evaluation's Boundary IoU counts
      the pixels of each region at most this far (Chebyshev distance) from
      its contour (`evaluation/boundary.py`, docs/evaluation.md).
  """

  fine_tune_batch_norm: bool = True
  precision: str = 'float32'
  jit_compile: bool = False
  moving_average_decay: Optional[float] = None
  quantize_delay_step: Optional[int] = None
  semi_supervised: Optional[semi_lib.SemiSupervisedOptions] = None
  last_layers: Sequence[str] = ()
  boundary_tolerance: int = boundary.DEFAULT_TOLERANCE

  def __post_init__(self):
    validation.check(ModelFnOptions,
                     boundary_tolerance=self.boundary_tolerance)
    if self.precision not in PRECISIONS:
      raise validation.ConfigurationError(
          f'ModelFnOptions.precision={self.precision!r} is not '
          f'one of {PRECISIONS}.')
    averaging.check_decay(self.moving_average_decay)
    _check_quantization(self)


def _check_quantization(options):
  """What quantization-aware training cannot be combined with."""
  delay = options.quantize_delay_step
  if delay is None:
    return
  if delay != 0:
    raise validation.ConfigurationError(
        f'ModelFnOptions.quantize_delay_step={delay!r}: only 0 (quantize '
        'from the first step) or None; for a delay, train float, then '
        'fine-tune with quantization from INIT_CHECKPOINT '
        '(docs/deployment.md).')
  if options.precision != 'float32' or options.semi_supervised:
    raise validation.ConfigurationError(
        'ModelFnOptions.quantize_delay_step=0 needs ModelFnOptions.precision'
        " = 'float32' and ModelFnOptions.semi_supervised = None.")


def _xla_scope(jit_compile):
  if not jit_compile:
    return contextlib.nullcontext()
  return tf.xla.experimental.jit_scope(compile_ops=True,
                                       separate_compiled_gradients=False)


def _predict_spec(model, probabilities, logits, features, dataset, options,
                  output):
  semantic, masks = output.predict(probabilities, dataset.num_classes)
  predictions = {
      'semantic': semantic,
      'probabilities': probabilities,
      'height': features['height'],
      'width': features['width'],
  }
  if masks is not None:
    predictions['masks'] = masks
  return TPUEstimatorSpec(
      ModeKeys.PREDICT, predictions=predictions,
      export_outputs=signatures.export_outputs(predictions, logits, features),
      scaffold_fn=averaging.restore_scaffold_fn(
          model.trainable_variables, options.moving_average_decay))


def _eval_spec(model, probabilities, features, labels, loss, dataset,
               options, output):
  predictions, masks = output.predict(probabilities, dataset.num_classes)
  return TPUEstimatorSpec(
      ModeKeys.EVAL, loss=loss,
      eval_metrics=eval_metrics.eval_metrics(features, labels, predictions,
                                             dataset,
                                             options.boundary_tolerance,
                                             probabilities, masks),
      scaffold_fn=averaging.restore_scaffold_fn(
          model.trainable_variables, options.moving_average_decay))


def _registered(scalars, model, features, labels, logits, dataset, params,
                micro_batches):
  """The summaries of a training step (see `summaries.Registered`)."""
  images = features['image']
  examples = tf.shape(images)[0] * micro_batches
  context = tf.distribute.get_replica_context()
  if not params.get('use_tpu') and context:
    # Only the first replica of a strategy runs the host_call.
    examples *= context.num_replicas_in_sync
  scalars['labelled_pixels'] = summaries.labelled_share(labels,
                                                        dataset.ignore_label)
  return summaries.Registered(
      scalars=scalars, examples=examples,
      pictures=summaries.train_pictures(images, labels, logits, dataset),
      variables=model.trainable_variables)


def _supervised_step(model, images, labels, training, dataset, options,
                     loss):
  """The supervised step, in the form of a `step.Step`."""
  with _xla_scope(options.jit_compile):
    logits = model(images, training=training)['logits']
    seg_loss = loss(logits, labels, dataset.ignore_label)
  return step_lib.Step(
      logits=logits, losses={'segmentation': seg_loss},
      # Keras layers built in a graph keep their batch-norm updates per input.
      update_ops=model.get_updates_for(images) + model.get_updates_for(None),
      scalars={}, pictures={})


def _train_spec(model, features, labels, step, params, config, dataset,
                options, components):
  """The TRAIN spec of a step (a `step.Step`)."""
  model_dir = config.model_dir
  warm_start.check_resume_compatible(model, model_dir)
  decay = options.moving_average_decay
  averaging.check_checkpoint(model_dir, model.trainable_variables, decay)
  global_step = tf.compat.v1.train.get_or_create_global_step()
  learning_rate = components.learning_rate(global_step)
  use_tpu = params.get('use_tpu', False)
  optimizer = components.optimizer(learning_rate, use_tpu=use_tpu)
  update = updates.build_update(components.updates, options.precision,
                               use_tpu)
  updates.check_checkpoint(model_dir, update.loss_scale)
  loss = tf.add_n(list(step.losses.values())) + losses.regularization_loss(
      [model])
  scalars = {'loss/total': loss, 'learning_rate': learning_rate}
  scalars.update({f'loss/{name}': value
                  for name, value in step.losses.items()})
  scalars.update(step.scalars)
  variables = optimizers.trainable_variables(model.trainable_variables)
  multipliers = optimizers.gradient_multipliers(
      variables, last_layers=options.last_layers)
  scalars.update(summaries.learning_rates(learning_rate, multipliers))
  if update.loss_scale:
    scalars['loss_scale'] = update.loss_scale()
  train_op, applied = optimizers.train_op(
      optimizer, loss, variables, step.update_ops, multipliers,
      optimizers.clip_gradients, scalars, update)
  train_op = averaging.apply_after(train_op, model.trainable_variables, decay,
                                   applied)
  registered = _registered(scalars, model, features, labels, step.logits,
                           dataset, params, update.accumulation_steps)
  registered.applied = applied
  registered.pictures.update(step.pictures)
  registered.host_checks = list(step.host_checks)
  registered.sampled_scalars = step.sampled_scalars
  host_call = summaries.host_call(model_dir, global_step, registered)
  return TPUEstimatorSpec(ModeKeys.TRAIN, loss=loss, train_op=train_op,
                          host_call=host_call,
                          scaffold_fn=warm_start.warm_start(
                              model, model_dir,
                              last_layers=options.last_layers))


def _cam_attention_dim(options, mode):
  """PseudoSeg's branch is part of the model in training, when fused."""
  fusion = options.semi_supervised and options.semi_supervised.cam_fusion
  return fusion.attention_dim if fusion and mode == ModeKeys.TRAIN else None


def _build_model(dataset, options, components, mode, images):
  """The float model, or with quantization the quantization-aware one."""
  if options.quantize_delay_step is None:
    return components.model(
        num_classes=dataset.num_classes,
        cam_attention_dim=_cam_attention_dim(options, mode),
        input_channels=dataset.image_channels)
  return quantized.build_quantized_model(components.model,
                                         dataset.num_classes,
                                         images.shape[1:3].as_list())


def _build_spec(dataset, options, components, features, labels, mode, params,
                config):
  """The spec of one mode; see `make_model_fn`."""
  images = features['image']
  model = _build_model(dataset, options, components, mode, images)
  if mode == ModeKeys.TRAIN:
    training = options.fine_tune_batch_norm
    if options.semi_supervised:
      with _xla_scope(options.jit_compile):
        step = semi_lib.build_step(
            model, features, labels, training, dataset,
            options.semi_supervised,
            tf.compat.v1.train.get_or_create_global_step(),
            components.labeled_loss)
    else:
      step = _supervised_step(model, images, labels, training, dataset,
                              options, components.labeled_loss)
    return _train_spec(model, features, labels, step, params, config,
                       dataset, options, components)
  # One path for evaluation, prediction and every export: with
  # windows the model sees windows, never the whole image, and the logits
  # are those of the blended windows.
  with _xla_scope(options.jit_compile):
    probabilities, logits = inference.predict_probabilities(
        model, images, components.inference, with_logits=True)
  if mode == ModeKeys.PREDICT:
    return _predict_spec(model, probabilities, logits, features, dataset,
                         options, components.inference.output)
  with _xla_scope(options.jit_compile):
    seg_loss = components.loss(logits, labels, dataset.ignore_label)
  return _eval_spec(model, probabilities, features, labels, seg_loss,
                    dataset, options, components.inference.output)


def make_model_fn(dataset, options, components):
  """The TPUEstimator-contract model_fn of a dataset.

  TPUEstimator calls it as it is; `estimator_model_fn` adapts it to
  Estimator. Both build the model in `options.precision` and, on a TPU with
  more than one shard, inside the cross-shard replica context that makes
  synchronised batch norm sum its statistics over shards.

  Args:
    dataset: a `dataset_info.DatasetInfo`.
    options: a `ModelFnOptions`.
    components: a `components.Components`: the model builder, loss,
      optimizer, learning rate and inference options.

  Returns:
    model_fn(features, labels, mode, params, config) -> `TPUEstimatorSpec`:
    features is a dict with 'image' float32 [B, H, W, 3], 'height' and
    'width' int32 [B] and 'valid' float32 [B] (0 marks batch padding);
    labels int32 [B, H, W, 1] or None in PREDICT; params['use_tpu'] says
    whether this runs on a real TPU; config.model_dir receives summaries.
  """
  def model_fn(features, labels, mode, params, config):
    if config.tf_random_seed is not None:
      # Keras draws the seeds of unseeded initializers from Python's random
      # module, not from the graph seed: seeding it too makes the initial
      # weights those of the seed (build_run_config.tf_random_seed).
      tf.keras.utils.set_random_seed(config.tf_random_seed)
    with dtype_policy.keras_policy(options.precision), (
        tpu_estimator.cross_shard_context(mode, params)):
      return _build_spec(dataset, options, components, features, labels, mode,
                         params, config)

  return model_fn


def estimator_model_fn(model_fn):
  """Adapts a `make_model_fn` model_fn to `tf.estimator.Estimator`.

  Autograph must not convert it: a strategy runs the model_fn through
  autograph, which mistakes gin's configurable wrappers (they share one code
  object) for one another. Summaries are written by the chief only; other
  workers would each write a copy. Every replica of the chief keeps its
  host_call: Estimator regroups the replicas' specs, which needs the same
  hooks from each, and then runs only the first replica's hooks.

  Args:
    model_fn: from `make_model_fn`.

  Returns:
    model_fn(features, labels, mode, params, config) -> `EstimatorSpec`.
  """
  unconverted = tf.autograph.experimental.do_not_convert(model_fn)

  def adapted(features, labels, mode, params, config):
    spec = unconverted(features, labels, mode, params, config)
    if not config.is_chief:
      spec = spec._replace(host_call=None)
    return spec.as_estimator_spec()

  return adapted
