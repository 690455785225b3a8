"""Whole-file writes and path rules that hold on local disks and object stores alike."""

import os
import threading
import uuid

import tensorflow as tf

from official_seg import validation

# The file systems with `scheme://` paths that TensorFlow serves (gs://, s3://,
# hdfs://, ram://) keep objects: no append, and a rename is a copy and a
# delete, so a reader may see the target missing or doubled in between.
_SCHEME = '://'
# Environment the gs:// file system of tensorflow-io-gcs-filesystem reads when
# it starts. Its 0.37.1 release passes each one unchecked to a string parser,
# so an unset variable crashes the process (SIGSEGV) at the first gs://
# access under TF_USE_MODULAR_FILESYSTEM=1. The values are the client's own
# defaults but for two. The block size: with the block cache off (max size 0)
# its read buffer copies from a wrong offset when a read goes back in a file,
# as reading a checkpoint's index does (SIGSEGV while saving a checkpoint);
# block size 0 sends every read straight to the store, uncached. The stat
# cache's age: the client's writer leaves that cache alone, so a read of a
# file the process has just rewritten shorter (best/best.json) expects the
# old length and fails; age 0 reads each size from the store.
GCS_PLUGIN_DEFAULTS = {
    'GCS_READ_CACHE_BLOCK_SIZE_MB': '0',
    'GCS_READ_CACHE_MAX_SIZE_MB': '0',
    'GCS_READ_CACHE_MAX_STALENESS': '0',
    'GCS_STAT_CACHE_MAX_AGE': '0',
    'GCS_STAT_CACHE_MAX_ENTRIES': '1024',
}
# How long a model dir's write probe may take by default: object-store
# clients retry an unreachable endpoint for minutes.
PROBE_TIMEOUT_SECS = 120


def is_object_store(path):
  """True for a `scheme://` path (gs://, s3://, ...), False for a local one."""
  return _SCHEME in str(path)


def is_absolute(path):
  """True for a local absolute path and for any `scheme://` path."""
  return is_object_store(path) or os.path.isabs(path)


def set_gcs_plugin_defaults(environ=None):
  """Sets the unset `GCS_PLUGIN_DEFAULTS` in `environ` (default os.environ).

  Call it before the first gs:// access; variables set already are kept.
  """
  environ = os.environ if environ is None else environ
  for name, value in GCS_PLUGIN_DEFAULTS.items():
    environ.setdefault(name, value)


def write_whole(path, contents):
  """Writes `contents` (str or bytes) as the whole of `path`, never partly.

  An object store replaces an object only when its upload completes, so the
  file is written in place. A local disk would show a half-written file to a
  reader or after a crash, so the file is written beside it under a unique
  name (writers may race) and renamed over it, which POSIX makes atomic.

  Args:
    path: str, local or `scheme://` path; its folder is created.
    contents: str or bytes.

  Returns:
    `path`.
  """
  tf.io.gfile.makedirs(os.path.dirname(path))
  mode = 'wb' if isinstance(contents, bytes) else 'w'
  if is_object_store(path):
    with tf.io.gfile.GFile(path, mode) as f:
      f.write(contents)
    return path
  temporary = f'{path}.tmp-{uuid.uuid4().hex}'
  with tf.io.gfile.GFile(temporary, mode) as f:
    f.write(contents)
  tf.io.gfile.rename(temporary, path, overwrite=True)
  return path


def copy_whole(source, target):
  """Copies `source` to `target` the way `write_whole` writes: never partly.

  Raises:
    tf.errors.NotFoundError: `source` is gone.
  """
  if is_object_store(target):
    tf.io.gfile.copy(source, target, overwrite=True)
    return target
  temporary = f'{target}.tmp-{uuid.uuid4().hex}'
  tf.io.gfile.copy(source, temporary, overwrite=True)
  tf.io.gfile.rename(temporary, target, overwrite=True)
  return target


def copy_folder_whole(source, target, last=None):
  """Copies the files under local folder `source` to `target`, each whole.

  A folder cannot be renamed into place on an object store (each object is
  copied and deleted, one by one), so a reader may meet a half-copied
  folder; the file named `last` is copied after all others, so a reader
  that waits for it finds the rest.

  Args:
    source: str, a local folder.
    target: str, local or `scheme://` folder; created.
    last: optional file name (relative to `source`) copied last.
  """
  names = sorted(os.path.relpath(os.path.join(root, name), source)
                 for root, _, files in tf.io.gfile.walk(source)
                 for name in files)
  for name in sorted(names, key=lambda name: name == last):
    tf.io.gfile.makedirs(os.path.dirname(os.path.join(target, name)))
    copy_whole(os.path.join(source, name), os.path.join(target, name))
  return target


def _probe(directory):
  tf.io.gfile.makedirs(directory)
  probe = os.path.join(directory, f'.write-probe-{uuid.uuid4().hex}')
  with tf.io.gfile.GFile(probe, 'w') as f:
    f.write('probe')
  tf.io.gfile.remove(probe)


def check_writable(directory, timeout_secs):
  """Creates `directory` and writes and deletes a probe file in it.

  Object-store clients retry an unreachable endpoint for many minutes
  (google-cloud-cpp's default policy allows 15), so the probe runs in a
  daemon thread and a store that does not answer in time is an error too.

  Args:
    directory: str, local or `scheme://` folder.
    timeout_secs: float, how long the probe may take.

  Raises:
    tf.errors.OpError: the folder cannot be created, written or deleted from
      (missing bucket, no permission, read-only disk).
    TimeoutError: the store did not answer within `timeout_secs`.
  """
  outcome = []

  def probe():
    try:
      _probe(directory)
      outcome.append(None)
    except Exception as error:  # pylint: disable=broad-except
      outcome.append(error)  # Raised in the caller's thread below.

  thread = threading.Thread(target=probe, daemon=True)
  thread.start()
  thread.join(timeout_secs)
  if not outcome:
    raise TimeoutError(f'{directory} did not answer a write within '
                       f'{timeout_secs:g} s')
  if outcome[0] is not None:
    raise outcome[0]


def check_model_dir(model_dir, timeout_secs=PROBE_TIMEOUT_SECS):
  """Creates --model_dir and writes a probe file in it, before any work.

  Raises:
    validation.RunError: the model dir cannot be created or written (a
      read-only disk, a missing bucket, no permission, an unreachable
      store); the message names it.
  """
  try:
    check_writable(model_dir, timeout_secs)
  except (tf.errors.OpError, TimeoutError) as error:
    reason = getattr(error, 'message', None) or str(error)
    raise validation.RunError(
        f'--model_dir={model_dir} cannot be created or written: '
        f'{reason}') from error


def _kind(folder):
  return 'folder' if folder else 'file'


def check_input(flag, path, folder):
  """Raises unless `path` is an existing folder (or file), before any work.

  Args:
    flag: str, how the message names the setting, e.g. '--label_dir'.
    path: str, local or `scheme://`.
    folder: bool, whether a folder (else a file) is expected.

  Raises:
    validation.MissingFileError: nothing is at `path`.
    validation.ConfigurationError: a file where a folder is expected, or
      the other way round.
  """
  if not tf.io.gfile.exists(path):
    raise validation.MissingFileError(
        f'{flag}={path}: no such {_kind(folder)}.')
  if tf.io.gfile.isdir(path) != folder:
    raise validation.ConfigurationError(
        f'{flag}={path} is a {_kind(not folder)}, not a {_kind(folder)}.')


def check_output(flag, path, folder):
  """Raises unless `path` is, or can be created as, a folder (or file).

  On a local disk a path that does not exist yet needs a folder as its
  nearest existing ancestor; `scheme://` paths have no folders to check.

  Args:
    flag: str, how the message names the setting, e.g. '--output_dir'.
    path: str, local or `scheme://`.
    folder: bool, whether a folder (else a file) will be written there.

  Raises:
    validation.ConfigurationError: the path, or the ancestor it would be
      created in, is of the wrong kind.
  """
  if tf.io.gfile.exists(path):
    if tf.io.gfile.isdir(path) != folder:
      raise validation.ConfigurationError(
          f'{flag}={path} is a {_kind(not folder)}; give a {_kind(folder)} '
          'to write.')
    return
  if is_object_store(path):
    return
  ancestor = os.path.dirname(os.path.abspath(path))
  while not os.path.exists(ancestor):
    ancestor = os.path.dirname(ancestor)
  if not os.path.isdir(ancestor):
    raise validation.ConfigurationError(
        f'{flag}={path} cannot be created: {ancestor} is a file.')
