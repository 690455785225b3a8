"""Writes label maps, colourised labels and overlays from an exported model.

  predict_images --model_dir=runs/quickstart --input='photos/*.jpg' \
    --output_dir=/tmp/predictions
  predict_images --saved_model=runs/quickstart/export/best/1712345678 \
    --input=val/images --label_dir=val/labels --output_dir=/tmp/val
  predict_images \
    --tflite=runs/quickstart/export/tflite/model_int8.tflite \
    --input=val/images --label_dir=val/labels --output_dir=/tmp/val_int8

Images (JPEG, PNG, TIFF) must have the channels and depth of the model's
dataset (IMAGE_CHANNELS, IMAGE_BIT_DEPTH; an RGB model also takes grey and
RGBA); another kind stops with one line naming the file. For each image
<stem> it writes labels/<stem>.png (class ids, one channel),
colored/<stem>.png and overlay/<stem>.png; with a SavedModel also
confidence/<stem>.npy (each pixel's top probability) and entropy/<stem>.npy
(of its probabilities, in nats), float32 at the image's size, after the
export's fitted temperature (fit_temperature) when it has one; a sigmoid
(multi-label) export's labels/ hold the bit mask of its classes, and it
writes masks/<class>/<stem>.png (255 where the class is predicted) and
class_probabilities/<stem>.npy (float32 [H, W, classes]) instead. With
--label_dir (class-id PNGs, or colour masks in the export's palette or
--palette) also the table of per-class IoU, Dice/F1, precision, recall and
Boundary IoU with their means, metrics.json (with the expected calibration
error of the confidence maps), confusion_matrix.png, per_class_iou.png and
per_class_scores.png.
"""

import collections
import json
import os
import sys

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from official_seg import command_line
from official_seg import validation
from official_seg.data import layouts
from official_seg.data import palettes
from official_seg.data import storage
from official_seg.datasets import colour_masks
from official_seg.datasets import shipped_masks
from official_seg.evaluation import boundary
from official_seg.evaluation import calibration
from official_seg.evaluation import results
from official_seg.evaluation import tally
from official_seg.evaluation import visualize
from official_seg.export import file_prediction
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
flags.DEFINE_string('input', None, 'A folder of .jpg/.png/.tif images, or a '
                    'glob; of the channels and depth of the model\'s '
                    'dataset.', flag_values=FLAGS)
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
                  'Colours of the pictures and of colour-mask labels; '
                  'default the palette of the export\'s dataset, else '
                  'pascal_voc.', flag_values=FLAGS)
flags.DEFINE_bool('unknown_colours_to_ignore', False,
                  'With colour-mask labels: colours of no class are '
                  'ignored instead of an error.', flag_values=FLAGS)
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
    predictor.check_saved_model('--saved_model', FLAGS.saved_model)
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


def _report(scored, global_step, counts, temperature=None):
  """Prints the table and saves metrics.json and the three charts.

  `counts` are the confidence bins' (`_predict_all`); with any, the record
  holds the expected calibration error and the temperature (None: none).
  """
  record = scored.record(global_step)
  if counts.any():
    record['expected_calibration_error'] = (
        calibration.expected_calibration_error(counts))
    record['temperature'] = temperature
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


def _write_maps(stem, outputs):
  """Writes the confidence and entropy maps a SavedModel gives, as .npy."""
  for kind in ('confidence', 'entropy'):
    if kind in outputs:
      os.makedirs(os.path.join(FLAGS.output_dir, kind), exist_ok=True)
      np.save(os.path.join(FLAGS.output_dir, kind, stem + '.npy'),
              outputs[kind].astype(np.float32))


def _write_class_maps(stem, outputs, model):
  """A sigmoid export's masks/<class>/<stem>.png (0 and 255) and .npy maps."""
  if 'masks' not in outputs:
    return
  for index, name in enumerate(model.metadata['class_names']):
    folder = os.path.join(FLAGS.output_dir, 'masks', name)
    os.makedirs(folder, exist_ok=True)
    visualize.write_label_png(os.path.join(folder, stem + '.png'),
                              outputs['masks'][..., index] * 255)
  folder = os.path.join(FLAGS.output_dir, 'class_probabilities')
  os.makedirs(folder, exist_ok=True)
  np.save(os.path.join(folder, stem + '.npy'),
          outputs['class_probabilities'].astype(np.float32))


def _score(scored, outputs, label_path, colours):
  """Adds one image to `scored`; returns its ECE counts (0 without maps)."""
  if 'masks' in outputs:
    raise validation.ConfigurationError(
        f'--label_dir={FLAGS.label_dir}: scoring a sigmoid (multi-label) '
        'export is for train_and_eval --mode=eval; predict without '
        '--label_dir.')
  truth = colour_masks.read_colour_label(
      label_path, colours, FLAGS.unknown_colours_to_ignore)
  scored.add(truth, outputs['semantic'])
  if 'confidence' not in outputs:
    return 0.0
  return calibration.confidence_bin_counts(
      outputs['confidence'], outputs['semantic'], truth, scored.ignore_label)


def _predict_all(model, stems, palette, scored, label_paths):
  """Predicts and writes every image; scores it into `scored` if given.

  Returns:
    float64 [bins, 3], the `calibration.confidence_bin_counts` of the
    scored images' confidence maps (zeros without).
  """
  progress = tf.keras.utils.Progbar(len(stems), unit_name='image')
  colours = shipped_masks.colours_of_classes(
      FLAGS.palette or model.metadata.get('palette'),
      model.metadata['class_names'],
      model.metadata['ignore_label']) if scored else None
  counts = np.zeros([calibration.NUM_BINS, 3])
  for index, (stem, path) in enumerate(stems.items()):
    outputs, image = file_prediction.predict_file(model, path)
    _write_outputs(stem, visualize.display_rgb(image), outputs['semantic'],
                   palette)
    _write_maps(stem, outputs)
    _write_class_maps(stem, outputs, model)
    if scored:
      counts = counts + _score(scored, outputs, label_paths[stem], colours)
    progress.update(index + 1)
  return counts


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
  counts = _predict_all(model, stems, palette, scored, label_paths)
  if scored:
    _report(scored, model.global_step, counts,
            getattr(model, 'temperature', None))
  kinds += [kind for kind in ('confidence', 'entropy', 'masks',
                              'class_probabilities')
            if os.path.isdir(os.path.join(FLAGS.output_dir, kind))]
  print(f'Wrote {", ".join(kinds)} to {FLAGS.output_dir}')


def main(argv=None):
  """The command's entry point; returns its exit status (`command_line`)."""
  return command_line.run(_main, FLAGS, argv, __doc__)


if __name__ == '__main__':
  sys.exit(main())
