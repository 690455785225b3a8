"""A tool of tools/ loaded and its main() run in-process, beside other tools."""

import contextlib
import importlib.util
import io
import os

from absl import flags
from absl.testing import flagsaver
import gin

# The flags that tools share exist before any tool loads, so validators that a
# tool adds to them (a required --gin_file) are set aside with its own flags.
from official_seg import flags as seg_flags  # pylint: disable=unused-import
from tests import testing_utils

# FlagValues' records of which module defined or adopted which flags.
_MODULE_DICTS = ('__flags_by_module', '__flags_by_module_id',
                 '__key_flags_by_module')


class Run:
  """What one `run` of a tool's main() returned and printed."""

  def __init__(self, status, stdout, stderr):
    self.status, self.stdout, self.stderr = status, stdout, stderr


def _registered(registry):
  """{name: Flag} of the registry, which `run` changes in place."""
  return registry._flags()  # pylint: disable=protected-access


def _snapshot(registry):
  """What loading a tool changes in `registry`, to put back after it."""
  return dict(
      flags=dict(_registered(registry)),
      validators={flag: list(flag.validators)
                  for flag in _registered(registry).values()},
      modules={key: {module: list(entries) for module, entries in
                     registry.__dict__[key].items()} for key in _MODULE_DICTS})


def _exec_aside(spec, module, registry, define):
  """Runs the module's code and `define`; its flags replace any others'."""
  overridable = {flag: flag.allow_override
                 for flag in _registered(registry).values()}
  for flag in overridable:
    flag.allow_override = True
  try:
    spec.loader.exec_module(module)
    if define:
      getattr(module, define)()
  finally:
    for flag, allow in overridable.items():
      flag.allow_override = allow


def _set_aside(module, registry, before):
  """Moves `module`'s flags, and validators it added, out of `registry`."""
  own = registry.flags_by_module_dict().get(module.__name__, [])
  module.tool_flags = {name: flag for name, flag in
                       _registered(registry).items() if flag in own}
  # A tool may mark a shared flag (--gin_file) required.
  module.tool_validators = {}
  for flag, validators in before['validators'].items():
    if len(flag.validators) > len(validators):
      module.tool_validators[flag] = flag.validators[len(validators):]
      flag.validators[:] = validators
  for key, saved in before['modules'].items():
    dicts = {owner: entries for owner, entries in registry.__dict__[key].items()
             if owner != module.__name__}
    dicts.update(saved)
    registry.__dict__[key] = dicts
  for name in module.tool_flags:
    if name in before['flags']:
      _registered(registry)[name] = before['flags'][name]
    else:
      del _registered(registry)[name]


def load(name, folder='tools', define=None):
  """tools/<name>.py as a module whose flags live aside from the registry.

  Tools define flags of the same names (--output_dir, --layout...) in the
  one absl registry, and pytest imports every test file into each worker.
  So the tool's own flags, and validators it adds to shared flags, leave the
  registry once it is loaded; `run` puts them back for the length of one
  call. Flags of modules that it imports stay, as after any import.

  Args:
    name: the tool's file name without `.py`.
    folder: the tool's folder in the repository.
    define: the name of a function of the module that defines its flags,
      for a module that defines them only when run as a program.

  Returns:
    The module; `run(module, ...)` calls its main().
  """
  path = os.path.join(testing_utils.REPO, folder, name + '.py')
  spec = importlib.util.spec_from_file_location(f'{name}_tool', path)
  module = importlib.util.module_from_spec(spec)
  registry = flags.FLAGS
  before = _snapshot(registry)
  _exec_aside(spec, module, registry, define)
  _set_aside(module, registry, before)
  return module


@contextlib.contextmanager
def _tool_flags(module):
  """The registry holding `module`'s flags under their names."""
  registry = _registered(flags.FLAGS)
  others = {name: registry.get(name) for name in module.tool_flags}
  registry.update(module.tool_flags)
  for flag, validators in module.tool_validators.items():
    flag.validators.extend(validators)
  try:
    yield
  finally:
    for flag, validators in module.tool_validators.items():
      del flag.validators[len(flag.validators) - len(validators):]
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
