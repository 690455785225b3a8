"""The peak resident size around a block, read from /proc, and the variables' bytes."""

import numpy as np
import tensorflow as tf

from official_seg.runtime import memory

_STATUS = '''Name:\tpython
VmPeak:\t 5000000 kB
VmHWM:\t  812340 kB
VmRSS:\t  700001 kB
Threads:\t12
'''


class MemoryTest(tf.test.TestCase):

  def test_status_lines_in_kb_become_bytes(self):
    self.assertEqual(memory.read_status(_STATUS),
                     (700001 * 1024, 812340 * 1024))
    self.assertIsNone(memory.read_status('Name:\tpython\n'))

  def test_available_memory_in_kb_becomes_bytes(self):
    meminfo = ('MemTotal:       16000000 kB\nMemFree:         1000000 kB\n'
               'MemAvailable:    9000000 kB\n')
    self.assertEqual(memory.available_bytes(meminfo), 9000000 * 1024)
    self.assertIsNone(memory.available_bytes('MemTotal: 1 kB\n'))

  def test_a_block_that_allocates_raises_the_peak_by_its_bytes(self):
    size = 256 * 2**20
    with memory.PeakMeter() as meter:
      block = np.ones(size // 8)  # Written, so resident.
      del block
    self.assertTrue(meter.reset)
    # Pages the process held already (freed earlier) may take a little of it.
    self.assertGreaterEqual(meter.peak - meter.before, 0.95 * size)
    # Freed memory leaves the peak where it was: a second block that
    # allocates nothing reports nearly nothing above its start.
    with memory.PeakMeter() as quiet:
      pass
    self.assertLess(quiet.peak - quiet.before, size // 4)

  def test_variable_bytes_sum_elements_times_item_size(self):
    shapes = [((3, 3, 16, 32), 4), ((32,), 4), ((), 8), ((5, 7), 2)]
    self.assertEqual(memory.variable_bytes(shapes),
                     3 * 3 * 16 * 32 * 4 + 32 * 4 + 8 + 35 * 2)

  def test_report_line(self):
    meter = memory.PeakMeter(before=100 * 2**20, peak=612 * 2**20,
                             reset=True)
    self.assertEqual(
        memory.report_line(meter, 3 * 2**20, 8),
        'memory: variables 3.0 MiB; a training step of 8 images took this '
        'process from 100 MiB to a peak of 612 MiB: 512 MiB for '
        'activations, gradients and workspace on this machine\'s CPU')
    self.assertEqual(memory.report_line(memory.PeakMeter(), 2**20, 8),
                     'memory: variables 1.0 MiB; the step\'s peak is not '
                     'measured (no /proc here)')


if __name__ == '__main__':
  tf.test.main()
