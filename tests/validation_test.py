"""Tests for official_seg/validation.py: our own failed graph checks, choices."""

import tensorflow as tf

from official_seg import validation


def _failed_assert(data):
  """The message of the InvalidArgumentError a graph Assert of `data` raises."""

  @tf.function(autograph=False)
  def check():
    tf.debugging.Assert(tf.constant(False), data())
    return tf.constant(0)

  try:
    check()
  except tf.errors.InvalidArgumentError as error:
    return error.message
  raise AssertionError('the Assert passed')


class FailedCheckTest(tf.test.TestCase):

  def test_our_check_gives_its_data_as_one_line(self):
    message = _failed_assert(lambda: [
        validation.CHECK_MARK, 'Label map of example', tf.constant('a.png'),
        'has values', tf.constant([7, 9])])
    self.assertEqual(validation.failed_check(message),
                     'Label map of example a.png has values 7 9')

  def test_a_formatted_datum_keeps_its_brackets(self):
    message = _failed_assert(lambda: [
        validation.CHECK_MARK,
        tf.strings.format('at most {}; got {}.',
                          [tf.constant([41, 41]), tf.constant([[42, 30]])])])
    self.assertEqual(validation.failed_check(message),
                     'at most [41 41]; got [[42 30]].')

  def test_an_assert_of_anyone_else_is_not_ours(self):
    message = _failed_assert(lambda: ['Label map of example', tf.constant(1)])
    self.assertIn('assertion failed: [Label map of example] [1]', message)
    self.assertIsNone(validation.failed_check(message))
    self.assertIsNone(validation.failed_check('Input to reshape is a tensor'))


class ChoicesTest(tf.test.TestCase):

  def test_one_of_takes_only_its_choices(self):
    strides = validation.one_of((8, 16, 32))
    self.assertEqual([strides.test(v) for v in (8, 16, 4, True, '8')],
                     [True, True, False, False, False])
    self.assertEqual(strides.form, 'one of 8, 16, 32')
    names = validation.one_of(['large', 'small'])
    self.assertEqual([names.test(v) for v in ('large', 'medium', 1)],
                     [True, False, False])

  def test_errors_of_a_mistake_keep_their_builtin_types(self):
    self.assertTrue(issubclass(validation.OutputExistsError, FileExistsError))
    self.assertTrue(issubclass(validation.OutputExistsError,
                               validation.ConfigurationError))
    self.assertFalse(issubclass(validation.RunError,
                                validation.ConfigurationError))


if __name__ == '__main__':
  tf.test.main()
