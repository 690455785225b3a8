"""Imports a DeepLab (tf-slim) model-zoo checkpoint as a checkpoint of ours.

  import_deeplab_checkpoint \
    --deeplab_checkpoint=deeplabv3_pascal_trainval/model.ckpt \
    --gin_file=gin/experiments/voc_xception65_zoo.gin \
    --output_dir=/tmp/xception65_voc

The model is the one the gin files build (it must be DeepLab-layered:
backbones.Xception with decoders.DeepLabASPP and heads.DeepLabHead), with
NUM_CLASSES from their dataset. Every variable of ours is filled from the
DeepLab variable of the same role and shape; one that is missing or of
another shape stops the import, naming each. The output directory then holds
`model.ckpt-0` (with global_step 0), usable as INIT_CHECKPOINT or as the
--model_dir of `--mode=eval` and `--mode=export`, and `import_report.json`:
which DeepLab name filled each variable, and the checkpoint's entries we do
not read (global_step, moving averages, optimizer slots, others such as an
ImageNet classifier). --backbone_only imports the backbone of an ImageNet
checkpoint (xception_41/65/71, resnet_v1_50_beta, resnet_v1_101_beta) as a
warm start; the rest is listed as not filled, and training starts from it
with INIT_CHECKPOINT.
"""

import json
import os
import sys

from absl import flags
import tensorflow as tf

from official_seg import command_line
from official_seg import flags as seg_flags
from official_seg import validation
from official_seg.data import storage
from official_seg.deeplab import checkpoint_names
from official_seg.modeling import model as model_lib
from official_seg.runtime import gin_config


FLAGS = flags.FlagValues()
flags.DEFINE_string('deeplab_checkpoint', None,
                    'A DeepLab checkpoint prefix (e.g. .../model.ckpt) or '
                    'a directory holding one.', flag_values=FLAGS)
# --gin_file (the model's and its dataset's), --gin_param and --data_dir,
# shared with the binary and the other tools.
seg_flags.define_gin_flags(FLAGS)
flags.DEFINE_string('output_dir', None, 'Where our checkpoint is written.',
                    flag_values=FLAGS)
flags.DEFINE_bool('backbone_only', False,
                  'Import the backbone only (ImageNet checkpoints).',
                  flag_values=FLAGS)
flags.mark_flags_as_required(
    ['deeplab_checkpoint', 'gin_file', 'output_dir'], flag_values=FLAGS)

REPORT_NAME = 'import_report.json'
# Variables do not depend on the image size; this one is cheap.
_BUILD_SIZE = 65


def _reader(path):
  """A `CheckpointReader` of a prefix or a directory's latest checkpoint."""
  prefix = tf.train.latest_checkpoint(path) if tf.io.gfile.isdir(path) else path
  if not prefix or not tf.io.gfile.glob(prefix + '.index'):
    raise validation.MissingFileError(
        f'--deeplab_checkpoint={path}: no checkpoint there (give the prefix, '
        'e.g. .../model.ckpt).')
  return prefix, tf.train.load_checkpoint(prefix)


def import_checkpoint(deeplab_checkpoint, gin_files, gin_params, output_dir,
                      backbone_only=False):
  """Writes our checkpoint of the gin files' model from a DeepLab one.

  Args:
    deeplab_checkpoint: str, prefix or directory.
    gin_files: list of gin files (model and dataset).
    gin_params: list of gin bindings.
    output_dir: str, the new checkpoint's directory.
    backbone_only: bool, see --backbone_only.

  Returns:
    (our checkpoint prefix str, the report dict written beside it).

  Raises:
    validation.MissingFileError: no checkpoint at `deeplab_checkpoint`.
    validation.ConfigurationError: `output_dir` is a file or lies under
      one; a gin file or binding it cannot use.
    deeplab_names.DeepLabImportError: it cannot fill the model (a
      ConfigurationError too).
  """
  storage.check_output('--output_dir', output_dir, folder=True)
  prefix, reader = _reader(deeplab_checkpoint)
  dataset = gin_config.read_dataset(gin_files, gin_params)
  with tf.Graph().as_default():
    model = model_lib.build_model(num_classes=dataset.num_classes)
    model(tf.zeros([1, _BUILD_SIZE, _BUILD_SIZE, 3]), training=False)
    global_step = tf.compat.v1.train.get_or_create_global_step()
    plan = checkpoint_names.plan_import(
        model, reader.get_variable_to_shape_map(), reader.get_tensor,
        backbone_only)
    saver = tf.compat.v1.train.Saver(model.variables + [global_step])
    with tf.compat.v1.Session() as session:
      # Initial values fed: one run (a `load` per variable adds ops each).
      session.run(tf.compat.v1.global_variables_initializer(),
                  {variable.initializer.inputs[1]: value
                   for variable, value in plan.values.items()})
      tf.io.gfile.makedirs(output_dir)
      ours = saver.save(session, os.path.join(output_dir, 'model.ckpt'),
                        global_step=0)
  report = dict(deeplab_checkpoint=prefix, checkpoint=ours,
                backbone_only=backbone_only, filled=plan.filled,
                not_filled=plan.not_filled, unused=plan.unused)
  storage.write_whole(os.path.join(output_dir, REPORT_NAME),
                      json.dumps(report, indent=1, sort_keys=True))
  return ours, report


def _main(argv):
  del argv  # The program alone (command_line.run).
  ours, report = import_checkpoint(
      FLAGS.deeplab_checkpoint, FLAGS.gin_file,
      seg_flags.gin_params(flag_values=FLAGS), FLAGS.output_dir,
      FLAGS.backbone_only)
  unused = {kind: len(names) for kind, names in report['unused'].items()}
  print(f'Wrote {ours}: {len(report["filled"])} variables filled, '
        f'{len(report["not_filled"])} left at initialisation, unused '
        f'checkpoint entries {unused}; details in '
        f'{os.path.join(FLAGS.output_dir, REPORT_NAME)}.')


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
