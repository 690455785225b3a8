"""model_fn for Estimator and TPUEstimator: glues model, loss, optimizer and metrics."""

import collections
import contextlib
import functools

import gin
import tensorflow as tf

from official_seg.evaluation import metrics
from official_seg.export import signatures
from official_seg.modeling import inference
from official_seg.modeling import losses
from official_seg.modeling import model as model_lib
from official_seg.training import optimizers
from official_seg.training import schedules
from official_seg.training import summaries
from official_seg.training import warm_start

ModeKeys = tf.estimator.ModeKeys
TPUEstimatorSpec = tf.compat.v1.estimator.tpu.TPUEstimatorSpec


def _predict_spec(model, logits, features):
  probabilities = inference.predict_probabilities(model, features['image'],
                                                  base_logits=logits)
  predictions = {
      'semantic': tf.argmax(probabilities, axis=-1, output_type=tf.int32),
      'probabilities': probabilities,
      'height': features['height'],
      'width': features['width'],
  }
  # Export and predict restore the checkpoint's variables as they are; were
  # moving averages kept, a scaffold_fn here would restore those instead.
  return TPUEstimatorSpec(
      ModeKeys.PREDICT, predictions=predictions,
      export_outputs=signatures.export_outputs(predictions, logits, features))


def _eval_spec(model, logits, features, labels, loss, task):
  probabilities = inference.predict_probabilities(model, features['image'],
                                                  base_logits=logits)
  predictions = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
  confusion = metrics.confusion_matrices(labels, predictions, task.num_classes,
                                         task.ignore_label)
  metric_fn = functools.partial(metrics.metric_fn,
                                class_names=task.class_names)
  return TPUEstimatorSpec(
      ModeKeys.EVAL, loss=loss,
      eval_metrics=(metric_fn, {'confusion': confusion,
                                'valid': features['valid']}))


def _train_spec(model, images, loss, seg_loss, params, model_dir):
  warm_start.check_resume_compatible(model, model_dir)
  global_step = tf.compat.v1.train.get_or_create_global_step()
  learning_rate = schedules.learning_rate(global_step)
  optimizer = optimizers.make_optimizer(learning_rate,
                                         use_tpu=params.get('use_tpu', False))
  # Keras layers built in a graph keep their batch-norm updates per input.
  update_ops = model.get_updates_for(images) + model.get_updates_for(None)
  train_op = optimizers.train_op(optimizer, loss, model.trainable_variables,
                                 update_ops)
  host_call = summaries.host_call(
      model_dir, global_step,
      {'loss/total': loss, 'loss/segmentation': seg_loss,
       'learning_rate': learning_rate})
  return TPUEstimatorSpec(ModeKeys.TRAIN, loss=loss, train_op=train_op,
                          host_call=host_call,
                          scaffold_fn=warm_start.warm_start(model, model_dir))


@gin.configurable
def xla_scope(jit_compile=False):
  """The scope the model and loss are built in: XLA-compiled, or plain.

  `jit_scope` rather than `tf.function(jit_compile=True)`: the model_fn
  builds a graph for Estimator, and ops marked in the scope are compiled
  together with their gradients. On CPUs XLA is slower than TensorFlow's
  oneDNN kernels (docs/performance.md has the figures); it is meant for GPUs.

  Args:
    jit_compile: bool, compile the forward pass, loss and gradients with XLA.

  Returns:
    A context manager.
  """
  if not jit_compile:
    return contextlib.nullcontext()
  return tf.xla.experimental.jit_scope(compile_ops=True,
                                       separate_compiled_gradients=False)


Task = collections.namedtuple('Task', 'num_classes class_names ignore_label')


@gin.configurable
def segmentation_task(num_classes=gin.REQUIRED, class_names=gin.REQUIRED,
                      ignore_label=gin.REQUIRED):
  """The dataset facts the model_fn needs, from the dataset's gin macros.

  Args:
    num_classes: int (NUM_CLASSES).
    class_names: list of `num_classes` names (CLASS_NAMES).
    ignore_label: int (IGNORE_LABEL).

  Returns:
    A `Task`.

  Raises:
    ValueError: CLASS_NAMES and NUM_CLASSES disagree.
  """
  if len(class_names) != num_classes:
    raise ValueError(
        f'CLASS_NAMES has {len(class_names)} names but NUM_CLASSES is '
        f'{num_classes}; set both in the dataset gin file.')
  return Task(num_classes, list(class_names), ignore_label)


def model_fn(features, labels, mode, params, config):
  """The TPUEstimator model_fn; run_config.estimator_model_fn adapts it.

  Args:
    features: dict with 'image' float32 [B, H, W, 3], 'height' and 'width'
      int32 [B], and 'valid' float32 [B] (0 marks batch padding).
    labels: int32 [B, H, W, 1], or None in PREDICT.
    mode: a `tf.estimator.ModeKeys`.
    params: dict; 'use_tpu' says whether this runs on a real TPU.
    config: the run config; its `model_dir` receives summaries.

  Returns:
    A `TPUEstimatorSpec`.
  """
  task = segmentation_task()
  model = model_lib.build_model(num_classes=task.num_classes)
  images = features['image']
  training = optimizers.model_training_flag(mode == ModeKeys.TRAIN)
  with xla_scope():
    logits = model(images, training=training)['logits']
  if mode == ModeKeys.PREDICT:
    return _predict_spec(model, logits, features)
  with xla_scope():
    loss, seg_loss = losses.total_loss(model, logits, labels)
  if mode == ModeKeys.EVAL:
    return _eval_spec(model, logits, features, labels, seg_loss, task)
  return _train_spec(model, images, loss, seg_loss, params, config.model_dir)

