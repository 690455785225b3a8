"""write_examples: the first examples of shards as image files."""

import os

import numpy as np
import tensorflow as tf

from official_seg.commands import write_examples
from official_seg.data import tfexample
from tests.commands import command_testing


def _example(rng, filename, image_format):
  image = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
  label = rng.integers(0, 4, (6, 5, 1), dtype=np.uint8)
  encode = tf.io.encode_png if image_format == 'png' else tf.io.encode_jpeg
  return tfexample.make_example(
      encode(image).numpy(), tf.io.encode_png(label).numpy(), filename,
      image_format, 6, 5)


def _bytes(example, key):
  return example.features.feature[key].bytes_list.value[0]


class WriteExamplesTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.data_dir = self.create_tempdir().full_path
    self.output_dir = os.path.join(self.create_tempdir().full_path, 'inputs')
    self.examples = [_example(rng, 'dir/a.jpg', 'jpeg'),
                     _example(rng, 'b.png', 'png'),
                     _example(rng, '', 'png'),
                     _example(rng, 'other/a.png', 'png')]
    tfexample.write_shards(self.examples, self.data_dir, 'val', 1)
    self.pattern = tfexample.shard_pattern(self.data_dir, 'val')

  def _run(self, pattern, count):
    return command_testing.run(write_examples, input=pattern,
                               output_dir=self.output_dir, count=count)

  def _read(self, kind, name):
    with open(os.path.join(self.output_dir, kind, name), 'rb') as f:
      return f.read()

  def _listed(self, kind):
    return sorted(os.listdir(os.path.join(self.output_dir, kind)))

  def test_writes_the_stored_bytes_under_the_example_stems(self):
    result = self._run(self.pattern, 10)
    self.assertEqual(result.status, 0, result.stderr)
    self.assertIn(f'Wrote 4 images and labels to {self.output_dir}',
                  result.stdout)
    # No filename, and a stem taken before, get the example's index.
    stems = ['a', 'b', 'example_0002', 'a_0003']
    extensions = ['.jpg', '.png', '.png', '.png']
    self.assertEqual(self._listed('images'),
                     sorted(s + e for s, e in zip(stems, extensions)))
    self.assertEqual(self._listed('labels'), sorted(s + '.png' for s in stems))
    for stem, example, extension in zip(stems, self.examples, extensions):
      self.assertEqual(self._read('images', stem + extension),
                       _bytes(example, tfexample.IMAGE_ENCODED))
      self.assertEqual(self._read('labels', stem + '.png'),
                       _bytes(example, tfexample.LABEL_ENCODED))

  def test_writes_only_the_first_count(self):
    result = self._run(self.pattern, 2)
    self.assertEqual(result.status, 0, result.stderr)
    self.assertEqual(self._listed('labels'), ['a.png', 'b.png'])

  def _mistake(self, pattern, process=False):
    """The command's line for a mistake: exit 2, no traceback.

    Args:
      pattern: the --input flag.
      process: run the command as a process, as users do, instead of its
        main().
    """
    if process:
      result = command_testing.run_process(
          write_examples, input=pattern, output_dir=self.output_dir, count=4)
      status = result.returncode
    else:
      result = self._run(pattern, 4)
      status = result.status
    self.assertEqual(status, 2, result.stderr)
    self.assertNotIn('Traceback', result.stderr)
    lines = result.stderr.splitlines()
    self.assertEqual(lines[-2], 'Invalid configuration:')
    return lines[-1]

  def test_no_shard_names_the_flag_and_the_pattern(self):
    pattern = tfexample.shard_pattern(self.data_dir, 'train')
    self.assertEqual(self._mistake(pattern), f'--input={pattern}: no '
                     'TFRecord shards match it.')

  def test_an_output_dir_under_a_file_is_named_before_any_work(self):
    blocker = os.path.join(self.create_tempdir().full_path, 'a_file')
    with open(blocker, 'w') as f:
      f.write('not a folder')
    self.output_dir = os.path.join(blocker, 'inputs')
    self.assertEqual(self._mistake(self.pattern, process=True),
                     f'--output_dir={self.output_dir} cannot be created: '
                     f'{blocker} is a file.')


if __name__ == '__main__':
  tf.test.main()
