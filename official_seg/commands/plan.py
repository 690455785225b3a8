"""Plans a run of a dataset (converted, or folders) in a time and memory budget as a gin file; with --model_dir, runs it.

  # Folders to a trained, evaluated and exported model in one command:
  plan --image_dir=imgs --label_dir=masks --split_list_dir=lists \
    --num_classes=3 --time_budget=2h --output=runs/mine/plan.gin \
    --model_dir=runs/mine/model
  # The plan alone, to read or edit before training:
  plan --gin_file=data/mine/dataset.gin --time_budget=20m \
    --output=data/mine/plan.gin
  plan --data_dir=data/mine --time_budget=2h --memory_budget=8G \
    --output=data/mine/plan.gin
  train_and_eval --gin_file=data/mine/plan.gin --model_dir=runs/mine

Folders (--image_dir, --label_dir and the class flags, as `build_tfrecords
--layout=folders` takes them) are converted first, by the converter, to
--data_dir (default <folder of --output>/records) with its dataset.gin:
splits train and val of --split_list_dir's lists, else train alone.
Reads the training split (class shares, image and object sizes, pixel
statistics) and the evaluation split's largest image, builds and times the
training step of each candidate backbone at growing batches, and writes
one gin layer: crop, evaluation, batch, backbone, steps, schedule, scale
range, normalisation, loss and sampling, each with its reason. With
--model_dir it then trains, evaluates and exports that plan there, as
`train_and_eval --gin_file=<plan> --model_dir=<dir>` does.
"""

import os
import sys

from absl import flags
import tensorflow as tf

from official_seg import command_line
from official_seg import flags as seg_flags
from official_seg import layout_flags
from official_seg import validation
from official_seg.commands import build_tfrecords
from official_seg.data import image_classes
from official_seg.data import input_fn
from official_seg.data import split_metadata
from official_seg.data import storage
from official_seg.datasets import plan_file
from official_seg.datasets import plan_search
from official_seg.datasets import planner
from official_seg.datasets import sampling_advice
from official_seg.datasets import stats
from official_seg.evaluation import results
from official_seg.runtime import gin_config
from official_seg.runtime import gin_file_run
from official_seg.runtime import memory
from official_seg.runtime import step_cost

FLAGS = flags.FlagValues()
# --gin_file (the dataset gin file), --gin_param and --data_dir.
seg_flags.define_gin_flags(FLAGS)
flags.DEFINE_string('time_budget', None, 'The run\'s wall time: training, '
                    'the final evaluation and start-up, e.g. 20m, 2h, 1h30m.',
                    flag_values=FLAGS)
flags.DEFINE_string('memory_budget', None, 'The memory the run may take, '
                    'e.g. 8G or 512M; default this machine\'s available '
                    'memory (MemAvailable).', flag_values=FLAGS)
flags.DEFINE_string('output', None, 'The gin file to write.',
                    flag_values=FLAGS)
flags.DEFINE_string('model_dir', None, 'Then train, evaluate and export the '
                    'plan in this folder, as train_and_eval '
                    '--gin_file=<--output> --model_dir=<it> does.',
                    flag_values=FLAGS)
flags.DEFINE_integer('max_batch', plan_search.MAX_BATCH,
                     'The largest training batch to consider.',
                     flag_values=FLAGS)
flags.DEFINE_list('backbones', [b.name for b in plan_search.BACKBONES],
                  'The candidate backbones, cheapest first.',
                  flag_values=FLAGS)
# Folders before conversion, as build_tfrecords --layout=folders reads them.
layout_flags.define_folder_pair_flags(FLAGS)
layout_flags.define_class_flags(FLAGS)
flags.DEFINE_bool('overwrite', False, 'folders: replace records converted '
                  'to --data_dir earlier.', flag_values=FLAGS)
flags.mark_flag_as_required('time_budget', flag_values=FLAGS)
flags.mark_flag_as_required('output', flag_values=FLAGS)
_BASE = 'base.gin'
# Handed on to the converter as given.
_FOLDER_FLAGS = ('image_dir', 'label_dir', 'split_list_dir',
                 'overwrite') + layout_flags.CLASS_FLAGS


def _memory_budget():
  if FLAGS.memory_budget:
    return planner.bytes_of(FLAGS.memory_budget)
  with open('/proc/meminfo', encoding='utf-8') as f:
    available = memory.available_bytes(f.read())
  if available is None:
    raise validation.ConfigurationError(
        'This system does not report its available memory: give '
        '--memory_budget.')
  return available


def _records_dir():
  """--data_dir, else <folder of --output>/records; absolute."""
  folder = FLAGS.data_dir or os.path.join(os.path.dirname(FLAGS.output),
                                          'records')
  return folder if storage.is_absolute(folder) else os.path.abspath(folder)


def _check_no_records(records):
  """Refuses to convert over records there, unless --overwrite.

  Raises:
    validation.ConfigurationError: shards already in `records`.
  """
  if not FLAGS.overwrite and tf.io.gfile.glob(
      os.path.join(records, '*.tfrecord')):
    raise validation.ConfigurationError(
        f'{records} already holds records: pass --overwrite to convert the '
        f'folders again, --data_dir=<another folder>, or plan those records '
        f'with --gin_file={os.path.join(records, "dataset.gin")}.')


def _converted():
  """Converts the folders with build_tfrecords; its dataset gin file.

  Raises:
    validation.ConfigurationError: --gin_file given too; the converter's
      refusals of flags and data (one line naming the flag or file).
  """
  if FLAGS.gin_file:
    raise validation.ConfigurationError(
        'Give folders (--image_dir, --label_dir and --num_classes, --palette '
        'or --class_masks) or --gin_file (a converted dataset), not both.')
  if not (FLAGS.num_classes or FLAGS.palette or FLAGS.class_masks):
    raise validation.ConfigurationError(
        'Folders need their classes: --num_classes (and --ignore_label) for '
        'class-id PNGs, --palette for colour masks, or --class_masks.')
  records = _records_dir()
  _check_no_records(records)
  splits = 'train,val' if FLAGS.split_list_dir else 'train'
  argv = ['build_tfrecords', '--layout=folders', f'--output_dir={records}',
          f'--splits={splits}'] + [FLAGS[name].serialize()
                                   for name in _FOLDER_FLAGS
                                   if FLAGS[name].present]
  build_tfrecords.FLAGS.unparse_flags()
  build_tfrecords.FLAGS(argv)
  path = build_tfrecords.convert_dataset()
  print(f'Converted {FLAGS.image_dir} and {FLAGS.label_dir} to {records} '
        f'(splits {splits}); its dataset: {path}')
  return path


def _dataset_gin():
  """The dataset gin file: the folders' once converted, --gin_file, else
  <--data_dir>/dataset.gin."""
  if FLAGS.image_dir or FLAGS.label_dir:
    return [_converted()]
  if FLAGS.gin_file:
    return list(FLAGS.gin_file)
  path = os.path.join(FLAGS.data_dir or '', 'dataset.gin')
  if not (FLAGS.data_dir and tf.io.gfile.exists(path)):
    raise validation.ConfigurationError(
        'Give --gin_file (the dataset gin file build_tfrecords wrote), a '
        '--data_dir that holds dataset.gin, or folders (--image_dir, '
        '--label_dir).')
  return [path]


def _backbones():
  known = {b.name: b for b in plan_search.BACKBONES}
  unknown = [name for name in FLAGS.backbones if name not in known]
  if unknown or not FLAGS.backbones:
    raise validation.ConfigurationError(
        f'--backbones={",".join(FLAGS.backbones)}: name one or more of '
        f'{", ".join(known)}.')
  return [known[name] for name in FLAGS.backbones]


def _check_readable(info):
  """Stops at a split with no shards, a corrupt shard or no images."""
  for split in (info.train_split, info.eval_split):
    corrupt = input_fn.find_corrupt_shards(
        input_fn.list_shards(info.data_dir, split))
    if corrupt:
      raise validation.ConfigurationError(
          f'Split {split!r} of {info.data_dir} has unreadable shards: '
          + '; '.join(f'{path} ({error})' for path, error in corrupt))


def _split_facts(info):
  """(`stats.Stats` of the training split, `plan_search.Facts`)."""
  _check_readable(info)
  train = stats.compute_stats(info.data_dir, info.train_split,
                              info.num_classes, info.ignore_label)
  evaluation = (split_metadata.read(info.data_dir, info.eval_split) or
                split_metadata.compute(info.data_dir, info.eval_split))
  for split, count in ((info.train_split, train.num_images),
                       (info.eval_split, evaluation['num_images'])):
    if not count:
      raise validation.ConfigurationError(
          f'Split {split!r} of {info.data_dir} has no images.')
  _, presence = image_classes.presence(train.image_labels, info.ignore_label,
                                       info.num_classes)
  facts = plan_search.Facts(
      train.num_images, evaluation['num_images'],
      planner.median_size(train.sizes),
      (evaluation['max_height'], evaluation['max_width']),
      planner.object_range(train.class_pixels, presence.sum(axis=0)))
  return train, facts


def _measure(layers, params):
  """measure(backbone, crop, batch) -> `plan_search.Measurement`."""

  def measure(backbone, crop, batch):
    print(f'Measuring {backbone.name} at batch {batch}, crops {crop} ...',
          flush=True)
    files = [_BASE, backbone.gin_file] + layers
    bindings = list(params) + plan_search.decoder_bindings() + list(
        backbone.bindings) + [
        f'CROP_SIZE = {crop}', f'TRAIN_BATCH_SIZE = {batch}',
        'TRAIN_STEPS = 1000']
    return plan_search.Measurement(*step_cost.measure(files, bindings))

  return measure


def _choices(info, train, facts, dataset_gin, budgets, backbones):
  """Every (title, `plan_file.Choice`) of the plan, in the file's order."""
  params = seg_flags.gin_params(flag_values=FLAGS)
  shares = stats.class_shares(train)
  loss = planner.loss_choice(shares, info.class_names)
  output_stride = plan_search.BACKBONES[0].output_stride
  crop_choice = planner.crop_choice(facts.median, facts.objects[1],
                                    output_stride)
  crop = crop_choice.bindings[0][1]
  measure = _measure(dataset_gin + list(loss.includes), params)
  chosen, rejected = plan_search.choose(
      lambda b: plan_search.plan_candidate(b, measure, facts, crop, budgets,
                                           FLAGS.max_batch), backbones)
  suggestions = sampling_advice.suggest(train, info.class_names,
                                        info.ignore_label)
  mean, std = stats.channel_statistics(info.data_dir, info.train_split,
                                       info.image_channels,
                                       info.image_bit_depth)
  return [
      ('backbone', plan_search.backbone_choice(chosen, rejected)),
      ('decoder', plan_search.decoder_choice()),
      ('crop', crop_choice),
      ('evaluation', chosen.evaluation),
      ('batch', plan_search.batch_choice(chosen, budgets[1])),
      ('steps', plan_search.steps_choice(chosen, budgets[0])),
      ('batch norm', plan_search.batch_norm_choice(chosen)),
      ('schedule', planner.schedule_choice(
          chosen.steps, chosen.measurement.seconds, budgets[0])),
      ('scale', planner.scale_choice(crop, *facts.objects, output_stride)),
      ('normalisation', planner.normalization_choice(mean, std,
                                                     info.train_split)),
      ('loss', loss)] + [
          ('sampling', c) for c in planner.sampling_choices(suggestions)]


def _image_classes(info, train, choices):
  """Writes the image-classes file that repeat factors read, if missing."""
  wanted = any(name.endswith('repeat_factor_threshold') and value
               for _, c in choices for name, value in c.bindings)
  if wanted and not tf.io.gfile.exists(image_classes.path(info.data_dir,
                                                      info.train_split)):
    print('Classes of each image: ' + image_classes.write(
        info.data_dir, info.train_split, train.image_labels))


def _absolute(path):
  """A gin file's path that reads the same from any folder."""
  path = gin_config.resolve_gin_file(path)
  return path if storage.is_absolute(path) else os.path.abspath(path)


def _run(plan_path, model_dir):
  """train_and_eval --gin_file=<plan_path> --model_dir=<model_dir>, here.

  The plan is parsed alone (it includes everything the run reads), checked
  as the binary checks it, then trained, its final checkpoint evaluated
  and exported; the evaluation's table is printed.
  """
  print(f'Training, evaluating and exporting {plan_path} in {model_dir}; '
        f'if stopped, it resumes with train_and_eval --gin_file={plan_path} '
        f'--model_dir={model_dir} ...', flush=True)
  record = gin_file_run.train_and_eval(plan_path, model_dir)
  print(results.format_table(record))
  print(f'Model: {model_dir}; SavedModel under '
        f'{os.path.join(model_dir, "export")}')


def _main(argv):
  """Reads the splits, measures the candidates, writes the plan; trains it
  with --model_dir."""
  del argv  # The program alone (command_line.run).
  storage.check_output('--output', FLAGS.output, folder=False)
  if FLAGS.model_dir:  # Before any work, as the binary does.
    storage.check_model_dir(FLAGS.model_dir)
  budgets = (planner.seconds_of(FLAGS.time_budget), _memory_budget())
  planner.check_time_budget(budgets[0])
  backbones = _backbones()
  dataset_gin = _dataset_gin()
  info = seg_flags.dataset_with(gin_files=dataset_gin, flag_values=FLAGS)
  train, facts = _split_facts(info)
  choices = _choices(info, train, facts, dataset_gin, budgets, backbones)
  _image_classes(info, train, choices)
  header = [
      f'A plan for split {info.train_split!r} of {info.data_dir} in '
      f'{FLAGS.time_budget} and {budgets[1] / 2**20:.0f} MiB, measured on '
      'this machine by plan.',
      f'  train_and_eval --gin_file={FLAGS.output} --model_dir=<run>',
      'Each choice says why; edit freely.']
  includes = [_BASE] + [_absolute(p) for p in dataset_gin]
  text = plan_file.gin_text(header, includes, choices,
                          seg_flags.gin_params(flag_values=FLAGS))
  storage.write_whole(FLAGS.output, text)
  print(text, end='')
  print(f'Plan: {FLAGS.output}')
  if FLAGS.model_dir:
    _run(FLAGS.output, FLAGS.model_dir)


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
