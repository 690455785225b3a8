"""Training summaries, registered explicitly and written through one host_call."""

import dataclasses
from typing import Any, Callable, Dict, Optional, Sequence

import gin
import tensorflow as tf

from official_seg.data import palettes
from official_seg.training import optimizers

# Pictures of the batch in TensorBoard's images dashboard: the input, its
# label and the prediction, one tag each.
PICTURES_PREFIX = 'pictures/'


@dataclasses.dataclass
class Registered:
  """What a training step hands to `host_call`.

  Attributes:
    scalars: dict of summary name to scalar tensor.
    pictures: dict of tag to uint8 [N, h, w, 3] tensor, a few small pictures
      (from `palettes.pictures`).
    examples: optional int scalar tensor, the step's examples as seen from
      here: a TPU shard's own (the host_call sums them over shards), or a
      whole strategy's (only its first replica runs the host_call); gives
      'examples_per_second'.
    variables: the trainable variables, for the optional histograms.
    host_checks: callables run on the host every step with (dict of scalar
      name to value, step, whether this step writes its scalars), under
      the summary writer; each returns an op (e.g.
      `semi_supervised.host_checks.SemiSupervisedWarnings`).
    applied: optional bool scalar tensor, whether the step updated the
      weights (`optimizers.train_op`); a run that did not (a float16 step
      skipped, a micro-batch of an accumulation) writes nothing, so each
      global step is written once.
    sampled_scalars: optional callable returning a dict of summary name to
      scalar tensor, built in a `tf.cond` that runs it only on the steps
      that write scalars: monitors no host check reads, whose cost is then
      paid once every `every_n_steps`.
  """

  scalars: Dict[str, tf.Tensor]
  pictures: Dict[str, tf.Tensor] = dataclasses.field(default_factory=dict)
  examples: Optional[tf.Tensor] = None
  variables: Sequence[tf.Variable] = ()
  host_checks: Sequence[Any] = ()
  applied: Optional[tf.Tensor] = None
  sampled_scalars: Optional[Callable[[], Dict[str, tf.Tensor]]] = None


def sampled(due, build):
  """build()'s scalars where `due`, zeros elsewhere; built once, in a cond.

  Args:
    due: bool scalar tensor.
    build: callable returning a dict of name to scalar tensor.

  Returns:
    dict of the same names to float32 scalars.
  """
  names = []

  def compute():
    values = build()
    names.extend(sorted(values))
    return [tf.cast(values[name], tf.float32) for name in names]

  # tf.cond builds the true branch first, so `names` is known here.
  outputs = tf.cond(due, compute,
                    lambda: [tf.zeros([], tf.float32) for _ in names])
  return dict(zip(names, outputs))


def learning_rates(learning_rate, multipliers):
  """The learning rate of each group of `gradient_multipliers`, by factor.

  Args:
    learning_rate: scalar float tensor, the schedule's rate.
    multipliers: dict of variable name to gradient factor
      (`optimizers.gradient_multipliers`).

  Returns:
    dict of 'learning_rate/x<factor>' to scalar tensor, one per factor other
    than 1; empty when no multiplier is set.
  """
  factors = sorted(set(multipliers.values()))
  return {f'learning_rate/x{factor:g}': learning_rate * factor
          for factor in factors}


def labelled_share(labels, ignore_label):
  """The share of the batch's pixels that are not the ignore label; float32."""
  return tf.reduce_mean(tf.cast(tf.not_equal(labels, ignore_label),
                                tf.float32))


def train_pictures(images, labels, logits, dataset, max_images=3):
  """The first `max_images` inputs, labels and predictions, coloured.

  Args:
    images: float [B, H, W, 3], the model's input.
    labels: int [B, H, W, 1].
    logits: float [B, h, w, C], at any resolution; resized to the labels'.
    dataset: the `DatasetInfo` (palette, ignore label).
    max_images: int.

  Returns:
    dict of 'pictures/image', 'pictures/label' and 'pictures/prediction' to
    uint8 [N, H', W', 3].
  """
  logits = tf.cast(logits[:max_images], tf.float32)
  logits = tf.image.resize(logits, tf.shape(labels)[1:3])
  predictions = tf.argmax(logits, axis=-1, output_type=tf.int32)
  colours = palettes.label_colours(dataset.palette, dataset.ignore_label)
  pictures = palettes.pictures(images, labels, predictions, colours,
                               max_images)
  return {PICTURES_PREFIX + tag: value for tag, value in pictures.items()}


def _flatten(global_step, registered, histograms, every_n_steps):
  """The host_call's tensors, each with a leading dimension for outfeed."""
  tensors = {'step': tf.reshape(global_step, [1])}
  scalars = dict(registered.scalars)
  if registered.sampled_scalars:
    # The step the host_fn receives, so that both agree on the steps due.
    due = tf.equal(tensors['step'][0] % every_n_steps, 0)
    scalars.update(sampled(due, registered.sampled_scalars))
  for name, value in scalars.items():
    tensors['scalar:' + name] = tf.reshape(tf.cast(value, tf.float32), [1])
  for name, value in registered.pictures.items():
    tensors['picture:' + name] = value
  if registered.applied is not None:
    tensors['applied'] = tf.reshape(registered.applied, [1])
  if registered.examples is not None:
    tensors['examples'] = tf.reshape(tf.cast(registered.examples, tf.float32),
                                     [1])
  if histograms:
    for variable in registered.variables:
      tensors['histogram:' + optimizers.variable_name(variable)] = (
          tf.expand_dims(tf.convert_to_tensor(variable), 0))
  return tensors


def host_state(name, value):
  """A local variable of the host_call (reinitialised by every session).

  For state kept across steps on the host: the host_call's own rates and
  `Registered.host_checks`. Local, so checkpoints never hold it.
  """
  return tf.compat.v1.Variable(
      value, trainable=False, name=name,
      collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])


def _examples_per_second(step, examples, record):
  """Writes examples per second since the previous recorded step.

  Written by hand: TPUEstimator's ExamplesPerSecondHook writes its own event
  file, on TPUs only and outside the host_call.
  """
  last_time = host_state('summaries_last_time', tf.constant(0.0, tf.float64))
  last_step = host_state('summaries_last_step', tf.constant(-1, tf.int64))
  now = tf.timestamp()
  rate = tf.math.divide_no_nan(
      tf.cast(step - last_step, tf.float32) * examples,
      tf.cast(now - last_time, tf.float32))
  valid = tf.greater_equal(last_step, 0)

  def update():
    with tf.control_dependencies([rate, valid]):
      return tf.group(last_time.assign(now), last_step.assign(step))

  with tf.control_dependencies([tf.cond(record, update, tf.no_op)]):
    with tf.summary.record_if(tf.logical_and(record, valid)):
      tf.summary.scalar('examples_per_second', rate, step=step)


@gin.configurable(denylist=['model_dir', 'global_step', 'registered'])
def host_call(model_dir, global_step, registered, every_n_steps=50,
              image_summary_steps=1000, variable_histograms=False):
  """Builds the (fn, tensors) pair of a TPUEstimatorSpec `host_call`.

  The same pair serves TPU (the fn runs on the host, fed by outfeed) and
  CPU/GPU (`TPUEstimatorSpec.as_estimator_spec` runs it after each step), so
  summaries take one path everywhere. On a TPU each tensor arrives
  concatenated over the shards: scalars and pictures are shard 0's, the
  examples the sum.

  Args:
    model_dir: str, where the TensorBoard events go.
    global_step: int64 scalar tensor.
    registered: a `Registered`, or a dict of summary name to scalar tensor.
    every_n_steps: int, write the scalars (and histograms) every this many
      steps.
    image_summary_steps: int, write the pictures every this many steps; 0
      writes none.
    variable_histograms: bool, also write a histogram of every trainable
      variable every `every_n_steps` (they travel through outfeed on TPUs).

  Returns:
    (host_fn, tensors) for `TPUEstimatorSpec(host_call=...)`.
  """
  if not isinstance(registered, Registered):
    registered = Registered(scalars=registered)
  if not image_summary_steps:
    registered = dataclasses.replace(registered, pictures={})
  tensors = _flatten(global_step, registered, variable_histograms,
                     every_n_steps)
  names = sorted(tensors)

  def host_fn(*values):
    values = dict(zip(names, values))
    step = values['step'][0]
    writer = tf.summary.create_file_writer(model_dir, max_queue=every_n_steps)
    with writer.as_default():
      record = _due(values, step, every_n_steps)
      _write_every_n(values, step, record)
      checks = _run_checks(registered.host_checks, values, step, record)
      if image_summary_steps:
        with tf.summary.record_if(_due(values, step, image_summary_steps)):
          for name, value in values.items():
            if name.startswith('picture:'):
              count = (value.shape[0] or 3) // _shards(values)
              tf.summary.image(name[len('picture:'):], value[:count],
                               step=step, max_outputs=count)
      return tf.compat.v1.summary.all_v2_summary_ops() + checks

  return host_fn, [tensors[name] for name in names]


def _due(values, step, every):
  """Whether this run writes what is written every `every` steps."""
  due = tf.equal(step % every, 0)
  if 'applied' in values:
    due = tf.logical_and(due, values['applied'][0])
  return due


def _run_checks(checks, values, step, record):
  """The ops of `Registered.host_checks` on shard 0's scalars."""
  scalars = {name[len('scalar:'):]: value[0]
             for name, value in values.items() if name.startswith('scalar:')}
  return [check(scalars, step, record) for check in checks]


def _shards(values):
  """TPU shards whose tensors were concatenated: the step's leading size."""
  return values['step'].shape[0] or 1


def _write_every_n(values, step, record):
  """The scalars, histograms and examples per second of `host_call`, on the
  steps where `record` (every `every_n_steps`) holds."""
  with tf.summary.record_if(record):
    for name, value in values.items():
      if name.startswith('scalar:'):
        tf.summary.scalar(name[len('scalar:'):], value[0], step=step)
      elif name.startswith('histogram:'):
        tf.summary.histogram(name[len('histogram:'):], value[0], step=step)
  if 'examples' in values:
    _examples_per_second(step, tf.reduce_sum(values['examples']), record)
