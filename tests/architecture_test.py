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
# Folders of code above the package: held to the same module size, and
# their modules never import each other in a circle.
_TOP_FOLDERS = ('benchmarks', 'tools')
# Lower ranks never import higher ones; equal ranks never import each other.
RANKS = {'validation': -1, 'data': 0, 'modeling': 0, 'training': 1,
         'evaluation': 1, 'export': 2, 'runtime': 3, 'flags': 4,
         'command_line': 4, 'layout_flags': 4,
         'generator_flags': 4, 'train_and_eval': 5, 'commands': 6}
# Features that span layers, each in a package of its own, and the packages
# of official_seg each may import. The core never imports them but for
# CORE_IMPORTS_OF_FEATURES (the binary and the commands above it may); the
# features never import each other.
CORE = ('validation', 'data', 'modeling', 'training', 'evaluation', 'export',
        'runtime')
FEATURES = {
    'datasets': {'validation', 'data'},
    'deeplab': {'validation', 'data', 'modeling', 'training'},
    'semi_supervised': {'validation', 'data', 'modeling', 'training',
                        'evaluation'},
}
# (core module, feature package) imports that stay until the composition
# root injects what they build, each with its reason.
CORE_IMPORTS_OF_FEATURES = {
    # PseudoSeg's CAM branch (image classifier, CAM refinement) is built
    # inside the segmentation model when `build_model` is asked for it.
    ('modeling/model.py', 'semi_supervised'),
    # The model_fn runs the semi-supervised step and takes its options.
    ('runtime/model_fn.py', 'semi_supervised'),
    # The composition root builds the unlabeled stream and its parser.
    ('runtime/estimator.py', 'semi_supervised'),
}
# The flags every tool and the binary share, defined in official_seg/flags.py
# alone: absl refuses a flag defined twice in one process.
SHARED_FLAGS = ('gin_file', 'gin_param', 'data_dir')
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
    'official_seg.semi_supervised.views.UnlabeledParser',
    # The dataset's facts, one field per macro of gin/datasets/dataset.gin,
    # so that everything known of a dataset arrives as one object.
    'official_seg.data.dataset_info.DatasetInfo',
    # tf.estimator/TPU RunConfig's own arguments, passed through by name.
    'official_seg.runtime.run_config.build_run_config',
}


def _modules():
  for folder, _, files in os.walk(_PACKAGE):
    for name in sorted(files):
      if name.endswith('.py'):
        yield os.path.join(folder, name)


def _top_modules(folder):
  """{module name: path} of the .py files of a top folder."""
  root = os.path.join(testing_utils.REPO, folder)
  return {name[:-len('.py')]: os.path.join(root, name)
          for name in sorted(os.listdir(root)) if name.endswith('.py')}


def _imported_names(path):
  """Every dotted name a module imports, `from a import b` as `a.b` too."""
  with open(path, encoding='utf-8') as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):  # Imports inside functions count too.
    if isinstance(node, ast.Import):
      yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      yield node.module
      yield from (f'{node.module}.{alias.name}' for alias in node.names)


def _sibling_imports(folder, path, siblings):
  """The modules of `folder` that the module at `path` imports.

  A tool runs as a script, which finds its siblings as top-level modules,
  so there a bare `import name` counts as well as `from tools import name`.
  """
  found = set()
  for name in _imported_names(path):
    parts = name.split('.')
    if parts[0] == folder and len(parts) > 1 and parts[1] in siblings:
      found.add(parts[1])
    elif folder == 'tools' and len(parts) == 1 and parts[0] in siblings:
      found.add(parts[0])
  return found


def _cycle(graph):
  """One import cycle of `graph` ({module: set of modules}) as a list, or []."""
  state = {}  # module -> 'open' while on the path, 'done' after.

  def visit(module, path):
    state[module] = 'open'
    for other in sorted(graph[module]):
      if state.get(other) == 'open':
        return path[path.index(other):] + [other]
      if other not in state:
        found = visit(other, path + [other])
        if found:
          return found
    state[module] = 'done'
    return []

  for module in sorted(graph):
    if module not in state:
      found = visit(module, [module])
      if found:
        return found
  return []


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


def _flag_definitions(path):
  """(line, flag name) of each `flags.DEFINE_*('name', ...)` in a module."""
  with open(path, encoding='utf-8') as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr.startswith('DEFINE') and node.args
        and isinstance(node.args[0], ast.Constant)):
      yield node.lineno, node.args[0].value


def _calls(path, attribute):
  with open(path, encoding='utf-8') as f:
    tree = ast.parse(f.read())
  return [node.lineno for node in ast.walk(tree)
          if isinstance(node, ast.Attribute) and node.attr == attribute]


def _too_long(paths, root):
  """'<path from root>: N lines' of each module over MAX_MODULE_LINES."""
  long = []
  for path in paths:
    with open(path, encoding='utf-8') as f:
      count = sum(1 for _ in f)
    if count > MAX_MODULE_LINES:
      long.append(f'{os.path.relpath(path, root)}: {count} lines')
  return long

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

  def test_core_imports_no_feature_but_the_listed_ones(self):
    wrong = []
    for path in _modules():
      relative = os.path.relpath(path, _PACKAGE)
      if _package(path) not in CORE:
        continue
      wrong += [f'{relative} imports {other}' for other in set(_imports(path))
                if other in FEATURES
                and (relative, other) not in CORE_IMPORTS_OF_FEATURES]
    self.assertEmpty(wrong)

  def test_the_listed_core_imports_of_features_exist(self):
    stale = [(module, feature)
             for module, feature in sorted(CORE_IMPORTS_OF_FEATURES)
             if feature not in set(_imports(os.path.join(_PACKAGE, module)))]
    self.assertEmpty(stale)

  @parameterized.parameters(*sorted(FEATURES))
  def test_features_import_only_the_core_below_them(self, feature):
    wrong = []
    for path in _modules():
      if _package(path) != feature:
        continue
      wrong += [f'{os.path.relpath(path, _PACKAGE)} imports {other}'
                for other in set(_imports(path))
                if other not in FEATURES[feature] | {feature}]
    self.assertEmpty(wrong)

  def test_every_package_is_ranked(self):
    packages = {_package(path) for path in _modules()} - {'__init__'}
    self.assertEmpty(packages - set(RANKS) - set(FEATURES))

  def test_modules_stay_small(self):
    self.assertEmpty(_too_long(_modules(), _PACKAGE))

  @parameterized.parameters(*_TOP_FOLDERS)
  def test_top_folders_keep_modules_small(self, folder):
    self.assertEmpty(_too_long(_top_modules(folder).values(),
                               testing_utils.REPO))

  @parameterized.parameters(*_TOP_FOLDERS)
  def test_top_folders_import_one_way(self, folder):
    modules = _top_modules(folder)
    graph = {name: _sibling_imports(folder, path, modules) - {name}
             for name, path in modules.items()}
    self.assertEqual(_cycle(graph), [], f'an import cycle in {folder}/')

  def test_shared_flags_are_defined_in_official_seg_flags_alone(self):
    paths = list(_modules()) + [
        path for folder in _TOP_FOLDERS
        for path in _top_modules(folder).values()]
    own = os.path.join(_PACKAGE, 'flags.py')
    found = [f'{os.path.relpath(path, testing_utils.REPO)}:{line} defines '
             f'--{name}' for path in paths if path != own
             for line, name in _flag_definitions(path) if name in SHARED_FLAGS]
    self.assertEmpty(found)
    self.assertCountEqual([name for _, name in _flag_definitions(own)],
                          SHARED_FLAGS)

  def test_cycle_finds_a_circle_and_only_a_circle(self):
    self.assertEqual(_cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}),
                     ['a', 'b', 'c', 'a'])
    self.assertEqual(_cycle({'a': {'b', 'c'}, 'b': {'c'}, 'c': set()}), [])

  def test_benchmarks_never_import_tools(self):
    wrong = [name for name, path in _top_modules('benchmarks').items()
             if 'tools' in set(_imports(path))]
    self.assertEmpty(wrong)

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


# Packages below the composition root (runtime/): they take models, losses,
# optimizers, schedules, parsers and options as arguments and never call a
# configurable of the package to get them.
_LIBRARY_PACKAGES = ('data', 'modeling', 'training', 'evaluation', 'export',
                     'datasets', 'deeplab', 'semi_supervised')
# Library calls of configurables not yet handed in by the runtime, each
# with its reason; the list only shrinks.
_CONFIGURABLE_CALLS_LEFT = {
    # The input pipelines' scoped twins (train/, eval/, unlabeled/): the
    # dataset is built inside the input_fn's gin scope at each call.
    'data/input_fn.py: official_seg.data.input_fn.build_dataset',
    # The strong view's jitter, bound in the unlabeled/ scope.
    'semi_supervised/views.py: official_seg.semi_supervised.views.color_jitter',
}
# Where a binding may be read back by its name: the gin-parsing module, and
# the check before a run, which reports each binding by its name.
_BINDING_READERS = ('runtime/gin_config.py', 'runtime/config_checks.py')


def _configurables_by_module():
  """{module name: names of the package's configurables defined there}."""
  found = {}
  for _, configurable in gin_config_internals._REGISTRY.items():  # pylint: disable=protected-access
    module = getattr(configurable.wrapped, '__module__', '')
    if module.startswith('official_seg.'):
      found.setdefault(module, set()).add(configurable.wrapped.__name__)
  return found


def _aliases(tree):
  """{local name: dotted module or member} of a module's package imports."""
  aliases = {}
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module:
      for alias in node.names:
        aliases[alias.asname or alias.name] = f'{node.module}.{alias.name}'
    elif isinstance(node, ast.Import):
      for alias in node.names:
        aliases[alias.asname or alias.name] = alias.name
  return aliases


def configurable_calls(path, module, configurables):
  """'<module>.<name>' of each call of a configurable in the file at `path`."""
  with open(path, encoding='utf-8') as f:
    tree = ast.parse(f.read())
  aliases = _aliases(tree)
  calls = set()
  for node in ast.walk(tree):
    if not isinstance(node, ast.Call):
      continue
    function = node.func
    if isinstance(function, ast.Name):
      owner, name = module, function.id
    elif (isinstance(function, ast.Attribute) and
          isinstance(function.value, ast.Name) and
          function.value.id in aliases):
      owner, name = aliases[function.value.id], function.attr
    else:
      continue
    if name in configurables.get(owner, ()):
      calls.add(f'{owner}.{name}')
  return calls


class SettingsAreHandedInTest(tf.test.TestCase):
  """Library code calls what it is given; only runtime/ builds from gin."""

  def test_library_code_calls_no_configurable(self):
    configurables = _configurables_by_module()
    found = set()
    for path in _modules():
      relative = os.path.relpath(path, _PACKAGE)
      if _package(path) not in _LIBRARY_PACKAGES:
        continue
      module = 'official_seg.' + relative[:-len('.py')].replace(os.sep, '.')
      found |= {f'{relative}: {call}' for call in
                configurable_calls(path, module, configurables)}
    self.assertEmpty(found - _CONFIGURABLE_CALLS_LEFT)
    # A call handed in since leaves the list.
    self.assertEmpty(_CONFIGURABLE_CALLS_LEFT - found)

  def test_the_rule_sees_own_module_and_imported_calls(self):
    path = os.path.join(self.create_tempdir().full_path, 'lib.py')
    with open(path, 'w', encoding='utf-8') as f:
      f.write('from official_seg.modeling import losses as l\n'
              'def own():\n  return helper()\n'
              'def other():\n  return l.segmentation_loss(1, 2, 3)\n'
              'def handed(loss):\n  return loss(1, 2, 3)\n')
    configurables = {'lib': {'helper'},
                     'official_seg.modeling.losses': {'segmentation_loss'}}
    self.assertEqual(configurable_calls(path, 'lib', configurables),
                     {'lib.helper',
                      'official_seg.modeling.losses.segmentation_loss'})

  def test_bindings_are_read_by_name_in_the_gin_modules_alone(self):
    found = []
    for path in _modules():
      relative = os.path.relpath(path, _PACKAGE)
      if relative not in _BINDING_READERS and _calls(path, 'binding'):
        found.append(relative)
    self.assertEmpty(found)


if __name__ == '__main__':
  tf.test.main()
