"""Where a training step's time goes: op time by op type, from a traced step."""

import collections

import tensorflow as tf

from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import model_fn as model_fn_lib
from official_seg.runtime import run_config as run_config_lib


def op_type(node_stats):
  """The op type of a traced node: 'name = Type(inputs)' gives 'Type'."""
  label = node_stats.timeline_label
  if ' = ' in label:
    return label.split(' = ', 1)[1].split('(', 1)[0]
  return node_stats.node_name


def op_seconds(run_metadatas):
  """Seconds spent in each op type, averaged over traced steps.

  Args:
    run_metadatas: list of `RunMetadata` of steps run with FULL_TRACE.

  Returns:
    `collections.Counter` of op type to seconds per step; ops that run
    at the same time each count in full, so the sum can exceed the step.
  """
  totals = collections.Counter()
  for metadata in run_metadatas:
    for device in metadata.step_stats.dev_stats:
      for node in device.node_stats:
        totals[op_type(node)] += node.all_end_rel_micros / 1e6
  for key in totals:
    totals[key] /= max(len(run_metadatas), 1)
  return totals


def train_spec(batch_size, model_dir):
  """Builds the training step of the parsed gin experiment in this graph.

  Args:
    batch_size: int.
    model_dir: str, where the step's summaries would go.

  Returns:
    (the Estimator's `EstimatorSpec` of the step, fed by the experiment's
    training input pipeline (with the unlabeled stream in semi-supervised
    training), with its host_call hook; the run config's session config,
    or None).
  """
  config = run_config_lib.build_run_config(model_dir)
  built = estimator_lib.build_estimator(config)
  params = {'batch_size': batch_size, 'use_tpu': False}
  features, labels = tf.compat.v1.data.make_one_shot_iterator(
      built.step_input_fn(params)).get_next()
  # The Estimator's own model_fn: the same dtype policy and step as training.
  model_fn = model_fn_lib.estimator_model_fn(built.model_fn)
  spec = model_fn(features, labels, tf.estimator.ModeKeys.TRAIN, params,
                  config)
  return spec, config.session_config


class Step:
  """A training step as the Estimator runs it: the train op and its hooks'
  fetches (the host_call's summaries and warnings run every step)."""

  def __init__(self, spec):
    self._hooks = list(spec.training_hooks)
    for hook in self._hooks:
      hook.begin()
    self.fetches = [spec.train_op] + [
        hook.before_run(None).fetches for hook in self._hooks]

  def start(self, session):
    """Runs the hooks' session setup (the summary writer's initializer)."""
    for hook in self._hooks:
      hook.after_create_session(session, None)


def train_op(batch_size, model_dir):
  """(`Step` of `train_spec`, session config)."""
  spec, session_config = train_spec(batch_size, model_dir)
  return Step(spec), session_config


def profile(batch_size, model_dir, warmup_steps=3, traced_steps=2):
  """Runs the step `warmup_steps` times, then traces `traced_steps` steps.

  Returns:
    `op_seconds` of the traced steps.
  """
  with tf.Graph().as_default():
    step, session_config = train_op(batch_size, model_dir)
    options = tf.compat.v1.RunOptions(
        trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    metadatas = []
    with tf.compat.v1.Session(config=session_config) as session:
      session.run([tf.compat.v1.global_variables_initializer(),
                   tf.compat.v1.local_variables_initializer()])
      step.start(session)
      for _ in range(warmup_steps):
        session.run(step.fetches)
      for _ in range(traced_steps):
        metadatas.append(tf.compat.v1.RunMetadata())
        session.run(step.fetches, options=options,
                    run_metadata=metadatas[-1])
  return op_seconds(metadatas)


def table(seconds, top=15):
  """The `top` op types by time, with their share of all op time; str."""
  total = sum(seconds.values())
  lines = [f'{"op type":46s} {"ms/step":>9s} {"share":>6s}']
  for name, value in seconds.most_common(top):
    lines.append(f'{name:46s} {1000 * value:9.1f} {100 * value / total:5.1f}%')
  lines.append(f'{"all ops":46s} {1000 * total:9.1f}')
  return '\n'.join(lines)
