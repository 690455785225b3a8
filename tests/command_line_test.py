"""Tests for official_seg/command_line.py: each error to its message and exit status."""

import contextlib
import io

from absl import app
from absl import flags
import tensorflow as tf

from official_seg import command_line
from official_seg import validation


def _raising(error):
  def main(argv):
    del argv  # Unused.
    raise error
  return main


def _captured(function, *args, **kwargs):
  """(what `function` returned, its stdout, its stderr)."""
  stdout, stderr = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
    result = function(*args, **kwargs)
  return result, stdout.getvalue(), stderr.getvalue()


class CallTest(tf.test.TestCase):

  def test_a_mistake_is_its_lines_and_status_2(self):
    error = validation.ConfigurationError(
        'A = 1: expected a string.\nB = 2: expected a list.'
        "\n  In call to configurable 'x' (<function x at 0x1>)")
    status, _, stderr = _captured(command_line.call, _raising(error), ['x'])
    self.assertEqual(status, 2)
    self.assertEqual(stderr, 'Invalid configuration:\nA = 1: expected a '
                     'string.\nB = 2: expected a list.\n')

  def test_a_usage_error_is_a_mistake(self):
    status, _, stderr = _captured(
        command_line.call, _raising(app.UsageError('Give --x.')), ['x'])
    self.assertEqual((status, stderr), (2, 'Invalid configuration:\nGive --x.\n'))

  def test_a_fault_of_the_run_is_one_line_and_status_1(self):
    status, _, stderr = _captured(
        command_line.call,
        _raising(validation.RunError('Corrupt shard a.tfrecord.')), ['x'])
    self.assertEqual((status, stderr), (1, 'Error: Corrupt shard a.tfrecord.\n'))

  def test_a_preemption_is_status_143(self):
    status, _, stderr = _captured(
        command_line.call, _raising(validation.Preempted('SIGTERM.')), ['x'])
    self.assertEqual(status, 143)
    self.assertNotIn('Traceback', stderr)

  def test_any_other_error_keeps_its_traceback_then_the_report(self):
    for error in (ValueError('an output stride of 4'),
                  FileNotFoundError('a file of a bug'),
                  tf.errors.InvalidArgumentError(
                      None, None, 'assertion failed: [not ours]')):
      status, _, stderr = _captured(command_line.call, _raising(error),
                                    ['prog', '--flag=1'])
      self.assertEqual(status, 1)
      self.assertIn('Traceback (most recent call last)', stderr)
      self.assertIn(f'{type(error).__name__}: ', stderr)
      self.assertEqual(
          stderr.splitlines()[-1],
          'This is a bug in official_seg, not a mistake in your settings. '
          'Please report it with the traceback above and the command line: '
          'prog --flag=1')

  def test_the_binary_names_its_own_report(self):
    _, _, stderr = _captured(command_line.call, _raising(KeyError('k')),
                             ['prog'], bug_report=lambda: 'Report this.')
    self.assertEqual(stderr.splitlines()[-1], 'Report this.')

  def test_main_returns_its_status_and_none_is_0(self):
    self.assertEqual(command_line.call(lambda argv: None, ['x']), 0)
    self.assertEqual(command_line.call(lambda argv: 3, ['x']), 3)

  def test_an_exit_or_interrupt_is_not_taken_for_an_error(self):
    for error in (SystemExit(4), KeyboardInterrupt()):
      with self.assertRaises(type(error)):
        command_line.call(_raising(error), ['x'])


class RunTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.flag_values = flags.FlagValues()
    flags.DEFINE_integer('count', 4, 'How many.', flag_values=self.flag_values)
    flags.DEFINE_string('name', None, 'A name.', flag_values=self.flag_values)
    flags.mark_flag_as_required('name', flag_values=self.flag_values)
    self.seen = []

  def _main(self, argv):
    self.seen.append((argv, self.flag_values.count, self.flag_values.name))

  def _run(self, *args):
    return _captured(command_line.run, self._main, self.flag_values,
                     ['prog', *args], doc='Counts things.')

  def test_flags_are_parsed_and_start_from_their_defaults_each_call(self):
    self.assertEqual(self._run('--count=7', '--name=a')[0], 0)
    self.assertEqual(self._run('--name=b')[0], 0)
    self.assertEqual(self.seen, [(['prog'], 7, 'a'), (['prog'], 4, 'b')])

  def test_a_flag_mistake_is_status_2_before_main(self):
    for args, expected in ((['--name=a', '--count=x'], '--count'),
                           (['--name=a', '--colour=red'], 'colour'),
                           ([], '--name'),
                           (['--name=a', 'extra'],
                            "Unexpected arguments: ['extra']")):
      status, _, stderr = self._run(*args)
      self.assertEqual(status, 2, stderr)
      self.assertStartsWith(stderr, 'Invalid configuration:\n')
      self.assertIn(expected, stderr)
      self.assertNotIn('Traceback', stderr)
    self.assertEmpty(self.seen)

  def test_help_prints_the_usage_and_the_flags(self):
    status, stdout, _ = self._run('--help')
    self.assertEqual(status, 0)
    self.assertStartsWith(stdout, 'Counts things.')
    self.assertIn('--count: How many.', stdout)
    self.assertEmpty(self.seen)


if __name__ == '__main__':
  tf.test.main()
