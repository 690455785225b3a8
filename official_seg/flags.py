"""The flags the binary and tools/ share: gin files, gin bindings, data folder.

Defined once, here, when this module is first imported: absl refuses a flag
defined twice in one process, and a test process may load the binary and
several tools. Only the binary, tools/ and benchmark entry points import it;
library code takes these settings as arguments.

  from official_seg import flags as seg_flags
  flags.adopt_module_key_flags(seg_flags)  # Lists them in the tool's --help.
  ...
  seg_flags.parse_gin()
"""

import contextlib
import sys

from absl import app
from absl import flags

from official_seg import validation
from official_seg.data import storage
from official_seg.runtime import gin_config

GIN_FILE = flags.DEFINE_multi_string(
    'gin_file', None, 'gin file to parse, repeatable; later files win. '
    'Shipped files may be named relative to the package gin/ folder.')
GIN_PARAM = flags.DEFINE_multi_string(
    'gin_param', [], 'gin binding, repeatable, e.g. "TRAIN_STEPS=300"; '
    'applied after every gin file.')
DATA_DIR = flags.DEFINE_string(
    'data_dir', None, 'Folder of the TFRecord shards; binds the DATA_DIR '
    'macro after every --gin_param.')


def gin_params(extra=()):
  """The bindings to parse: --gin_param, then `extra`, then --data_dir's.

  Args:
    extra: list of str, a tool's own bindings after the user's.

  Returns:
    list of str; ends with `DATA_DIR = '<--data_dir>'` when it is given.
  """
  params = list(GIN_PARAM.value) + list(extra)
  if DATA_DIR.value:
    params.append(f'DATA_DIR = {DATA_DIR.value!r}')
  return params


def parse_gin(gin_files=None, extra_params=(), finalize=True):
  """Sets the object-store defaults, then parses gin with the flags.

  The defaults of `storage.GCS_PLUGIN_DEFAULTS` come first: a gs:// gin
  file, data or model dir would otherwise crash the process.

  Args:
    gin_files: list of str; default --gin_file.
    extra_params: list of str, see `gin_params`.
    finalize: bool, lock the config (see `gin_config.parse`).

  Raises:
    FileNotFoundError, ValueError, KeyError, SyntaxError: see
      `gin_config.parse`.
  """
  storage.set_gcs_plugin_defaults()
  gin_files = GIN_FILE.value if gin_files is None else gin_files
  gin_config.parse(list(gin_files or []), gin_params(extra_params),
                   finalize=finalize)


def dataset_with(gin_files=None, num_classes=None, split=None,
                 ignore_label=None):
  """The `DatasetInfo` of the flags, for the dataset tools.

  Sets the object-store defaults, then reads `gin_config.dataset_with` of
  the gin files, --gin_param and --data_dir (which wins over DATA_DIR even
  without gin files).

  Args:
    gin_files: list of str, maybe empty; default --gin_file.
    num_classes, split, ignore_label: a tool's own flags, see
      `gin_config.dataset_with`.

  Returns:
    See `gin_config.dataset_with`.
  """
  storage.set_gcs_plugin_defaults()
  gin_files = GIN_FILE.value if gin_files is None else gin_files
  return gin_config.dataset_with(
      list(gin_files or []), gin_params(), num_classes=num_classes,
      data_dir=DATA_DIR.value, split=split, ignore_label=ignore_label)


def check_run_tool_args(argv):
  """Stops a tool that scores a run's model without the run's gin files.

  Args:
    argv: the tool's main() arguments.

  Raises:
    app.UsageError: arguments beyond the program, or no --gin_file (they
      name the dataset and its eval preprocessing).
  """
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  if not GIN_FILE.value:
    raise app.UsageError('Give the gin files of the run, e.g. '
                         '--gin_file=gin/experiments/quickstart.gin')


@contextlib.contextmanager
def mistakes_exit_2(program):
  """Exits with status 2 and `<program>: <message>` on a ConfigurationError.

  For a tool's main: a mistake in a flag, a path a flag names or a gin
  binding is reported alone; any other error keeps its traceback.

  Args:
    program: str, the tool's name for the message.

  Yields:
    Nothing.
  """
  try:
    yield
  except validation.ConfigurationError as error:
    print(f'{program}: {validation.message(error)}', file=sys.stderr)
    sys.exit(2)
