"""The map between DeepLab's tf-slim checkpoint names and our model's variables."""

import dataclasses
import re

from official_seg import validation
from official_seg.deeplab import slim_layers

# Checkpoint entries that are not weights of the network, by kind.
_UNUSED_KINDS = (
    ('global_step', re.compile(r'(^|/)global_step$')),
    ('moving_average', re.compile(r'/ExponentialMovingAverage(_\d+)?$')),
    ('optimizer_slot', re.compile(
        r'/(Momentum|Adam(_\d+)?|RMSProp(_\d+)?|Adagrad|Ftrl(_\d+)?)$')),
    ('optimizer_state', re.compile(r'^(beta[12]_power|.*_power)$')),
)


class DeepLabImportError(validation.ConfigurationError):
  """A DeepLab checkpoint cannot fill the configured model; the message names
  why (exit status 2)."""


@dataclasses.dataclass
class ImportPlan:
  """What a DeepLab checkpoint gives our model.

  Attributes:
    values: dict of our `tf.Variable` to its numpy value.
    filled: dict of our variable's name to the DeepLab name it came from.
    not_filled: our variables' names left at initialisation (the head's
      when importing a backbone only).
    unused: dict of kind ('global_step', 'moving_average',
      'optimizer_slot', 'optimizer_state', 'other') to the checkpoint
      names no variable of ours reads.
  """
  values: dict
  filled: dict
  not_filled: list
  unused: dict


def deeplab_names(model):
  """Each variable of a DeepLab-layered model by its DeepLab name.

  Args:
    model: a built `SegmentationModel` whose backbone has a `slim_scope`
      (e.g. `xception.Xception`) and whose decoder and head are made of
      `slim_layers.ConvBN` (e.g. `heads`' layers).

  Returns:
    (backbone dict, rest dict), each of DeepLab name (str) to `tf.Variable`.

  Raises:
    DeepLabImportError: the model has variables without a DeepLab name
      (a Model Garden backbone, decoder or head); the message names them.
  """
  scope = getattr(model.backbone, 'slim_scope', None)
  if scope is None:
    raise DeepLabImportError(
        f'The backbone {type(model.backbone).__name__} has no DeepLab '
        'names; bind build_model.backbone = @backbones.Xception (or '
        '@backbones.ResNetBeta).')
  backbone = slim_layers.slim_variables(model.backbone, scope + '/')
  rest = {}
  for part in (model.decoder, model.head):
    if part is not None:
      rest.update(slim_layers.slim_variables(part))
  named = {id(v) for v in list(backbone.values()) + list(rest.values())}
  nameless = [v.name for v in model.variables if id(v) not in named]
  if nameless:
    raise DeepLabImportError(
        f'{len(nameless)} variable(s) of the model have no DeepLab name '
        f'(bind decoders.DeepLabASPP and heads.DeepLabHead): '
        f'{", ".join(nameless[:5])}')
  return backbone, rest


def classify_unused(names):
  """Checkpoint names grouped by kind (see `ImportPlan.unused`)."""
  unused = {}
  for name in sorted(names):
    kind = next((k for k, pattern in _UNUSED_KINDS if pattern.search(name)),
                'other')
    unused.setdefault(kind, []).append(name)
  return unused


def plan_import(model, shapes, read, backbone_only=False):
  """Matches a DeepLab checkpoint to the model, name by name and shape by shape.

  Args:
    model: a built model (see `deeplab_names`).
    shapes: dict of checkpoint name (str) to shape (list of int).
    read: function of a checkpoint name to its numpy value.
    backbone_only: bool, fill the backbone only (an ImageNet checkpoint);
      the decoder and head are left at initialisation and listed.

  Returns:
    An `ImportPlan`.

  Raises:
    DeepLabImportError: a variable we need is not in the checkpoint, or
      has another shape there; the message lists each by name.
  """
  backbone, rest = deeplab_names(model)
  wanted = dict(backbone) if backbone_only else dict(backbone, **rest)
  missing = sorted(n for n in wanted if n not in shapes)
  wrong = sorted(f'{n} (checkpoint {shapes[n]}, model '
                 f'{wanted[n].shape.as_list()})' for n in wanted
                 if n in shapes and list(shapes[n]) != wanted[n].shape.as_list())
  if missing or wrong:
    raise DeepLabImportError(
        f'The checkpoint cannot fill the model: {len(missing)} variable(s) '
        f'missing [{", ".join(missing)}]; {len(wrong)} of another shape '
        f'[{"; ".join(wrong)}]. Check the backbone (model_id, ASPP rates, '
        'decoder), NUM_CLASSES, or import the backbone only.')
  values = {variable: read(name) for name, variable in wanted.items()}
  filled = {variable.name.split(':')[0]: name
            for name, variable in wanted.items()}
  not_filled = sorted(v.name.split(':')[0] for n, v in rest.items()
                      if n not in wanted)
  return ImportPlan(values=values, filled=filled, not_filled=not_filled,
                    unused=classify_unused(set(shapes) - set(wanted)))
