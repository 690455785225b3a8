"""Finding and parsing gin files: the package's own and the user's."""

import logging
import os

import gin

# Registers every configurable before any file is parsed.
from official_seg.runtime import experiment  # pylint: disable=unused-import

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
    FileNotFoundError: neither exists; the message names both places.
  """
  if os.path.exists(path):
    return path
  relative = path[len('gin/'):] if path.startswith('gin/') else path
  shipped = os.path.join(gin_dir(), relative)
  if os.path.exists(shipped):
    return shipped
  raise FileNotFoundError(
      f'gin file {path!r} not found, neither as given nor as {shipped!r}.')


def parse(gin_files, gin_params, finalize=True):
  """Parses gin files then bindings (later ones win), and locks the config.

  Args:
    gin_files: list of paths; see `resolve_gin_file`.
    gin_params: list of binding strings, e.g. "TRAIN_STEPS=300".
    finalize: bool, lock the config against later changes.

  Raises:
    FileNotFoundError: a gin file does not exist.
    ValueError, KeyError, SyntaxError: gin's own errors, which name the file
      and line of a bad binding or an unknown configurable.
  """
  root_logger = logging.getLogger()  # gin logs the miss on the root logger.
  if not any(isinstance(f, _SearchMissFilter) for f in root_logger.filters):
    root_logger.addFilter(_SearchMissFilter())
  gin.add_config_file_search_path(gin_dir())
  files = [resolve_gin_file(path) for path in gin_files]
  gin.parse_config_files_and_bindings(files, gin_params,
                                      finalize_config=finalize)
