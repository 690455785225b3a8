"""The one way to read gin: find and parse files, and read back a binding.

Configurables are registered by the gin files themselves: each shipped file
starts with `import official_seg...` lines naming the modules it binds, so
parsing a dataset file loads the data package alone, and no caller has to
import modules for their side effects first.
"""

import contextlib
import copy
import dataclasses
import difflib
import logging
import os
import re
import sysconfig

import gin

from official_seg import validation
from official_seg.data import dataset_info

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _SearchMissFilter(logging.Filter):
  """Drops gin's 'Path not found' log of a search-path miss.

  gin tries each search path in turn and logs an error for every path a file
  is not under before it finds the file under the next one; that miss is not
  an error. A file found under no path still raises.
  """

  def filter(self, record):
    return not (record.pathname.endswith(os.path.join('gin', 'resource_reader.py'))
                and str(record.msg).startswith('Path not found'))


def gin_dir():
  """The folder of the shipped gin files (installed, or the source tree's)."""
  installed = os.path.join(_PACKAGE_DIR, 'gin')
  if os.path.isdir(installed):
    return installed
  return os.path.join(os.path.dirname(_PACKAGE_DIR), 'gin')


def resolve_gin_file(path):
  """Returns `path` if it exists, else the shipped file of that name.

  `gin/experiments/quickstart.gin`, `experiments/quickstart.gin` and an
  absolute path all work, from any working directory.

  Raises:
    validation.ConfigurationError: neither exists; the message names both
      places.
  """
  if os.path.exists(path):
    return path
  relative = path[len('gin/'):] if path.startswith('gin/') else path
  shipped = os.path.join(gin_dir(), relative)
  if os.path.exists(shipped):
    return shipped
  raise validation.ConfigurationError(
      f'gin file {path!r} not found, neither as given nor as {shipped!r}.')


def parse(gin_files, gin_params, finalize=True):
  """Parses gin files then bindings (later ones win), and locks the config.

  Args:
    gin_files: list of paths; see `resolve_gin_file`.
    gin_params: list of binding strings, e.g. "TRAIN_STEPS=300".
    finalize: bool, lock the config against later changes.

  Raises:
    validation.ConfigurationError: a gin file does not exist, or gin itself
      rejects a binding, a file or an import line (its message names the
      file and line). An error raised by code that a gin file imports is a
      bug there and propagates as it is, with its traceback.
  """
  root_logger = logging.getLogger()  # gin logs the miss on the root logger.
  if not any(isinstance(f, _SearchMissFilter) for f in root_logger.filters):
    root_logger.addFilter(_SearchMissFilter())
  gin.add_config_file_search_path(gin_dir())
  files = [resolve_gin_file(path) for path in gin_files]
  try:
    gin.parse_config_files_and_bindings(files, gin_params,
                                        finalize_config=finalize)
  except (ValueError, LookupError, SyntaxError, NameError, AttributeError,
          ImportError, OSError) as error:
    if not _raised_by_gin(error):
      raise
    raise validation.ConfigurationError(str(error)) from error


@contextlib.contextmanager
def parsed_alone(gin_files, gin_params):
  """Parses a config from a clean state for the block, and clears it after.

  For a process that runs several experiments in turn (cross-validation):
  each starts from nothing another left behind.

  Args:
    gin_files: list of paths; see `parse`.
    gin_params: list of binding strings.
  """
  gin.clear_config()
  try:
    parse(gin_files, gin_params)
    yield
  finally:
    gin.clear_config()


_GIN_DIR = os.path.dirname(os.path.abspath(gin.__file__))
# gin's own frames may pass through the standard library (contextlib) and
# Python's import machinery.
_GIN_FRAMES = (_GIN_DIR, '<frozen ', sysconfig.get_paths()['stdlib'])


def _raised_by_gin(error):
  """Whether gin's own code raised `error`, not a module a gin file imports.

  Below gin's first frame, an import line's failure runs only Python's
  import machinery (a module that does not exist: the user's typo) or also
  the imported module's own code (a bug there, or a missing dependency).
  """
  frames = [tb.tb_frame.f_code.co_filename
            for tb in _walk(error.__traceback__)]
  inside = [f for f in frames if f.startswith(_GIN_DIR)]
  if not inside:
    return False
  below = frames[frames.index(inside[0]):]
  return all(f.startswith(_GIN_FRAMES) for f in below)


def _walk(traceback):
  while traceback is not None:
    yield traceback
    traceback = traceback.tb_next


_UNBOUND = object()


def binding(selector, scope=None, default=_UNBOUND):
  """The value `configurable.parameter` receives when called in `scope`.

  For tools and reports that must show a setting; library code takes its
  settings as arguments instead. Macros and references are resolved, and
  unscoped bindings are inherited, exactly as when the configurable runs.

  Args:
    selector: str, e.g. 'build_estimator.train_batch_size'.
    scope: optional gin scope, e.g. 'eval'.
    default: returned when nothing is bound; without it that is an error.

  Returns:
    The bound value.

  Raises:
    ValueError: nothing binds `selector` and no default is given; the
      message names the binding.
  """
  configurable, _, parameter = selector.rpartition('.')
  name = f'{scope}/{configurable}' if scope else configurable
  try:
    bindings = gin.get_bindings(name, resolve_references=False)
  except ValueError:  # The configurable is not registered.
    bindings = {}
  if parameter in bindings:
    # gin resolves references and macros when it copies them, as get_bindings
    # does; copying this parameter alone leaves the others unevaluated.
    return copy.deepcopy(bindings[parameter])
  if default is not _UNBOUND:
    return default
  raise validation.ConfigurationError(
      f'No gin binding sets {name}.{parameter}; bind it in a gin '
      'file or with --gin_param.')


def read_dataset(gin_files, gin_params=()):
  """Parses a dataset's gin files (not locked) and builds its `DatasetInfo`.

  Args:
    gin_files: list of paths: a dataset file, or an experiment that
      includes one; `datasets/dataset.gin` is parsed first.
    gin_params: list of binding strings applied after the files.

  Returns:
    The `dataset_info.DatasetInfo`.

  Raises:
    ValueError: the files do not set NUM_CLASSES; the message names them.
  """
  parse(['datasets/dataset.gin'] + list(gin_files), list(gin_params),
        finalize=False)
  if binding('DatasetInfo.num_classes', default=None) is None:
    raise validation.ConfigurationError(
        f'The gin files {list(gin_files)} do not set '
        'NUM_CLASSES; include a dataset file such as '
        'datasets/pascal_voc.gin.')
  return dataset_info.DatasetInfo()


def dataset_with(gin_files, gin_params=(), num_classes=None, data_dir=None,
                 split=None, ignore_label=None):
  """The `DatasetInfo` of the gin files (if any), given values winning.

  For the dataset tools, whose flags may name the data instead of a gin
  file or override it.

  Args:
    gin_files: list of paths, maybe empty (see `read_dataset`).
    gin_params: list of binding strings applied after the files.
    num_classes: optional int.
    data_dir: optional str.
    split: optional str, becomes `train_split`: the split a tool reads.
    ignore_label: optional int; default the files', else 255.

  Returns:
    A `dataset_info.DatasetInfo`, whose class names are the files' only
    when their number of classes stands; fields nothing gives are None.
    None when nothing gives the number of classes.
  """
  info = read_dataset(gin_files, gin_params) if gin_files else None
  num_classes = num_classes or (info and info.num_classes)
  if ignore_label is None:
    ignore_label = info.ignore_label if info else 255
  fields = dict(
      num_classes=num_classes, ignore_label=ignore_label,
      # Class names of the gin files fit only their own number of classes.
      class_names=(info.class_names if info and
                   info.num_classes == num_classes else None),
      data_dir=data_dir or (info and info.data_dir),
      train_split=split or (info and info.train_split))
  if info:
    return dataclasses.replace(info, **fields)
  return dataset_info.DatasetInfo(**fields) if num_classes else None


def macro_value(name, default=_UNBOUND):
  """The value of macro `name`, or `default` when it is not set."""
  try:
    return gin.query_parameter(f'%{name}')
  except ValueError:
    if default is _UNBOUND:
      raise
    return default


def macro_of(selector, scope=None):
  """The macro a binding takes its value from (e.g. 'TRAIN_STEPS'), or None.

  Lets a message name what the user set: `TRAIN_BATCH_SIZE`, not only
  `build_estimator.train_batch_size`.
  """
  configurable, _, parameter = selector.rpartition('.')
  name = f'{scope}/{configurable}' if scope else configurable
  try:
    value = gin.get_bindings(name, resolve_references=False).get(parameter)
  except ValueError:  # The configurable is not registered.
    return None
  text = str(value)
  return text[1:] if isinstance(value, gin.config.ConfigurableReference) and (
      text.startswith('%')) else None


_MACRO_SECTION = re.compile(r'# Macros:\n# =+\n(.*?)(?:\n\n|$)', re.S)
_REFERENCE = re.compile(r'%([A-Za-z_][\w.]*)')


def _set_and_referenced_macros():
  """(macros set, macros referenced) in the parsed config, from config_str."""
  text = gin.config_str()
  section = _MACRO_SECTION.search(text)
  names = set(re.findall(r'^([A-Za-z_][\w.]*) =', section.group(1), re.M)
              ) if section else set()
  # gin's own constant: a value a later binding must give (gin checks it).
  return names, set(_REFERENCE.findall(text)) - {'gin.REQUIRED'}


def _where_set(name, gin_files, gin_params):
  """'--gin_param' or 'file:line' of the last place that sets macro `name`."""
  assignment = re.compile(rf'^\s*{re.escape(name)}\s*=')
  if any(assignment.match(param) for param in gin_params):
    last = [param for param in gin_params if assignment.match(param)][-1]
    return f'--gin_param="{last.strip()}"'
  found = None
  pending = [resolve_gin_file(path) for path in gin_files]
  seen = set()
  while pending:
    path = pending.pop(0)
    if path in seen:
      continue
    seen.add(path)
    with open(path, encoding='utf-8') as f:
      for number, line in enumerate(f, start=1):
        include = re.match(r"\s*include\s+['\"](.+)['\"]", line)
        if include:
          pending.append(resolve_gin_file(include.group(1)))
        elif assignment.match(line):
          found = f'{path}:{number}'
  return found or 'a gin file'


def unused_macros(gin_files, gin_params):
  """One line per macro that is set but that no binding references.

  A macro nothing reads is almost always a typo (`TRAIN_STEP=10`) or a
  setting of a layer the experiment does not include; either way the run
  would silently ignore it.

  Args:
    gin_files: the gin files parsed, as given to `parse`.
    gin_params: the bindings parsed after them.

  Returns:
    list of str, e.g. "macro TRAIN_STEP (set by --gin_param=...) is used by
    nothing; did you mean TRAIN_STEPS?".
  """
  names, referenced = _set_and_referenced_macros()
  lines = []
  for name in sorted(names - referenced):
    close = difflib.get_close_matches(name, sorted(referenced), n=1)
    hint = f'; did you mean {close[0]}?' if close else '.'
    where = _where_set(name, gin_files, gin_params)
    lines.append(f'macro {name} (set at {where}) is used by no binding of '
                 f'this configuration{hint}')
  return lines


def missing_macros():
  """One line per macro that a binding references but nothing sets.

  Returns:
    list of str naming the macro and the bindings that read it.
  """
  names, referenced = _set_and_referenced_macros()
  text = gin.config_str()
  lines = []
  for name in sorted(referenced - names):
    users = re.findall(rf'^(\S+) = .*%{re.escape(name)}\b', text, re.M)
    lines.append(f'macro {name} is read by {", ".join(users) or "a binding"} '
                 'but set by no gin file or --gin_param.')
  return lines

