"""Warm start from name- or object-based checkpoints, with a restore report."""

import json
import os
import re

import gin
import tensorflow as tf
# tf.train.CheckpointView parses a TF2 checkpoint's object graph but keeps the
# checkpoint keys of the matched objects private; the proto holds them.
from tensorflow.core.protobuf import trackable_object_graph_pb2

from official_seg import validation
from official_seg.training import input_channels
from official_seg.training import optimizers

REPORT_NAME = 'restore_report.json'
# Model Garden's `init_checkpoint_modules` choices.
MODULES = ('all', 'backbone', 'decoder')
_OBJECT_GRAPH = '_CHECKPOINTABLE_OBJECT_GRAPH'
_log = tf.compat.v1.logging

# Why not tf.estimator.WarmStartSettings: it is fixed when the estimator is
# built, before the model exists, so it cannot match an object-based
# checkpoint to the model's modules; it cannot report what it restored, and
# on a shape mismatch it fails with TF's one-variable message. It, too, ends
# in `init_from_checkpoint`, which this module calls in the model_fn.


class IncompatibleCheckpointError(validation.RunError, ValueError):
  """The model dir's checkpoint was written by another configuration."""


def check_resume_compatible(model, model_dir):
  """Fails clearly when training would resume from an incompatible checkpoint.

  Without this, resuming with another class count or backbone fails deep in
  the restore with "Assign requires shapes of both tensors to match".

  Args:
    model: the built model.
    model_dir: str; its latest checkpoint, if any, is checked.

  Raises:
    IncompatibleCheckpointError: a model variable is missing from the
      checkpoint or has another shape; the message lists them and says what
      to do.
  """
  latest = tf.train.latest_checkpoint(model_dir)
  if not latest:
    return
  shapes = tf.train.load_checkpoint(latest).get_variable_to_shape_map()
  problems = []
  for variable in model.variables:
    name = variable.name.split(':')[0]
    if name not in shapes:
      problems.append(f'{name} (not in the checkpoint)')
    elif shapes[name] != variable.shape.as_list():
      problems.append(f'{name} (checkpoint {shapes[name]}, model '
                      f'{variable.shape.as_list()})')
  if problems:
    raise IncompatibleCheckpointError(
        f'The checkpoint {latest} in the model dir was written by another '
        f'configuration (class count, backbone or decoder): {len(problems)} '
        f'variable(s) differ: {"; ".join(problems[:5])}'
        f'{" ..." if len(problems) > 5 else ""}. Train into a new '
        f"--model_dir, or start a new one from it with INIT_CHECKPOINT = "
        f"'{latest}' and INITIALIZE_LAST_LAYER = False.")


def resolve_checkpoint(path):
  """The checkpoint prefix INIT_CHECKPOINT names, and a reader of it.

  Args:
    path: str, a checkpoint prefix or a directory holding checkpoints.

  Returns:
    (prefix str, `tf.train.CheckpointReader`); a directory gives its latest.

  Raises:
    ValueError: no checkpoint there; the message names INIT_CHECKPOINT.
  """
  prefix = tf.train.latest_checkpoint(path) if tf.io.gfile.isdir(path) else path
  if prefix:
    try:
      return prefix, tf.train.load_checkpoint(prefix)
    except (tf.errors.NotFoundError, tf.errors.DataLossError, ValueError):
      pass
  raise validation.ConfigurationError(
      f'INIT_CHECKPOINT {path!r} is neither a checkpoint nor a directory '
      'holding one; set it to a checkpoint prefix such as '
      '/runs/voc/model.ckpt-30000 or to its directory.')


def _selected_modules(model, modules):
  """The model's modules to restore, picked as Model Garden's tasks do.

  Args:
    model: a `SegmentationModel`.
    modules: list of `MODULES` names.

  Returns:
    Dict of module name to Keras layer.

  Raises:
    ValueError: an unknown module, or one the model does not have.
  """
  if isinstance(modules, str) or not modules or set(modules) - set(MODULES):
    raise validation.ConfigurationError(
        f'warm_start.modules = {modules!r}: use a list of one or '
        f'more of {list(MODULES)}.')
  if 'all' in modules:
    return dict(model.checkpoint_items)
  absent = [name for name in modules if getattr(model, name) is None]
  if absent:
    raise validation.ConfigurationError(
        f'warm_start.modules names {absent} but the model has '
        'none (build_model.decoder = None); remove it.')
  return {name: getattr(model, name) for name in modules}


def _object_based_keys(prefix, reader, selected):
  """Checkpoint keys of the selected modules' variables, by name.

  Objects are matched by walking the checkpoint's object graph from the
  root, as `tf.train.Checkpoint(**selected).restore(prefix)` does, so a
  checkpoint written with `tf.train.Checkpoint(backbone=..., decoder=...)`
  restores into modules of the same classes whatever their variable names.
  """
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH))
  matched = tf.train.CheckpointView(prefix).match(
      tf.train.Checkpoint(**selected))
  keys = {}
  for node_id, obj in matched.items():
    if isinstance(obj, tf.Variable):
      for attribute in graph.nodes[node_id].attributes:
        if attribute.name == 'VARIABLE_VALUE':
          keys[optimizers.variable_name(obj)] = attribute.checkpoint_key
  return keys


def _exclusion_rules(exclusions, initialize_last_layer, last_layers):
  """(compiled regex, reason) pairs; the first match excludes a variable."""
  rules = [(pattern, f'RESTORE_EXCLUSIONS {pattern.pattern!r}')
           for pattern in optimizers.compile_patterns(
               exclusions, 'warm_start.exclusions')]
  if not initialize_last_layer:
    rules += [(pattern, f'INITIALIZE_LAST_LAYER = False, LAST_LAYERS '
                        f'{pattern.pattern!r}')
              for pattern in optimizers.compile_patterns(
                  last_layers, 'LAST_LAYERS')]
  return rules


def _classify(model, selected, keys, shapes, rules):
  """Sorts every model variable into restored, excluded, skipped, missing,
  or adapted (a 3-channel input kernel, `input_channels`)."""
  report = {'restored': {}, 'excluded': {}, 'skipped_shape': {},
            'missing': [], 'adapted': {}}
  for module_name, module in sorted(model.checkpoint_items.items()):
    for var in module.variables:
      name = optimizers.variable_name(var)
      if module_name not in selected:
        reason = f'module {module_name!r} is not in warm_start.modules'
      else:
        reason = next((why for pattern, why in rules if pattern.search(name)),
                      None)
      if reason:
        report['excluded'][name] = reason
      elif name not in keys:
        report['missing'].append(name)
      elif var.shape.as_list() != shapes[keys[name]]:
        kind, entry = input_channels.mismatch_entry(
            keys[name], var.shape.as_list(), shapes[keys[name]])
        report[kind][name] = entry
      else:
        report['restored'][name] = keys[name]
  return report


def _shape_error(prefix, skipped):
  scopes = sorted({re.escape(name.rsplit('/', 1)[0] + '/') for name in skipped})
  lines = [f'  {name}: model {entry["model_shape"]}, checkpoint '
           f'{entry["checkpoint_shape"]}' for name, entry in skipped.items()]
  return ValueError(
      f'INIT_CHECKPOINT {prefix} has {len(skipped)} variables whose shapes '
      'differ from the model\'s:\n' + '\n'.join(lines) +
      f'\nExclude them with RESTORE_EXCLUSIONS = {scopes} (or '
      'INITIALIZE_LAST_LAYER = False for the last layers), or set '
      'warm_start.skip_shape_mismatch = True to skip them.')


def _nothing_restored_error(report):
  return ValueError(
      f'INIT_CHECKPOINT {report["init_checkpoint"]} initialises no variable '
      f'of the model: {len(report["missing"])} are not in it (e.g. '
      f'{report["missing"][:2]}), and its {len(report["unused"])} entries '
      f'are named like {report["unused"][:2]}. Build the model with the gin '
      'files that wrote the checkpoint, or for a Model Garden checkpoint '
      'check warm_start.modules.')


def restore_plan(model, init_checkpoint, modules=('all',), rules=(),
                 skip_shape_mismatch=False):
  """Decides which model variables the checkpoint initialises.

  Args:
    model: a built `SegmentationModel` (called once, so every layer exists).
    init_checkpoint: str, checkpoint prefix or directory.
    modules: list of `MODULES` names to restore.
    rules: (compiled regex, reason) pairs excluding variables by name.
    skip_shape_mismatch: bool; False makes a shape mismatch an error.

  Returns:
    (report, assignment): the JSON-ready report dict, and the
    `init_from_checkpoint` assignment map of checkpoint key to variable;
    the report's 'adapted' variables are set apart (`input_channels`).

  Raises:
    ValueError: a bad INIT_CHECKPOINT or module, variables whose shapes
      differ (unless skipped), or nothing to restore; each message says
      which gin binding to change.
  """
  prefix, reader = resolve_checkpoint(init_checkpoint)
  shapes = reader.get_variable_to_shape_map()
  selected = _selected_modules(model, modules)
  object_based = _OBJECT_GRAPH in shapes
  if object_based:
    keys = _object_based_keys(prefix, reader, selected)
  else:
    # A quantized model names the float weights it starts from.
    renamed = getattr(model, 'checkpoint_names', {})
    names = map(optimizers.variable_name, model.variables)
    keys = {name: renamed.get(name, name) for name in names
            if renamed.get(name, name) in shapes}
  report = _classify(model, selected, keys, shapes, rules)
  if report['skipped_shape'] and not skip_shape_mismatch:
    raise _shape_error(prefix, report['skipped_shape'])
  report.update(init_checkpoint=prefix, modules=list(modules),
                format='object-based' if object_based else 'name-based',
                unused=sorted(set(shapes) - set(keys.values()) -
                              {_OBJECT_GRAPH}))
  if not report['restored'] and not report['adapted']:
    raise _nothing_restored_error(report)
  variables = {optimizers.variable_name(v): v for v in model.variables}
  return report, {key: variables[name]
                  for name, key in report['restored'].items()}


def write_report(model_dir, report):
  """Logs every variable's fate and writes `<model_dir>/restore_report.json`."""
  path = os.path.join(model_dir, REPORT_NAME)
  _log.info('Warm start from %s (%s): %d restored, %d excluded, %d skipped '
            'for shape, %d missing, %d checkpoint entries unused; see %s.',
            report['init_checkpoint'], report['format'],
            len(report['restored']), len(report['excluded']),
            len(report['skipped_shape']), len(report['missing']),
            len(report['unused']), path)
  for name, key in report['restored'].items():
    _log.info('Warm start: restored %s from %s', name, key)
  for name, reason in report['excluded'].items():
    _log.info('Warm start: excluded %s by %s', name, reason)
  for name, entry in report['adapted'].items():
    _log.info('Warm start: adapted %s from %s %s: %s', name, entry['key'],
              entry['checkpoint_shape'], entry['rule'])
  for name, entry in report['skipped_shape'].items():
    _log.warning('Warm start: skipped %s: model shape %s, checkpoint %s',
                 name, entry['model_shape'], entry['checkpoint_shape'])
  for name in report['missing']:
    _log.warning('Warm start: %s is not in the checkpoint; initialised '
                 'afresh', name)
  tf.io.gfile.makedirs(model_dir)
  with tf.io.gfile.GFile(path, 'w') as f:
    json.dump(report, f, indent=2, sort_keys=True)


def _names_a_checkpoint(path):
  if path is None:
    return True
  try:
    resolve_checkpoint(path)
  except validation.ConfigurationError:
    return False
  return True


@gin.configurable(denylist=['model', 'model_dir', 'last_layers'])
@validation.checked(init_checkpoint=validation.Expect(
    _names_a_checkpoint, 'None, a checkpoint prefix such as '
    '/runs/voc/model.ckpt-30000, or a directory holding one'))
def warm_start(model, model_dir, init_checkpoint=None, modules=('all',),
               exclusions=(), initialize_last_layer=True, last_layers=(),
               skip_shape_mismatch=False):
  """A TPUEstimatorSpec `scaffold_fn` that initialises from INIT_CHECKPOINT.

  Call it in TRAIN mode after the model is built. A checkpoint in
  `model_dir` wins: training resumes from it and INIT_CHECKPOINT is ignored.
  The plan is checked here, at graph construction, so errors come before
  any training; the restore itself replaces the variables' initializers, so
  it happens only when the session is initialised rather than restored, and
  the report is written by the scaffold's init_fn, which runs on the chief.

  Args:
    model: the built `SegmentationModel`.
    model_dir: str, the run's model dir.
    init_checkpoint: str or None (macro INIT_CHECKPOINT), a checkpoint
      prefix or directory: a name-based one written by this pipeline, or an
      object-based TF2 one of Model Garden modules.
    modules: list from `MODULES` (Model Garden's init_checkpoint_modules).
    exclusions: list of regular expressions over variable names not to
      restore (macro RESTORE_EXCLUSIONS).
    initialize_last_layer: bool; False also excludes `last_layers` (macro
      INITIALIZE_LAST_LAYER, DeepLab's flag).
    last_layers: list of regular expressions (`ModelFnOptions.last_layers`,
      macro LAST_LAYERS), handed in by the model_fn.
    skip_shape_mismatch: bool; True skips variables whose shapes differ
      instead of failing.

  Returns:
    A callable returning a `tf.compat.v1.train.Scaffold`, or None when there
    is nothing to warm start from.
  """
  if not init_checkpoint:
    return None
  latest = tf.train.latest_checkpoint(model_dir)
  if latest:
    _log.info('Resuming from %s; INIT_CHECKPOINT %s is ignored.', latest,
              init_checkpoint)
    return None
  rules = _exclusion_rules(exclusions, initialize_last_layer, last_layers)
  report, assignment = restore_plan(model, init_checkpoint, modules, rules,
                                    skip_shape_mismatch)

  def scaffold_fn():
    # On a TPU the initializers must be set on the host, in scaffold_fn.
    tf.compat.v1.train.init_from_checkpoint(report['init_checkpoint'],
                                            assignment)
    adapt = input_channels.assign_ops(
        report['init_checkpoint'], report['adapted'],
        {optimizers.variable_name(v): v for v in model.variables})

    def init_fn(scaffold, session):
      del scaffold  # Unused.
      session.run(adapt)
      write_report(model_dir, report)

    return tf.compat.v1.train.Scaffold(init_fn=init_fn)

  return scaffold_fn
