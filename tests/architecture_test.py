"""The package structure of docs/architecture.md, read from the source."""

import ast
import inspect
import os

from absl.testing import parameterized
import gin
from gin import config as gin_config_internals
import tensorflow as tf

# Registers every configurable of the package (the binary's own imports,
# without its absl flags, which tool tests define too).
from official_seg.runtime import dry_run  # pylint: disable=unused-import
from official_seg.runtime import experiment  # pylint: disable=unused-import
from tests import testing_utils

_PACKAGE = os.path.join(testing_utils.REPO, 'official_seg')
# Lower ranks never import higher ones; equal ranks never import each other.
RANKS = {'validation': -1, 'data': 0, 'modeling': 0, 'training': 1,
         'evaluation': 1,
         'export': 2, 'runtime': 3, 'train_and_eval': 4}
MAX_MODULE_LINES = 350
MAX_CONFIGURABLE_PARAMETERS = 8
# Configurables allowed more parameters, each with its reason.
WIDE_CONFIGURABLES = {
    # DeepLab's own input flags, one to one (crop, three scale settings,
    # flip, three resize settings, mean and stddev): users port them from
    # DeepLab configs by name.
    'official_seg.data.preprocess.Parser',
    # Parser's ten geometry arguments, so that unlabeled/ binds them by the
    # same names, plus the strong view's jitter switch and cutout size.
    'official_seg.data.views.UnlabeledParser',
    # tf.estimator/TPU RunConfig's own arguments, passed through by name.
    'official_seg.runtime.run_config.build_run_config',
}


def _modules():
  for folder, _, files in os.walk(_PACKAGE):
    for name in sorted(files):
      if name.endswith('.py'):
        yield os.path.join(folder, name)


def _package(path):
  parts = os.path.relpath(path, _PACKAGE).split(os.sep)
  return parts[0] if len(parts) > 1 else parts[0][:-len('.py')]


def _imports(path):
  """The official_seg packages (and other top-level names) a module imports."""
  with open(path, encoding='utf-8') as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module:
      names = [node.module]
    elif isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    else:
      continue
    for name in names:
      parts = name.split('.')
      if parts[0] == 'official_seg' and len(parts) > 1:
        yield parts[1]
      elif parts[0] in ('benchmarks', 'tools', 'tests'):
        yield parts[0]


def _calls(path, attribute):
  with open(path, encoding='utf-8') as f:
    tree = ast.parse(f.read())
  return [node.lineno for node in ast.walk(tree)
          if isinstance(node, ast.Attribute) and node.attr == attribute]


class ArchitectureTest(tf.test.TestCase, parameterized.TestCase):

  def test_packages_depend_one_way(self):
    wrong = []
    for path in _modules():
      mine = _package(path)
      if mine not in RANKS:
        continue
      for other in _imports(path):
        if other in ('benchmarks', 'tools', 'tests') or (
            other != mine and other in RANKS and RANKS[other] >= RANKS[mine]):
          wrong.append(f'{os.path.relpath(path, _PACKAGE)} imports {other}')
    self.assertEmpty(wrong)

  def test_every_package_is_ranked(self):
    packages = {_package(path) for path in _modules()} - {'__init__'}
    self.assertEmpty(packages - set(RANKS))

  def test_modules_stay_small(self):
    long = []
    for path in _modules():
      with open(path, encoding='utf-8') as f:
        count = sum(1 for _ in f)
      if count > MAX_MODULE_LINES:
        long.append(f'{os.path.relpath(path, _PACKAGE)}: {count} lines')
    self.assertEmpty(long)

  def test_only_the_binary_and_gin_config_touch_global_gin_state(self):
    found = []
    for path in _modules():
      relative = os.path.relpath(path, _PACKAGE)
      for attribute in ('clear_config', 'query_parameter', 'get_bindings'):
        if relative != os.path.join('runtime', 'gin_config.py') and _calls(
            path, attribute):
          found.append(f'{relative} calls gin.{attribute}')
    self.assertEmpty(found)

  def test_configurables_take_a_handful_of_parameters(self):
    wide = []
    for selector, configurable in gin_config_internals._REGISTRY.items():  # pylint: disable=protected-access
      if not selector.startswith('official_seg.'):
        continue
      target = configurable.wrapped
      function = target.__init__ if inspect.isclass(target) else target
      denylist = configurable.denylist or ()
      parameters = [p for p in inspect.signature(function).parameters
                    if p != 'self' and p not in denylist]
      if (len(parameters) > MAX_CONFIGURABLE_PARAMETERS
          and selector not in WIDE_CONFIGURABLES):
        wide.append(f'{selector}: {parameters}')
    self.assertEmpty(wide)

  def test_base_gin_states_no_default_twice(self):
    """An unscoped base.gin binding of our own configurable is no default.

    A default is stated once: in the function, or in base.gin for a
    parameter the function leaves REQUIRED. Macro wiring is not a default.
    """
    gin.clear_config()
    from official_seg.runtime import gin_config  # pylint: disable=g-import-not-at-top
    gin_config.parse(['experiments/quickstart.gin'], [], finalize=False)
    path = os.path.join(gin_config.gin_dir(), 'base.gin')
    restated = []
    with open(path, encoding='utf-8') as f:
      for line in f:
        if '=' not in line or line.startswith(('#', ' ')) or '/' in line:
          continue
        binding, value = (part.strip() for part in line.split('=', 1))
        name, _, parameter = binding.rpartition('.')
        if not name or value.startswith('%'):
          continue
        configurable = gin_config_internals._REGISTRY.get_match(name)  # pylint: disable=protected-access
        if not configurable or not configurable.selector.startswith(
            'official_seg.'):
          continue
        target = configurable.wrapped
        function = target.__init__ if inspect.isclass(target) else target
        default = inspect.signature(function).parameters[parameter].default
        if default is not gin.REQUIRED:
          restated.append(line.strip())
    self.assertEmpty(restated)


if __name__ == '__main__':
  tf.test.main()
