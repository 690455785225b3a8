"""One .tflite whose probabilities are the mean of several models' (cross-validation folds), laid out as `tflite.tflite_export`'s."""

import os

import tensorflow as tf

from official_seg import validation
from official_seg.data import storage
from official_seg.export import saved_model
from official_seg.export import tflite
from official_seg.export import tflite_runner

# The kinds an ensemble converts to: those that need no calibration.
KINDS = ('float32', 'float16', 'dynamic_range')


def check_kinds(kinds):
  """Raises `tflite.KindError` (one line) for kinds an ensemble cannot take.

  Args:
    kinds: the kinds asked for, some of `tflite.KINDS`.
  """
  if isinstance(kinds, str) or not kinds:
    raise tflite.KindError(f'TFLite ensemble kinds {kinds!r}: give one or '
                           f'more of {", ".join(KINDS)}.')
  refused = [kind for kind in kinds if kind not in KINDS]
  if refused:
    raise tflite.KindError(
        f'TFLite ensemble kinds {",".join(refused)}: an ensemble converts '
        f'only {", ".join(KINDS)} (int8 kinds calibrate one model\'s ranges '
        'and qat_int8 converts one quantized model; export those per fold).')


def check_output_kind(sigmoid):
  """Refuses the sigmoid output kind, which no .tflite serves.

  Raises:
    validation.ConfigurationError: `sigmoid` is true.
  """
  if sigmoid:
    raise validation.ConfigurationError(
        "A TFLite ensemble serves one class per pixel; OutputKind.kind = "
        "'sigmoid' ensembles as a SavedModel only (--ensemble).")


def _placeholder(graph_def, name):
  """(dtype, shape) of the placeholder `name` of a frozen serving graph."""
  node = next(n for n in graph_def.node if n.name == name)
  shape = [d.size for d in node.attr['shape'].shape.dim]
  return tf.dtypes.as_dtype(node.attr['dtype'].type), shape


def _check_inputs(members):
  """The members' common inputs: {name: (dtype, shape)}.

  Raises:
    validation.ConfigurationError: fewer than two members, or members of
      other input sizes, channels or types.
  """
  if len(members) < 2:
    raise validation.ConfigurationError(
        f'An ensemble needs at least two models; got {len(members)}.')
  names = (tflite_runner.IMAGE_INPUT, tflite_runner.SIZE_INPUT)
  inputs = [{name: _placeholder(m, name) for name in names} for m in members]
  for index, other in enumerate(inputs[1:], start=1):
    if other != inputs[0]:
      raise validation.ConfigurationError(
          f'Model {index} of the ensemble has inputs {other}, model 0 '
          f'{inputs[0]}: ensemble models of one configuration.')
  return inputs[0]


def ensemble_graph(members):
  """Builds, in the default graph, the inputs and the members' mean.

  Args:
    members: frozen serving graphs (`tflite.frozen_serving_graph`) of one
      input size, channels and type.

  Returns:
    (inputs [image, size], outputs [semantic, probabilities]): 'probabilities'
    float32 [1, H, W, C], the members' mean; 'semantic' int32 [1, H, W], its
    arg max.
  """
  specs = _check_inputs(members)
  inputs = [tf.compat.v1.placeholder(*specs[name], name=name)
            for name in (tflite_runner.IMAGE_INPUT, tflite_runner.SIZE_INPUT)]
  found = [tf.compat.v1.import_graph_def(
      member, input_map={f'{p.op.name}:0': p for p in inputs},
      return_elements=[f'{tflite_runner.PROBABILITIES_OUTPUT}:0'],
      name=f'member{index}')[0] for index, member in enumerate(members)]
  mean = tf.identity(tf.add_n(found) / len(found),
                     name=tflite_runner.PROBABILITIES_OUTPUT)
  semantic = tf.identity(tf.argmax(mean, axis=-1, output_type=tf.int32),
                         name=tflite_runner.SEMANTIC_OUTPUT)
  return inputs, [semantic, mean]


def convert(members, kind):
  """The .tflite bytes of `ensemble_graph(members)` in `kind` (of `KINDS`)."""
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    inputs, outputs = ensemble_graph(members)
    converter = tf.compat.v1.lite.TFLiteConverter.from_session(
        session, inputs, outputs)
    tflite.configure_converter(converter, kind)
    return converter.convert()


def export_ensemble(members, output_dir, kinds, dataset, metadata):
  """Writes `<output_dir>/model_<kind>.tflite` for each kind, and
  `tflite_runner.METADATA_FILE` beside them.

  Args:
    members: frozen serving graphs (`tflite.frozen_serving_graph`).
    output_dir: str, the folder of the models.
    kinds: some of `KINDS`.
    dataset: the members' `DatasetInfo`.
    metadata: dict of more fields of the metadata file (the eval parser's
      `saved_model.preprocessing_metadata`, the members).

  Returns:
    dict of kind to the path written.

  Raises:
    tflite.KindError: see `check_kinds`.
    validation.ConfigurationError: see `ensemble_graph`.
  """
  check_kinds(kinds)
  written = {}
  for kind in kinds:
    written[kind] = os.path.join(output_dir, f'model_{kind}.tflite')
    storage.write_whole(written[kind], convert(members, kind))
  saved_model.write_metadata(
      os.path.join(output_dir, tflite_runner.METADATA_FILE), dataset,
      dict(metadata, global_step=None))
  return written
