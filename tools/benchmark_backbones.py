"""Parameters, FLOPs and inference images/s of every gin/backbones file.

  python tools/benchmark_backbones.py --crop_size=512 --threads=2

Builds each file's DeepLab model (its backbone, ASPP and head, 21 classes;
`benchmarks/backbones.py`), counts its parameters and, with the Model
Garden's FLOP counter, its inference FLOPs on one image, and times its
inference on random images of --crop_size, all models alternating in one
process so that all see the same load; prints a Markdown table with FLOPs
and images/s as ratios to mobilenet_v2.gin's, and one JSON line (also
appended to --output).
"""

import datetime
import json
import sys

from absl import app
from absl import flags
import tensorflow as tf

from benchmarks import backbones
from benchmarks import report

flags.DEFINE_integer('crop_size', 512, 'Image side; SpineNet needs a '
                     'multiple of 128, RevNet of 16.')
flags.DEFINE_integer('batch_size', 1, 'Images per inference call.')
flags.DEFINE_integer('threads', 2, "TensorFlow's intra-op threads (inter-op "
                     'one).')
flags.DEFINE_integer('rounds', 3, 'Timed rounds; the median counts.')
flags.DEFINE_integer('iterations', 2, 'Calls per model per round.')
flags.DEFINE_multi_string('file', None, 'A gin/backbones file name; '
                          'default all (mobilenet_v2.gin always included).')
flags.DEFINE_string('output', None, 'A file to append the JSON line to.')
FLAGS = flags.FLAGS


def _names():
  names = FLAGS.file or backbones.backbone_files()
  unknown = sorted(set(names) - set(backbones.backbone_files()))
  if unknown:
    raise app.UsageError(f'--file: no such gin/backbones file: {unknown}')
  return sorted(set(names) | {backbones.REFERENCE})


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  names = _names()
  tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  crop = (FLAGS.crop_size, FLAGS.crop_size)
  rows = backbones.add_ratios(backbones.measure(
      names, crop, FLAGS.batch_size, rounds=FLAGS.rounds,
      iterations=FLAGS.iterations))
  print(backbones.table(rows))
  line = json.dumps({
      'date': datetime.datetime.now().isoformat(timespec='seconds'),
      'command': ' '.join(sys.argv), 'machine': report.machine(),
      'crop_size': crop, 'batch_size': FLAGS.batch_size,
      'threads': FLAGS.threads, 'rows': rows}, sort_keys=True)
  print(line)
  if FLAGS.output:
    with open(FLAGS.output, 'a') as stream:
      stream.write(line + '\n')


if __name__ == '__main__':
  app.run(main)
