"""Writes label maps, colourised labels and overlays from an exported model.

  predict_images --model_dir=runs/quickstart --input='photos/*.jpg' \
    --output_dir=/tmp/predictions
  predict_images --saved_model=runs/quickstart/export/best/1712345678 \
    --input=val/images --label_dir=val/labels --output_dir=/tmp/val
  predict_images \
    --tflite=runs/quickstart/export/tflite/model_int8.tflite \
    --input=val/images --label_dir=val/labels --output_dir=/tmp/val_int8

For each image <stem> it writes labels/<stem>.png (class ids, one channel),
colored/<stem>.png and overlay/<stem>.png; with --label_dir also the table of
per-class IoU, Dice/F1, precision, recall and Boundary IoU with their means,
metrics.json, confusion_matrix.png, per_class_iou.png and
per_class_scores.png.
"""

import collections
import json
import os
import sys

from absl import app
from absl import flags
import tensorflow as tf

from official_seg import command_line
from official_seg import validation
from official_seg.data import encode
from official_seg.data import layouts
from official_seg.data import palettes
from official_seg.data import storage
from official_seg.evaluation import boundary
from official_seg.evaluation import results
from official_seg.evaluation import tally
from official_seg.evaluation import visualize
from official_seg.export import predictor
from official_seg.export import tflite_runner

FLAGS = flags.FlagValues()
flags.DEFINE_string('saved_model', None, 'A SavedModel directory from '
                    'train_and_eval (export/<timestamp>/).', flag_values=FLAGS)
flags.DEFINE_string('model_dir', None, 'A training model dir: its newest '
                    'export under <model_dir>/export/ is used.',
                    flag_values=FLAGS)
flags.DEFINE_string('tflite', None, 'A .tflite of train_and_eval '
                    '--mode=export_tflite, run with the TFLite interpreter.',
                    flag_values=FLAGS)
flags.DEFINE_string('input', None, 'A folder of .jpg/.png images, or a glob.',
                    flag_values=FLAGS)
flags.DEFINE_string('output_dir', None, 'Where to write the pictures.',
                    flag_values=FLAGS)
flags.DEFINE_string('label_dir', None, 'Ground-truth label PNGs named '
                    '<image stem>.png: also score the predictions.',
                    flag_values=FLAGS)
flags.DEFINE_integer('boundary_tolerance', boundary.DEFAULT_TOLERANCE,
                     'With --label_dir: Boundary IoU counts the pixels at '
                     'most this far from a contour (the evaluator\'s '
                     'ModelFnOptions.boundary_tolerance).', lower_bound=1,
                     flag_values=FLAGS)
flags.DEFINE_enum('palette', None, list(palettes.PALETTE_NAMES),
                  'Colours; default the palette of the export\'s dataset, '
                  'else pascal_voc.', flag_values=FLAGS)
flags.DEFINE_float('alpha', 0.5, 'Weight of the label colours in overlays.',
                   flag_values=FLAGS)
flags.DEFINE_bool('cityscapes_label_ids', False, 'Also write label_ids/'
                  '<stem>.png with Cityscapes label ids (test server format).',
                  flag_values=FLAGS)
flags.DEFINE_list('window_stride', None, 'With --tflite: run images larger '
                  'than the model input in sliding windows of its size, '
                  'this far apart (height,width); a SavedModel exported '
                  'with WINDOW_SIZE tiles by itself (docs/large_images.md).',
                  flag_values=FLAGS)
flags.DEFINE_enum('window_blending', None, ['uniform', 'gaussian'],
                  'With --tflite: sliding windows blended so (default '
                  'uniform; stride two thirds of the input).',
                  flag_values=FLAGS)
flags.mark_flags_as_required(['input', 'output_dir'], flag_values=FLAGS)
flags.mark_flags_as_mutual_exclusive(['saved_model', 'model_dir', 'tflite'],
                                     required=True, flag_values=FLAGS)


def choose_palette(metadata):
  """--palette, else the export's `DatasetInfo.palette` (None: PASCAL VOC).

  Args:
    metadata: dict, the export's segmentation.json; {} when it has none.

  Returns:
    uint8 [256, 3].

  Raises:
    ValueError: the export's palette is neither a known name nor a list of
      [r, g, b].
  """
  if FLAGS.palette:
    return palettes.get_palette(FLAGS.palette)
  return palettes.resolve(metadata.get('palette'))


def _stems(paths):
  """Output name of each input; two inputs of one stem are an error."""
  stems = collections.OrderedDict()
  for path in paths:
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem in stems:
      raise app.UsageError(f'{stems[stem]} and {path} have the same name '
                           f'{stem!r}; outputs would collide. Narrow --input.')
    stems[stem] = path
  return stems


def check_paths():
  """Checks the folders and files the flags name, before any work.

  Raises:
    validation.ConfigurationError: one names nothing, or a file where a
      folder is expected (or the other way round); its message names the
      flag and the path.
  """
  if FLAGS.saved_model:
    storage.check_input('--saved_model', FLAGS.saved_model, folder=True)
    if not tf.saved_model.contains_saved_model(FLAGS.saved_model):
      raise validation.MissingFileError(
          f'--saved_model={FLAGS.saved_model} holds no SavedModel '
          '(saved_model.pb); give an export folder, '
          '<model_dir>/export/<timestamp>/.')
  if FLAGS.model_dir:
    storage.check_input('--model_dir', FLAGS.model_dir, folder=True)
  if FLAGS.tflite:
    storage.check_input('--tflite', FLAGS.tflite, folder=False)
  if FLAGS.label_dir:
    storage.check_input('--label_dir', FLAGS.label_dir, folder=True)
  storage.check_output('--output_dir', FLAGS.output_dir, folder=True)


def _label_paths(stems):
  """Each image's label file in --label_dir; raises if one is missing."""
  paths = {stem: os.path.join(FLAGS.label_dir, stem + '.png')
           for stem in stems}
  for stem, path in paths.items():
    if not os.path.isfile(path):
      raise validation.MissingFileError(
          f'--label_dir={FLAGS.label_dir} has no label {stem}.png for image '
          f'{stems[stem]}; it needs <image stem>.png per image.')
  return paths


def _write_outputs(stem, image, labels, palette):
  """Writes the raw, colourised and overlay PNGs of one image."""
  join = os.path.join
  visualize.write_label_png(join(FLAGS.output_dir, 'labels', stem + '.png'),
                            labels)
  visualize.write_rgb_png(join(FLAGS.output_dir, 'colored', stem + '.png'),
                          visualize.colorize(labels, palette))
  visualize.write_rgb_png(
      join(FLAGS.output_dir, 'overlay', stem + '.png'),
      visualize.overlay(image, labels, palette, FLAGS.alpha))
  if FLAGS.cityscapes_label_ids:
    visualize.write_label_png(
        join(FLAGS.output_dir, 'label_ids', stem + '.png'),
        layouts.to_cityscapes_label_ids(labels))


def _tally(metadata):
  """An empty `tally.Tally` of the export's classes and ignore label."""
  if 'class_names' not in metadata:
    raise app.UsageError(
        'The model has no segmentation.json with class names (in a '
        'SavedModel\'s assets.extra/, beside a .tflite); export it again '
        'with train_and_eval to score it with --label_dir.')
  return tally.Tally(metadata['class_names'], metadata['ignore_label'],
                     FLAGS.boundary_tolerance)


def _report(scored, global_step):
  """Prints the table and saves metrics.json and the three charts."""
  record = scored.record(global_step)
  print(results.format_table(record))
  results.warn_never_predicted(record)
  confusion = scored.confusion
  with open(os.path.join(FLAGS.output_dir, 'metrics.json'), 'w') as f:
    json.dump(dict(record, confusion_matrix=confusion.tolist()), f, indent=2)
  title = f'{scored.images} images of {FLAGS.label_dir}'
  visualize.save_confusion_heatmap(
      confusion, scored.class_names,
      os.path.join(FLAGS.output_dir, 'confusion_matrix.png'), title)
  visualize.save_iou_chart(record['per_class_iou'], record['mean_iou'],
                           os.path.join(FLAGS.output_dir, 'per_class_iou.png'),
                           title)
  visualize.save_scores_chart(
      record, os.path.join(FLAGS.output_dir, 'per_class_scores.png'), title)
  return record


def _predict_all(model, stems, palette, scored, label_paths):
  """Predicts and writes every image; scores it into `scored` if given."""
  progress = tf.keras.utils.Progbar(len(stems), unit_name='image')
  for index, (stem, path) in enumerate(stems.items()):
    with open(path, 'rb') as f:
      encoded = f.read()
    labels = model(encoded, name=path)
    image = tf.io.decode_image(encoded, channels=3,
                               expand_animations=False).numpy()
    _write_outputs(stem, image, labels, palette)
    if scored:
      scored.add(encode.read_label(label_paths[stem]), labels)
    progress.update(index + 1)


def _load_model():
  """(model, where it came from): a .tflite, or a SavedModel."""
  if FLAGS.tflite:
    stride = FLAGS.window_stride and [int(v) for v in FLAGS.window_stride]
    return tflite_runner.TfliteModel(
        FLAGS.tflite, window_stride=stride,
        window_blending=FLAGS.window_blending), FLAGS.tflite
  if FLAGS.window_stride or FLAGS.window_blending:
    raise app.UsageError('--window_stride and --window_blending are for '
                         '--tflite; a SavedModel tiles as it was exported '
                         '(WINDOW_SIZE).')
  saved_model_dir = (FLAGS.saved_model or
                     predictor.find_saved_model(FLAGS.model_dir))
  return predictor.Predictor(saved_model_dir), saved_model_dir


def _main(argv):
  """Predicts every image; a path or setting it cannot use is a
  ConfigurationError, reported before any work where it can be."""
  del argv  # The program alone (command_line.run).
  check_paths()
  stems = _stems(predictor.list_images(FLAGS.input))
  label_paths = _label_paths(stems) if FLAGS.label_dir else None
  model, source = _load_model()
  metadata = model.metadata or {}
  scored = _tally(metadata) if FLAGS.label_dir else None
  palette = choose_palette(metadata)
  kinds = ['labels', 'colored', 'overlay'] + (
      ['label_ids'] if FLAGS.cityscapes_label_ids else [])
  for kind in kinds:
    os.makedirs(os.path.join(FLAGS.output_dir, kind), exist_ok=True)
  print(f'Predicting {len(stems)} images with {source}')
  _predict_all(model, stems, palette, scored, label_paths)
  if scored:
    _report(scored, model.global_step)
  print(f'Wrote {", ".join(kinds)} to {FLAGS.output_dir}')


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
