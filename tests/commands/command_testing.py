"""A command of official_seg/commands/ run in-process or as a process."""

import contextlib
import io
import subprocess
import sys

from absl import flags
import gin

from tests import testing_utils


class Run:
  """What one run of a command returned and printed."""

  def __init__(self, status, stdout, stderr):
    self.status, self.stdout, self.stderr = status, stdout, stderr


def argv(command, *args, **flag_values):
  """The command line of `command` with these flags (None: left unset).

  Args:
    command: a module of official_seg/commands/.
    *args: further arguments, as given.
    **flag_values: flag name to value; a bool is `--name` or `--noname`, a
      list repeats a multi flag or joins a list flag with commas.

  Returns:
    list of str, the program first.
  """
  line = [command.__name__]
  for name, value in flag_values.items():
    flag = command.FLAGS[name]  # A KeyError names a flag it lacks.
    if value is None:
      continue
    if isinstance(value, bool):
      line.append(f'--{name}' if value else f'--no{name}')
    elif isinstance(value, (list, tuple)) and isinstance(flag,
                                                         flags.MultiFlag):
      line += [f'--{name}={item}' for item in value]
    elif isinstance(value, (list, tuple)):
      line.append(f'--{name}={",".join(str(item) for item in value)}')
    else:
      line.append(f'--{name}={value}')
  return line + list(args)


def run(command, *args, **flag_values):
  """`command.main` on `argv(...)` in this process; returns a `Run`.

  As in a process of its own, the command starts with an empty gin config
  and its flags at their defaults; the config it parses ends with the call.
  """
  stdout, stderr = io.StringIO(), io.StringIO()
  gin.clear_config()
  try:
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(
        stderr):
      status = command.main(argv(command, *args, **flag_values))
  finally:
    gin.clear_config()
  return Run(status, stdout.getvalue(), stderr.getvalue())


def run_process(command, *args, **flag_values):
  """`python -m <command>` with these flags, from the repository root.

  Returns:
    The `subprocess.CompletedProcess`, its output as text.
  """
  line = argv(command, *args, **flag_values)
  return subprocess.run([sys.executable, '-m', line[0]] + line[1:],
                        capture_output=True, text=True, cwd=testing_utils.REPO,
                        check=False)
