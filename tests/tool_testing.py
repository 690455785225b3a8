"""A tool of tools/ loaded and its main() run in-process, beside other tools."""

import contextlib
import importlib.util
import io
import os

from absl import flags
from absl.testing import flagsaver
import gin

from tests import testing_utils

# FlagValues' records of which module defined or adopted which flags.
_MODULE_DICTS = ('__flags_by_module', '__flags_by_module_id',
                 '__key_flags_by_module')


class Run:
  """What one `run` of a tool's main() returned and printed."""

  def __init__(self, status, stdout, stderr):
    self.status, self.stdout, self.stderr = status, stdout, stderr


def _module_dicts(registry):
  return {key: {module: list(entries) for module, entries in
                registry.__dict__[key].items()} for key in _MODULE_DICTS}


def load(name):
  """tools/<name>.py as a module whose flags live aside from the registry.

  Tools define flags of the same names (--output_dir, --layout...) in the
  one absl registry, and pytest imports every test file into each worker.
  So the tool's own flags leave the registry once it is loaded; `run` puts
  them back for the length of one call. Flags of modules that it imports
  stay, as after any import.

  Args:
    name: the tool's file name without `.py`.

  Returns:
    The module; `run(module, ...)` calls its main().
  """
  path = os.path.join(testing_utils.REPO, 'tools', name + '.py')
  spec = importlib.util.spec_from_file_location(f'{name}_tool', path)
  module = importlib.util.module_from_spec(spec)
  registry = flags.FLAGS
  before, module_dicts = dict(registry._flags()), _module_dicts(registry)  # pylint: disable=protected-access
  overridable = {flag: flag.allow_override for flag in before.values()}
  for flag in overridable:
    flag.allow_override = True  # The tool's flag replaces another's name.
  try:
    spec.loader.exec_module(module)
  finally:
    for flag, allow in overridable.items():
      flag.allow_override = allow
  own = registry.flags_by_module_dict().get(module.__name__, [])
  module.tool_flags = {name: flag for name, flag in registry._flags().items()  # pylint: disable=protected-access
                       if flag in own}
  for key, saved in module_dicts.items():
    dicts = {owner: entries for owner, entries in registry.__dict__[key].items()
             if owner != module.__name__}
    dicts.update(saved)
    registry.__dict__[key] = dicts
  for flag_name in module.tool_flags:
    if flag_name in before:
      registry._flags()[flag_name] = before[flag_name]  # pylint: disable=protected-access
    else:
      del registry._flags()[flag_name]  # pylint: disable=protected-access
  return module


@contextlib.contextmanager
def _tool_flags(module):
  """The registry holding `module`'s flags under their names."""
  registry = flags.FLAGS._flags()  # pylint: disable=protected-access
  others = {name: registry.get(name) for name in module.tool_flags}
  registry.update(module.tool_flags)
  try:
    yield
  finally:
    for name, flag in others.items():
      if flag is None:
        del registry[name]
      else:
        registry[name] = flag


def run(module, **flag_values):
  """main() of a `load`ed tool, with these flags set; returns a `Run`.

  As in a process of its own, the tool starts with an empty gin config; the
  config it parses ends with the call. `status` is the exit status that
  app.run would give: what main() returned, or its SystemExit's code.
  """
  stdout, stderr = io.StringIO(), io.StringIO()
  gin.clear_config()
  try:
    with _tool_flags(module), flagsaver.flagsaver(**flag_values):
      with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(
          stderr):
        try:
          status = module.main([module.__name__])
        except SystemExit as exit_:  # As a mistake ends a tool's process.
          status = exit_.code
  finally:
    gin.clear_config()
  # app.run exits with main's value, and a main that returns nothing with 0.
  return Run(0 if status is None else status, stdout.getvalue(),
             stderr.getvalue())
