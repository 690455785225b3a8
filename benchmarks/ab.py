"""Training steps of one experiment under other gin settings, timed in alternating blocks."""

import dataclasses
import statistics
import time

import gin
import tensorflow as tf

from benchmarks import profile
from official_seg.data import storage
from official_seg.runtime import gin_config


@dataclasses.dataclass
class Arm:
  """One configuration's training step, in a graph and session of its own.

  Attributes:
    graph: the `tf.Graph` holding the step.
    session: a `tf.compat.v1.Session` on `graph`, variables initialised.
    train_op: what one step runs: the train op (input pipeline, model,
      loss, gradients, update), or with the host_call hook's fetches
      (`profile.Step.fetches`).
  """

  graph: tf.Graph
  session: tf.compat.v1.Session
  train_op: tf.Operation

  @property
  def op_types(self):
    """frozenset of str, the op types of `graph`."""
    return frozenset(op.type for op in self.graph.get_operations())


def build_arm(batch_size, model_dir):
  """Builds the parsed gin experiment's step, as `profile.train_spec` does,
  with its host_call (summaries, warnings) as the Estimator runs it.

  Everything gin configures is read here; the caller may parse another
  configuration afterwards and build the other arm.

  Args:
    batch_size: int.
    model_dir: str, an empty folder of this arm's own.

  Returns:
    An `Arm`.
  """
  graph = tf.Graph()
  with graph.as_default():
    step, session_config = profile.train_op(batch_size, model_dir)
    session = tf.compat.v1.Session(graph=graph, config=session_config)
    session.run([tf.compat.v1.global_variables_initializer(),
                 tf.compat.v1.local_variables_initializer(),
                 tf.compat.v1.tables_initializer()])
    step.start(session)
  return Arm(graph, session, step.fetches)


def parsed_arm(gin_files, gin_params, model_dir):
  """The `Arm` of the experiment these gin files and bindings make.

  gin is cleared before and after, so that the next arm starts afresh.

  Args:
    gin_files: list of str.
    gin_params: list of str, every binding (the flags' included).
    model_dir: str, an empty folder of this arm's own.
  """
  gin.clear_config()
  storage.set_gcs_plugin_defaults()
  gin_config.parse(gin_files, gin_params)
  arm = build_arm(gin_config.binding('build_estimator.train_batch_size'),
                  model_dir)
  gin.clear_config()
  return arm


def block_seconds(arms, blocks, block_steps):
  """Runs `block_steps` steps of each arm in turn, `blocks` times.

  Only one arm runs at a time, so on a shared machine both see the same
  load, block by block.

  Args:
    arms: list of `Arm`s.
    blocks: int, blocks per arm.
    block_steps: int, steps in a block.

  Returns:
    list per arm of `blocks` floats, each block's wall seconds.
  """
  seconds = [[] for _ in arms]
  for _ in range(blocks):
    for arm, times in zip(arms, seconds):
      start = time.perf_counter()
      for _ in range(block_steps):
        arm.session.run(arm.train_op)
      times.append(time.perf_counter() - start)
  return seconds


def compare(arms, blocks, block_steps, warmup_blocks=2):
  """Steps per second of each arm and B's speed over A's.

  Args:
    arms: [A, B], two `Arm`s.
    blocks: int, timed blocks per arm.
    block_steps: int, steps in a block.
    warmup_blocks: int, blocks per arm run first and not timed (each
      session's first steps build its executor and oneDNN's primitives).

  Returns:
    dict: 'steps_per_second' [A, B]; 'ratio' B over A, of all timed steps;
    'paired_ratios', A's block time over the adjacent B block's, per block
    pair; 'median_paired_ratio'; 'only_in_a' and 'only_in_b', sorted op
    types one graph has and the other lacks (what the configurations
    change, to check the binding took effect).

  Raises:
    ValueError: fewer than one timed block, or a block of no steps.
  """
  if blocks < 1 or block_steps < 1:
    raise ValueError(f'--blocks ({blocks}) and --block_steps ({block_steps}) '
                     'must be at least 1.')
  block_seconds(arms, warmup_blocks, block_steps)
  seconds = block_seconds(arms, blocks, block_steps)
  rates = [blocks * block_steps / sum(times) for times in seconds]
  paired = [a / b for a, b in zip(*seconds)]
  return {
      'steps_per_second': rates,
      'ratio': rates[1] / rates[0],
      'paired_ratios': paired,
      'median_paired_ratio': statistics.median(paired),
      'only_in_a': sorted(arms[0].op_types - arms[1].op_types),
      'only_in_b': sorted(arms[1].op_types - arms[0].op_types),
  }


def close(arms):
  """Closes each `Arm`'s session."""
  for arm in arms:
    arm.session.close()
