"""Measures a gin experiment's training input pipeline in images per second.

  python tools/benchmark_input.py --gin_file=gin/experiments/quickstart.gin \
    --gin_file=gin/datasets/pascal_voc.gin --data_dir=data/pascal_voc
"""

from absl import app
from absl import flags
import gin

from benchmarks import input as input_benchmark
from official_seg import flags as seg_flags
from official_seg.runtime import gin_config

flags.adopt_module_key_flags(seg_flags)
flags.DEFINE_integer('batch_size', None, 'Default TRAIN_BATCH_SIZE.')
flags.DEFINE_integer('warmup_batches', 10, 'Batches read before timing.')
flags.DEFINE_integer('num_batches', 50, 'Batches timed.')
flags.mark_flag_as_required('gin_file')
FLAGS = flags.FLAGS


def main(argv):
  del argv  # Unused.
  gin.clear_config()
  seg_flags.parse_gin(finalize=False)
  batch_size = FLAGS.batch_size or gin_config.binding(
      'build_estimator.train_batch_size')
  dataset = input_benchmark.training_dataset(batch_size)
  result = input_benchmark.measure(dataset, batch_size, FLAGS.warmup_batches,
                                   FLAGS.num_batches)
  print(f'{result.images_per_second:.1f} images/s ({result.num_images} images '
        f'in {result.seconds:.1f}s, batch {batch_size}, after '
        f'{FLAGS.warmup_batches} warm-up batches)')


if __name__ == '__main__':
  app.run(main)
