"""The Model Garden model config of build_model's gin bindings."""

import dataclasses
import inspect
import math

import gin
from official.vision.configs import backbones as backbone_cfgs
from official.vision.configs import common
from official.vision.configs import decoders as decoder_cfgs
from official.vision.configs import semantic_segmentation as seg_cfgs
from official.vision.modeling import backbones
from official.vision.modeling import decoders
from official.vision.modeling import heads

from official_seg.data import dataset_info
from official_seg.modeling import model as model_lib
from official_seg.runtime import gin_config

_UNBOUND = object()
# Backbones the peer maps: gin selector -> (Model Garden class, config type,
# config class, base experiment whose remaining defaults the peer keeps).
_BACKBONES = {
    'backbones.MobileNet': (backbones.MobileNet, 'mobilenet',
                            backbone_cfgs.MobileNet, 'mnv2_deeplabv3_pascal'),
    'backbones.DilatedResNet': (backbones.DilatedResNet, 'dilated_resnet',
                                backbone_cfgs.DilatedResNet,
                                'seg_deeplabv3_pascal'),
}
# The other references the peer maps: gin selector -> class.
_DECODERS = {'decoders.ASPP': decoders.ASPP}
_HEADS = {'heads.SegmentationHead': heads.SegmentationHead}
# The Model Garden config calls it stochastic_depth_drop_rate throughout.
_RENAMES = {'stochastic_depth_drop_rate': 'init_stochastic_depth_rate'}
# One NormActivation config sets these for backbone, decoder and head alike.
_NORM_FIELDS = ('activation', 'norm_momentum', 'norm_epsilon')


def signature_default(constructor, parameter):
  """`gin_config.binding`'s `default` for a parameter gin may leave unbound.

  Args:
    constructor: the function or class gin configures.
    parameter: str, one of its parameters.

  Returns:
    dict: {'default': value} when `constructor`'s signature gives
    `parameter` a default, else {} (so nothing bound is an error).
  """
  default = inspect.signature(constructor).parameters[parameter].default
  if default is inspect.Parameter.empty or default is gin.REQUIRED:
    return {}
  return {'default': default}


def mapped(selector, supported, **default):
  """Which of the `supported` classes gin binds to `selector`.

  Args:
    selector: str, 'configurable.parameter' bound to a gin reference: @name
      binds the class, @name() the object gin builds from it.
    supported: dict of gin selector to the class the peer maps.
    **default: `signature_default`'s, for a parameter gin may leave unbound.

  Returns:
    (the key of `supported` that matches, the bound class or object).

  Raises:
    ValueError: gin cannot build the object, it is none of `supported`, or
      it is a scoped class reference; the message names the binding.
  """
  try:
    value = gin_config.binding(selector, **default)
  except TypeError as error:  # An @name() that lacks required arguments.
    raise ValueError(f'gin binding {selector} cannot be built: '
                     f'{error}') from error
  for name, cls in supported.items():
    if isinstance(value, cls):  # Built in the reference's scope, if any.
      return name, value
    if isinstance(value, type) and issubclass(value, cls):
      # A scoped @scope/name is a subclass of its own; the peer would read
      # the unscoped bindings instead of the scope's.
      if value is not gin.get_configurable(name):
        raise ValueError(f'gin binding {selector} is a scoped reference; the '
                         'peer benchmark maps unscoped ones only.')
      return name, value
  raise ValueError(
      f'gin binding {selector} = {value!r} has no Model Garden counterpart in '
      f'the peer benchmark; it maps {", ".join(sorted(supported))}.')


def _module_config(config_cls, selector, constructor, **fixed):
  """A Model Garden config whose fields take gin's values for `selector`.

  Raises:
    ValueError: gin binds a parameter of `selector` the config has no field
      for (it would silently differ); names the binding.
  """
  params = inspect.signature(constructor).parameters
  values = dict(fixed)
  for field in dataclasses.fields(config_cls):
    param = field.name if field.name in params else _RENAMES.get(field.name)
    if field.name not in values and param in params:
      values[field.name] = gin_config.binding(
          f'{selector}.{param}', **signature_default(constructor, param))
  mapped = {_RENAMES.get(name, name) for name in values} | set(values)
  unmapped = sorted(
      param for param in set(params) - mapped - set(_NORM_FIELDS)
      if gin_config.binding(f'{selector}.{param}',
                            default=_UNBOUND) is not _UNBOUND)
  if unmapped:
    raise ValueError(f'gin binding {selector}.{unmapped[0]} has no Model '
                     'Garden config field; remove it to run the peer.')
  return config_cls(**values)


def _norm_activation(selectors):
  """The one NormActivation the Model Garden applies to every module.

  Args:
    selectors: list of (gin selector, constructor) of backbone, decoder, head.

  Raises:
    ValueError: the modules are bound to different values.
  """
  values = {}
  for field in _NORM_FIELDS:
    found = {f'{sel}.{field}': gin_config.binding(
                 f'{sel}.{field}', **signature_default(fn, field))
             for sel, fn in selectors
             if field in inspect.signature(fn).parameters}
    if len(set(found.values())) > 1:
      raise ValueError(f'The Model Garden has one {field} for all modules; '
                       f'bind the same value to each of {found}.')
    values[field] = next(iter(found.values()))
  # One CPU replica: synchronised batch norm would only add collectives.
  return common.NormActivation(use_sync_bn=False, **values)


def model_config():
  """(SemanticSegmentationModel, base experiment name) of build_model."""
  backbone_sel, _ = mapped('build_model.backbone',
                            {sel: row[0] for sel, row in _BACKBONES.items()})
  decoder_sel, _ = mapped(
      'build_model.decoder', _DECODERS,
      **signature_default(model_lib.build_model, 'decoder'))
  head_sel, _ = mapped('build_model.head', _HEADS,
                        **signature_default(model_lib.build_model, 'head'))
  backbone_cls, kind, cfg_cls, base = _BACKBONES[backbone_sel]
  backbone = _module_config(cfg_cls, backbone_sel, backbone_cls)
  # build_model puts ASPP and the head at build_model.level, by default the
  # backbone's deepest level.
  level = (gin_config.binding('build_model.level', **signature_default(
      model_lib.build_model, 'level'))
           or int(math.log2(backbone.output_stride or 32)))
  aspp = _module_config(decoder_cfgs.ASPP, decoder_sel, decoders.ASPP,
                        level=level)
  head = _module_config(seg_cfgs.SegmentationHead, head_sel,
                        heads.SegmentationHead, level=level)
  return seg_cfgs.SemanticSegmentationModel(
      num_classes=dataset_info.DatasetInfo().num_classes,
      input_size=[None, None, 3],
      backbone=backbone_cfgs.Backbone(type=kind, **{kind: backbone}),
      decoder=decoder_cfgs.Decoder(type='aspp', aspp=aspp),
      head=head,
      norm_activation=_norm_activation(
          [(backbone_sel, backbone_cls), (decoder_sel, decoders.ASPP),
           (head_sel, heads.SegmentationHead)])), base

