"""Our own errors (a user's mistake, a fault of the run) and the value checks each configurable owns."""

import inspect
import numbers
from typing import Callable, NamedTuple


class ConfigurationError(ValueError):
  """A setting (gin binding, flag or file named in one) the run cannot use.

  Its message is one line per problem, naming the binding, flag or file; the
  binary prints it alone and exits with status 2. Anything else raised is a
  bug and keeps its traceback.
  """


class RunError(Exception):
  """A fault met while running, not of a setting: corrupt data, a NaN loss,
  a model dir that cannot be written, a checkpoint of another configuration.

  Raised on purpose where we detect the fault; its message says what and
  where, and what to do. The binary and commands print it alone as
  `Error: <message>` and exit with status 1. Anything else is a bug.
  """


class Preempted(BaseException):
  """A SIGTERM stopped the run (`runtime.preemption`); the message says what
  was saved.

  A BaseException, like KeyboardInterrupt: no `except Exception` on its way
  out (TensorFlow's session wrappers have some) may swallow it.
  """


# The first data of our own tf.debugging.Assert checks: a failed assertion
# carrying it is a fault we detected (`failed_check`); any other
# InvalidArgumentError is a bug and keeps its traceback.
CHECK_MARK = 'official_seg check:'


def failed_check(error_message):
  """The text of one of our own failed graph checks, or None.

  Args:
    error_message: str, a `tf.errors.InvalidArgumentError`'s message.

  Returns:
    e.g. 'Label map of example a.png has values 7 ...': the Assert's data
    after `CHECK_MARK`; None when the error is not one of our checks.
  """
  for line in error_message.splitlines():
    _, found, data = line.partition('assertion failed: ')
    data = data.strip()
    if not (found and data.startswith('[') and data.endswith(']')):
      continue
    # Each datum is printed in brackets, a tensor's inside its own too.
    fields = data[1:-1].split('] [')
    if fields[0] == CHECK_MARK:
      return ' '.join(fields[1:])
  return None


def message(error):
  """The error's own message, without the call gin appends to it.

  gin appends 'In call to configurable ...' to errors raised inside
  configurables; the message before it names the binding or file already.

  Args:
    error: an exception.

  Returns:
    str.
  """
  return str(error).split('\n  In call to configurable')[0]


class MissingFileError(ConfigurationError, FileNotFoundError):
  """A file or folder a setting names is missing, or holds nothing usable.

  Raised on purpose where the setting is known, so that only our own
  missing-file errors are a user's mistake (exit status 2): a
  FileNotFoundError of any other cause is a bug. It is a FileNotFoundError
  too, for callers that catch one.
  """


class OutputExistsError(ConfigurationError, FileExistsError):
  """An output a command would write exists, and no flag allows replacing it.

  A FileExistsError too, for callers that catch one.
  """


class Expect(NamedTuple):
  """A test of one value and the form it expects, for the message."""
  test: Callable[[object], bool]
  form: str


class Relation(NamedTuple):
  """A test of several parameters together, e.g. min <= max."""
  parameters: tuple
  test: Callable[..., bool]
  form: str


def _number(value):
  return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _whole(value):
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


POSITIVE_WHOLE = Expect(lambda v: _whole(v) and v > 0,
                        'a positive whole number')
WHOLE_AT_LEAST_0 = Expect(lambda v: _whole(v) and v >= 0,
                          'a whole number >= 0')
POSITIVE_NUMBER = Expect(lambda v: _number(v) and v > 0, 'a positive number')
NUMBER_AT_LEAST_0 = Expect(lambda v: _number(v) and v >= 0, 'a number >= 0')
SIZE = Expect(lambda v: isinstance(v, (list, tuple)) and len(v) == 2 and all(
    POSITIVE_WHOLE.test(s) for s in v),
              'two positive whole numbers, [height, width]')
POSITIVE_NUMBERS = Expect(
    lambda v: isinstance(v, (list, tuple)) and len(v) > 0 and all(
        POSITIVE_NUMBER.test(s) for s in v), 'a list of positive numbers')

# The checks of each configurable (the undecorated function or class), as
# (dict of parameter to Expect, tuple of Relation).
_CHECKS = {}
UNSET = object()


def _parameters(target):
  function = target.__init__ if inspect.isclass(target) else target
  return set(inspect.signature(function).parameters) - {'self'}


def checked(relations=(), **expects):
  """Registers the checks of a configurable's values; apply beneath gin's.

  A check names the parameter it reads; one naming a parameter the
  configurable does not take fails here, at import, so that renaming a
  parameter cannot silently drop its check.

  Args:
    relations: `Relation`s between parameters.
    **expects: parameter name to `Expect`.

  Returns:
    A decorator returning its function or class unchanged.

  Raises:
    TypeError: a check names a parameter the configurable does not take.
  """
  def decorate(target):
    named = set(expects).union(*(r.parameters for r in relations))
    unknown = named - _parameters(target)
    if unknown:
      raise TypeError(f'{target.__qualname__} takes no parameter '
                      f'{sorted(unknown)}, which its checks name.')
    _CHECKS[target] = (dict(expects), tuple(relations))
    return target
  return decorate


def checked_targets():
  """The functions and classes that have checks (of the imported modules)."""
  return list(_CHECKS)


def checked_parameters(target):
  """The parameters `target`'s checks read (empty if it has none)."""
  expects, relations = _CHECKS.get(target, ({}, ()))
  return sorted(set(expects).union(*(r.parameters for r in relations)))


def problems(target, values, name, reported=None):
  """One line per value of `values` that `target`'s checks reject.

  Args:
    target: a function or class registered with `checked`.
    values: dict of parameter to value; a missing or `UNSET` one is skipped.
    name: callable, parameter -> how the message names it (e.g. the macro
      and the scoped binding).
    reported: optional set of parameters; lines only for checks that read
      one of them (the ones bound in a scope, not inherited into it).

  Returns:
    list of str.
  """
  expects, relations = _CHECKS.get(target, ({}, ()))
  lines = []
  reported = set(values) if reported is None else set(reported)
  for parameter, expect in expects.items():
    value = values.get(parameter, UNSET)
    if parameter not in reported:
      continue
    if value is not UNSET and not expect.test(value):
      lines.append(f'{name(parameter)} = {value!r}: expected {expect.form}.')
  for relation in relations:
    given = [values.get(p, UNSET) for p in relation.parameters]
    if not reported.intersection(relation.parameters) or any(
        v is UNSET or (p in expects and not expects[p].test(v))
        for p, v in zip(relation.parameters, given)):
      continue  # Unset, or of the wrong form, which has its own line.
    if not relation.test(*given):
      shown = ', '.join(f'{name(p)} = {v!r}'
                        for p, v in zip(relation.parameters, given))
      lines.append(f'{shown}: expected {relation.form}.')
  return lines


def check(target, **values):
  """Raises `ConfigurationError` if `target`'s checks reject `values`.

  For the configurable itself to call on its arguments; the check before a
  run calls `problems` for every binding instead.
  """
  target = inspect.unwrap(target)  # gin wraps functions, not classes.
  check_binding(target.__qualname__, target, values)


def one_of(choices):
  """An `Expect` of a value among `choices` (hashable values)."""
  choices = tuple(choices)
  return Expect(lambda v: isinstance(v, str) == isinstance(choices[0], str)
                and v in choices, f'one of {", ".join(map(repr, choices))}')


def check_binding(binding, target, values):
  """`check`, naming each parameter as `<binding>.<parameter>`.

  Args:
    binding: str, how a gin file names the configurable, e.g.
      'backbones.Xception'.
    target: the function or class registered with `checked`.
    values: dict of parameter to value.

  Raises:
    ConfigurationError: one line per rejected value.
  """
  lines = problems(target, values, lambda p: f'{binding}.{p}')
  if lines:
    raise ConfigurationError('\n'.join(lines))
