"""The memory a training step takes on this machine: the process's peak resident size around it, and the variables' bytes."""

import dataclasses

import numpy as np

_STATUS = '/proc/self/status'
_CLEAR_REFS = '/proc/self/clear_refs'
# Writing this to clear_refs resets the peak resident size (Linux 4.0+).
_RESET_PEAK = '5'
_MIB = 2.0**20


def read_status(text):
  """(resident bytes, peak resident bytes) from /proc/<pid>/status text.

  Args:
    text: str, the file's contents, whose VmRSS and VmHWM lines are in kB.

  Returns:
    (int, int), or None where the text lacks them (not Linux).
  """
  found = {}
  for line in text.splitlines():
    key, _, value = line.partition(':')
    if key in ('VmRSS', 'VmHWM'):
      found[key] = int(value.split()[0]) * 1024
  if len(found) < 2:
    return None
  return found['VmRSS'], found['VmHWM']


def available_bytes(meminfo):
  """MemAvailable of /proc/meminfo text in bytes, or None where it lacks it."""
  for line in meminfo.splitlines():
    key, _, value = line.partition(':')
    if key == 'MemAvailable':
      return int(value.split()[0]) * 1024
  return None


def _status():
  try:
    with open(_STATUS) as f:
      return read_status(f.read())
  except OSError:
    return None


def _reset_peak():
  """Starts a new peak at the present size; False where the kernel refuses."""
  try:
    with open(_CLEAR_REFS, 'w') as f:
      f.write(_RESET_PEAK)
    return True
  except OSError:
    return False


@dataclasses.dataclass
class PeakMeter:
  """The process's peak resident bytes over a block, and its size before.

  Usage: `with meter: run steps`, then `meter.before`, `meter.peak`, or None
  where /proc gives no sizes; `meter.reset` says whether the peak was reset
  at the start (else it is the process's peak since it started).
  """
  before: int = None
  peak: int = None
  reset: bool = False

  def __enter__(self):
    status = _status()
    self.before = status and status[0]
    self.reset = bool(status) and _reset_peak()
    return self

  def __exit__(self, *unused):
    status = _status()
    self.peak = status and status[1]
    return False


def variable_bytes(shapes_and_sizes):
  """Bytes the variables hold: sum of elements x item size.

  Args:
    shapes_and_sizes: iterable of (shape, bytes per element).

  Returns:
    int.
  """
  return int(sum(int(np.prod(shape)) * size
                 for shape, size in shapes_and_sizes))


def report_line(meter, variables, batch):
  """The dry run's line on memory.

  Args:
    meter: `PeakMeter` around the warm-up and timed steps.
    variables: int, bytes of every global and local variable (weights,
      optimizer slots, moving averages, the sums of gradient accumulation
      and the metrics' counts).
    batch: int, the images of the step measured.

  Returns:
    str.
  """
  head = f'memory: variables {variables / _MIB:.1f} MiB'
  if meter.peak is None:
    return head + '; the step\'s peak is not measured (no /proc here)'
  since = ('' if meter.reset else
           ' (the kernel refused a reset: the peak since the process began)')
  return (f'{head}; a training step of {batch} images took this process from '
          f'{meter.before / _MIB:.0f} MiB to a peak of '
          f'{meter.peak / _MIB:.0f} MiB{since}: '
          f'{(meter.peak - meter.before) / _MIB:.0f} MiB for activations, '
          'gradients and workspace on this machine\'s CPU')
