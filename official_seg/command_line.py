"""The exit contract of the binary and every command: an error to its message and status.

  status 0    done
  status 2    a mistake in a setting: our `validation.ConfigurationError`, an
              absl flag error or `app.UsageError`; stderr `Invalid
              configuration:` and one line per problem
  status 1    a fault met while running: our `validation.RunError`; stderr
              `Error: <what and where>`
  status 143  preempted (`validation.Preempted`); rerunning resumes
  status 1    anything else is a bug: its full traceback, then what to report

This module is the one place that maps exceptions to exit statuses.
"""

import signal
import sys
import traceback

from absl import app
from absl import flags
from absl import logging

from official_seg import validation

MISTAKE = 2
FAULT = 1
BUG = 1
# 128 + SIGTERM, the status a shell reports for a process SIGTERM ended:
# wrappers that treat "terminated" as "preempted, restart me" keep working.
PREEMPTED = 128 + signal.SIGTERM
_HELP = ('--help', '-h', '-?', '--helpshort', '--helpfull')


def _print(text):
  print(text, file=sys.stderr)
  sys.stderr.flush()


def _bug_report(argv):
  """The last line of a bug's report: the command line to attach."""
  return ('This is a bug in official_seg, not a mistake in your settings. '
          'Please report it with the traceback above and the command line: '
          f'{" ".join(argv)}')


def _invalid(text):
  _print(f'Invalid configuration:\n{text}')
  return MISTAKE


def call(main, argv, bug_report=None):
  """Runs `main(argv)`; returns the exit status of what it returned or raised.

  Args:
    main: callable taking argv, returning None (status 0) or an int status.
    argv: list of str, the program first.
    bug_report: optional callable returning the last line printed after a
      bug's traceback; default names the command line.

  Returns:
    int, the exit status (see the module docstring).
  """
  try:
    status = main(argv)
  except validation.ConfigurationError as error:
    return _invalid(validation.message(error))
  except (app.UsageError, flags.Error) as error:
    return _invalid(str(error))
  except validation.RunError as error:
    _print(f'Error: {validation.message(error)}')
    return FAULT
  except validation.Preempted as preempted:
    logging.warning('Preempted: %s Exiting with status %d; run the same '
                    'command again to resume.', preempted, PREEMPTED)
    return PREEMPTED
  except Exception:  # pylint: disable=broad-except
    traceback.print_exc()
    _print(bug_report() if bug_report else _bug_report(argv))
    return BUG
  return 0 if status is None else status


def _usage(flag_values, doc):
  """A command's --help: its docstring, then its flags."""
  return f'{doc or ""}\nflags:\n{flag_values.get_help()}'


def run(main, flag_values, argv=None, doc=None):
  """Parses argv into a command's own flags, then `call`s `main`.

  An argument that is not a flag is a mistake (status 2).

  A command keeps its flags in a `flags.FlagValues` of its own, so that
  commands defining flags of one name (--output_dir) live in one process;
  they start from their defaults at each call.

  Args:
    main: callable taking the arguments left after the flags.
    flag_values: the command's `flags.FlagValues`.
    argv: list of str, the program first; default sys.argv.
    doc: str, the command's usage for --help (its module docstring).

  Returns:
    int, the exit status.
  """
  argv = list(sys.argv if argv is None else argv)
  if any(arg in _HELP for arg in argv[1:]):
    print(_usage(flag_values, doc))
    return 0
  flag_values.unparse_flags()
  try:
    rest = flag_values(argv)
  except flags.Error as error:
    return _invalid(str(error))
  if len(rest) > 1:  # Commands take flags only.
    return _invalid(f'Unexpected arguments: {rest[1:]}')
  return call(main, rest)


def run_binary(main, bug_report):
  """The binary's entry point: absl's app.run, our exit contract."""

  def parse(argv):
    try:
      return flags.FLAGS(argv)
    except flags.Error as error:
      sys.exit(_invalid(str(error)))

  app.run(lambda argv: call(main, argv, bug_report), flags_parser=parse)
