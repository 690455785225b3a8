"""Random and mutated bytes fed to the TFExample decoder fail only with clean errors."""

import subprocess
import sys

import tensorflow as tf

# Runs in a child process: a crash (abort, segfault) would end it with a
# signal instead of printing the tally.
_FUZZ = '''
import numpy as np
import tensorflow as tf
from official_seg.data import tfexample
from official_seg.datasets import synthetic

decoder = tfexample.Decoder()
decode = tf.function(decoder.decode)
seed_example = next(synthetic.examples(1, seed=0, image_format='png',
                                       min_size=16, max_size=20))
valid = seed_example.SerializeToString()
rng = np.random.default_rng(1234)
outcomes = {'decoded': 0, 'op_error': 0}
for trial in range(300):
  data = bytearray(valid)
  if trial % 3 == 0:
    data = bytearray(rng.integers(0, 256, rng.integers(0, 400), dtype=np.uint8))
  else:
    for _ in range(rng.integers(1, 20)):
      data[rng.integers(0, len(data))] = rng.integers(0, 256)
    if trial % 3 == 2:
      data = data[:rng.integers(1, len(data))]
  try:
    out = decode(tf.constant(bytes(data)))
    assert out['image'].shape[-1] == 3 and out['label'].shape[-1] == 1
    outcomes['decoded'] += 1
  except tf.errors.OpError:
    outcomes['op_error'] += 1
print(outcomes['decoded'], outcomes['op_error'])
'''


class DecoderFuzzTest(tf.test.TestCase):

  def test_mutated_bytes_fail_cleanly(self):
    # Error messages quote the mutated bytes: decode them leniently.
    proc = subprocess.run([sys.executable, '-c', _FUZZ], capture_output=True,
                          encoding='utf-8', errors='replace', timeout=600,
                          check=False)
    self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
    decoded, errors = map(int, proc.stdout.split()[-2:])
    self.assertEqual(decoded + errors, 300)
    # Both outcomes occur: some mutations leave a decodable example.
    self.assertGreater(errors, 100)
    self.assertGreater(decoded, 0)


if __name__ == '__main__':
  tf.test.main()
