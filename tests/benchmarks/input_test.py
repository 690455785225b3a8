"""Tests for the input benchmark: the experiment's training input, timed."""

import gin
import tensorflow as tf

from benchmarks import input as input_benchmark
from tests import testing_utils


class InputTest(testing_utils.TinyDataTestCase):


  def test_benchmark_reads_the_experiment_training_input(self):
    dataset, batch_size = input_benchmark.training_input(
        ['experiments/quickstart.gin'], testing_utils.tiny_bindings('/nowhere'),
        data_dir=self.data_dir)
    self.assertEqual(batch_size, 2)
    self.assertEqual(dataset.element_spec[1].shape, (2, 33, 33, 1))
    result = input_benchmark.measure(dataset, batch_size, warmup_batches=1,
                                     num_batches=3)
    self.assertEqual(result.num_images, 6)


if __name__ == '__main__':
  tf.test.main()
