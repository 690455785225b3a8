"""Cross-validates an experiment (or compares several) over K folds of the training split.

  # 5 folds of TRAIN_SPLIT, stratified by class presence; each trained,
  # its final checkpoint evaluated; mean and spread per class:
  cross_validate --gin_file=gin/experiments/quickstart.gin \
    --data_dir=data/mine --folds=5 --work_dir=runs/cv
  # The experiment and two losses on the same folds; the best named:
  cross_validate --gin_file=gin/experiments/quickstart.gin \
    --data_dir=data/mine --folds=5 --work_dir=runs/cv \
    --configurations=losses/dice.gin,losses/lovasz.gin

  # And one SavedModel averaging the best configuration's folds:
  cross_validate ... --ensemble
  predict_images --saved_model=runs/cv/<best>/ensemble --input=images/
  # Or as one .tflite a kind (float32, float16, dynamic_range):
  cross_validate ... --ensemble_tflite=float32
  predict_images --tflite=runs/cv/<best>/ensemble_tflite/model_float32.tflite \
    --input=images/

The folds are written once beside the training split's shards, as the
splits <split>_fold<i>of<K>_train and _val, with <split>-folds<K>.json
(each image's fold). The same command again resumes: finished folds are read
back, a fold stopped halfway goes on from its last checkpoint.
"""

import os
import sys

from absl import flags

from official_seg import command_line
from official_seg import flags as seg_flags
from official_seg import validation
from official_seg.datasets import folds as folds_lib
from official_seg.datasets import subsets
from official_seg.export import tflite_ensemble
from official_seg.runtime import cross_validation
from official_seg.runtime import gin_config

FLAGS = flags.FlagValues()
# --gin_file (the experiment, with its dataset), --gin_param and --data_dir.
seg_flags.define_gin_flags(FLAGS)
flags.DEFINE_integer('folds', 5, 'K: folds of the training split; each trains '
                     'on K - 1 of them and evaluates on the other.',
                     flag_values=FLAGS)
flags.DEFINE_integer('seed', 0, 'Seed of the folds\' draw.', flag_values=FLAGS)
flags.DEFINE_string('work_dir', None, 'Where each configuration\'s folds '
                    'train (<work_dir>/<name>/fold<i>) and the summary goes '
                    '(cross_validation.json).', flag_values=FLAGS)
flags.DEFINE_list('configurations', [],
                  'gin files, each added after --gin_file as one more '
                  'configuration (named by the file) to compare with the '
                  'experiment as it is.', flag_values=FLAGS)
flags.DEFINE_bool('ensemble', False, 'Also export one SavedModel that '
                  'averages the folds\' probabilities, of the best '
                  'configuration (<work_dir>/<name>/ensemble).',
                  flag_values=FLAGS)
flags.DEFINE_list('ensemble_tflite', [], 'TFLite kinds (of '
                  'tflite_export.kinds: float32, float16, dynamic_range) of '
                  'one .tflite each that averages the best configuration\'s '
                  'folds\' probabilities (<work_dir>/<name>/ensemble_tflite).',
                  flag_values=FLAGS)
flags.DEFINE_integer('num_shards', 4, 'Most shards of each fold split.',
                     flag_values=FLAGS)
flags.mark_flag_as_required('work_dir', flag_values=FLAGS)


def configurations():
  """The `Configuration`s: the experiment, then one per --configurations."""
  files = tuple(FLAGS.gin_file or ())
  params = tuple(seg_flags.gin_params(flag_values=FLAGS))
  names = ['experiment'] + [os.path.splitext(os.path.basename(f))[0]
                            for f in FLAGS.configurations]
  if len(set(names)) != len(names):
    raise validation.ConfigurationError(
        f'--configurations={",".join(FLAGS.configurations)}: each file '
        'names its configuration\'s folder, so the names (without folder '
        'and .gin) must differ from each other and from "experiment".')
  extras = [()] + [(extra,) for extra in FLAGS.configurations]
  return [cross_validation.Configuration(name, files + extra, params)
          for name, extra in zip(names, extras)]


def fold_splits(info):
  """The folds' (training, evaluation) split names, written if need be."""
  labels = subsets.read_shards(info.data_dir, info.train_split)
  folds_lib.check_num_folds(FLAGS.folds, len(labels.names))
  names = [folds_lib.split_names(info.train_split, FLAGS.folds, i)
           for i in range(FLAGS.folds)]
  earlier = folds_lib.read_manifest(info.data_dir, info.train_split,
                                    FLAGS.folds, FLAGS.seed)
  if earlier is not None:
    print(f'Folds of split {info.train_split!r}: written earlier '
          f'({folds_lib.manifest_path(info.data_dir, info.train_split, FLAGS.folds)})')
    return names
  presence = subsets.class_presence(labels.label_counts, info.num_classes,
                                    info.ignore_label)
  fold = folds_lib.stratified_folds(presence, FLAGS.folds, FLAGS.seed)
  folds_lib.write_folds(info.data_dir, info.train_split, labels, fold,
                        FLAGS.num_shards, overwrite=True)
  folds_lib.write_manifest(info.data_dir, info.train_split, labels.names,
                           fold, FLAGS.seed)
  print(f'Wrote {FLAGS.folds} folds of split {info.train_split!r} '
        f'(images per class in each):')
  print(folds_lib.format_folds(presence, fold, info.class_names or [
      str(c) for c in range(info.num_classes)]))
  return names


def _main(argv):
  """Writes the folds, trains and evaluates each, prints the summary."""
  del argv  # The program alone (command_line.run).
  if not FLAGS.gin_file:
    raise validation.ConfigurationError(
        'Give --gin_file: the experiment to cross-validate.')
  info = gin_config.read_dataset(FLAGS.gin_file,
                                 seg_flags.gin_params(flag_values=FLAGS))
  if not info.data_dir:
    raise validation.ConfigurationError(
        'Give --data_dir, or a --gin_file that sets DATA_DIR.')
  if FLAGS.ensemble_tflite:  # Before the trainings.
    tflite_ensemble.check_kinds(FLAGS.ensemble_tflite)
  setups = configurations()
  try:
    splits = fold_splits(info)
  except validation.MissingFileError as e:  # No shards of the split.
    raise validation.MissingFileError(
        f'{e} Check --data_dir and TRAIN_SPLIT.') from None
  result = cross_validation.run(setups, splits, FLAGS.work_dir)
  print(cross_validation.format_summary(result))
  print('Summary: ' + os.path.join(FLAGS.work_dir,
                                   cross_validation.SUMMARY_FILE))
  chosen = {setup.name: setup for setup in setups}[
      result.get('best', setups[0].name)]
  if FLAGS.ensemble:
    cross_validation.export_ensemble(chosen, splits, FLAGS.work_dir)
  if FLAGS.ensemble_tflite:
    cross_validation.export_tflite_ensemble(chosen, splits, FLAGS.work_dir,
                                            FLAGS.ensemble_tflite)


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
