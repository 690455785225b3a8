"""The flags the binary and commands share: gin files, gin bindings, data folder.

Defined here alone: in the global flags when this module is first imported
(the binary's and tools/'), and in a command's own `flags.FlagValues` by
`define_gin_flags`. Only the binary, commands, tools/ and benchmark entry
points import it; library code takes these settings as arguments.

  FLAGS = flags.FlagValues()
  seg_flags.define_gin_flags(FLAGS)
  ...
  seg_flags.parse_gin(flag_values=FLAGS)
"""

from absl import app
from absl import flags

from official_seg.data import storage
from official_seg.runtime import gin_config

def define_gin_flags(flag_values):
  """Defines --gin_file, --gin_param and --data_dir in `flag_values`.

  Args:
    flag_values: a `flags.FlagValues`: the global one (the binary's), or a
      command's own.

  Returns:
    Their `flags.FlagHolder`s.
  """
  gin_file = flags.DEFINE_multi_string(
      'gin_file', None, 'gin file to parse, repeatable; later files win. '
      'Shipped files may be named relative to the package gin/ folder.',
      flag_values=flag_values)
  gin_param = flags.DEFINE_multi_string(
      'gin_param', [], 'gin binding, repeatable, e.g. "TRAIN_STEPS=300"; '
      'applied after every gin file.', flag_values=flag_values)
  data_dir = flags.DEFINE_string(
      'data_dir', None, 'Folder of the TFRecord shards; binds the DATA_DIR '
      'macro after every --gin_param.', flag_values=flag_values)
  return gin_file, gin_param, data_dir


GIN_FILE, GIN_PARAM, DATA_DIR = define_gin_flags(flags.FLAGS)


def _value(flag_values, name):
  return (flag_values or flags.FLAGS)[name].value


def gin_params(extra=(), flag_values=None):
  """The bindings to parse: --gin_param, then `extra`, then --data_dir's.

  Args:
    extra: list of str, a command's own bindings after the user's.
    flag_values: the `flags.FlagValues` holding the flags; default the
      global one.

  Returns:
    list of str; ends with `DATA_DIR = '<--data_dir>'` when it is given.
  """
  params = list(_value(flag_values, 'gin_param')) + list(extra)
  data_dir = _value(flag_values, 'data_dir')
  if data_dir:
    params.append(f'DATA_DIR = {data_dir!r}')
  return params


def parse_gin(gin_files=None, extra_params=(), finalize=True,
              flag_values=None):
  """Sets the object-store defaults, then parses gin with the flags.

  The defaults of `storage.GCS_PLUGIN_DEFAULTS` come first: a gs:// gin
  file, data or model dir would otherwise crash the process.

  Args:
    gin_files: list of str; default --gin_file.
    extra_params: list of str, see `gin_params`.
    finalize: bool, lock the config (see `gin_config.parse`).
    flag_values: see `gin_params`.

  Raises:
    FileNotFoundError, ValueError, KeyError, SyntaxError: see
      `gin_config.parse`.
  """
  storage.set_gcs_plugin_defaults()
  if gin_files is None:
    gin_files = _value(flag_values, 'gin_file')
  gin_config.parse(list(gin_files or []),
                   gin_params(extra_params, flag_values), finalize=finalize)


def dataset_with(gin_files=None, num_classes=None, split=None,
                 ignore_label=None, flag_values=None):
  """The `DatasetInfo` of the flags, for the dataset tools.

  Sets the object-store defaults, then reads `gin_config.dataset_with` of
  the gin files, --gin_param and --data_dir (which wins over DATA_DIR even
  without gin files).

  Args:
    gin_files: list of str, maybe empty; default --gin_file.
    num_classes, split, ignore_label: a command's own flags, see
      `gin_config.dataset_with`.
    flag_values: see `gin_params`.

  Returns:
    See `gin_config.dataset_with`.
  """
  storage.set_gcs_plugin_defaults()
  if gin_files is None:
    gin_files = _value(flag_values, 'gin_file')
  return gin_config.dataset_with(
      list(gin_files or []), gin_params(flag_values=flag_values),
      num_classes=num_classes, data_dir=_value(flag_values, 'data_dir'),
      split=split, ignore_label=ignore_label)


def check_run_tool_args(argv, flag_values=None):
  """Stops a command that scores a run's model without the run's gin files.

  Args:
    argv: the command's main() arguments.
    flag_values: see `gin_params`.

  Raises:
    app.UsageError: arguments beyond the program, or no --gin_file (they
      name the dataset and its eval preprocessing).
  """
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  if not _value(flag_values, 'gin_file'):
    raise app.UsageError('Give the gin files of the run, e.g. '
                         '--gin_file=gin/experiments/quickstart.gin')
