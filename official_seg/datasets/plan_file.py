"""A plan written as a gin layer: its choices, each with a reason, and their text."""

import collections

# includes: gin files (shipped, relative to gin/) the choice needs;
# bindings: list of (gin binding, value); reason: one line.
Choice = collections.namedtuple('Choice', ['includes', 'bindings', 'reason'])


class Reference(str):
  """A gin reference or macro, written without quotes."""

  def __repr__(self):
    return str(self)


def binding_lines(bindings):
  """Each (gin binding, value) as a line of gin: `name = repr(value)`."""
  return [f'{name} = {value!r}' for name, value in bindings]


def gin_text(header, includes, choices, extra_bindings=()):
  """The plan as a gin layer: comments, includes, then each choice.

  Args:
    header: list of str, the opening comment lines (without '#').
    includes: list of str, gin files the plan builds on, in order.
    choices: list of (title, `Choice`).
    extra_bindings: list of str, bindings given to the planner, last.

  Returns:
    str, ending in a newline.
  """
  lines = [f'# {line}' if line else '#' for line in header]
  lines += ['import official_seg.data.crop_sampling',
            'import official_seg.data.preprocess']
  every = list(includes) + [f for _, c in choices for f in c.includes]
  lines += [f'include {path!r}' for path in dict.fromkeys(every)]
  for title, choice in choices:
    lines += ['', f'# {title}: {choice.reason}']
    lines += binding_lines(choice.bindings)
  if extra_bindings:
    lines += ['', '# Given to the planner with --gin_param and --data_dir.']
    lines += list(extra_bindings)
  return '\n'.join(lines) + '\n'
