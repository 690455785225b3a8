"""predict_images on tiny images, with a stand-in SavedModel."""

import json
import os

from absl.testing import parameterized
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.commands import predict_images
from official_seg.data import palettes
from official_seg.data import preprocess
from official_seg.export import saved_model
from official_seg.export import serving_images
from official_seg.export import signatures
from official_seg.export import tflite_runner
from tests import testing_utils
from tests.commands import command_testing
from tests.evaluation import calibration_test
from tests.evaluation import scores_test
from tests.export import tflite_runner_test

CLASS_NAMES = ['background', 'disk', 'box', 'triangle']


def expected_labels(image):
  """The stand-in's classes: red above 127 adds 1, green above 127 adds 2."""
  return (image[..., 0] > 127) + 2 * (image[..., 1] > 127).astype(np.int64)


def _serve(images):
  """serving_default of an export, with `expected_labels` for a model."""
  # Mean 0 and stddev 1 leave the pixels as decoded.
  parser = preprocess.Parser(False, ignore_label=255, crop_size=(1, 1),
                             mean_rgb=(0.0, 0.0, 0.0),
                             stddev_rgb=(1.0, 1.0, 1.0))
  pixels, sizes, original = serving_images.decode_images(images, parser)
  semantic = (tf.cast(pixels[..., 0] > 127, tf.int32)
              + 2 * tf.cast(pixels[..., 1] > 127, tf.int32))
  return {'semantic': signatures.labels_at_original_size(semantic, sizes,
                                                         original),
          'height': original[:, 0], 'width': original[:, 1]}


def _write_stand_in(export_dir, class_names, palette):
  """A SavedModel with the export's serving_default, variables, metadata."""
  root = tf.train.Checkpoint()
  # Estimator's exports list their variables, global_step among them.
  root.variables = [tf.Variable(7, dtype=tf.int64, name='global_step')]
  root.serve = tf.function(
      _serve, input_signature=[tf.TensorSpec([None], tf.string)])
  tf.saved_model.save(root, export_dir,
                      signatures={signatures.SERVING_DEFAULT: root.serve})
  os.makedirs(os.path.join(export_dir, 'assets.extra'))
  with open(os.path.join(export_dir, 'assets.extra',
                         saved_model.METADATA_FILE), 'w') as f:
    json.dump({'class_names': class_names, 'num_classes': len(class_names),
               'ignore_label': 255, 'palette': palette}, f)


def _probabilities(pixels):
  """The maps stand-in's probabilities: softmax of (r, g, b, 0) / 64."""
  logits = tf.concat([pixels / 64.0, tf.zeros_like(pixels[..., :1])], -1)
  return tf.nn.softmax(logits)


def numpy_probabilities(image, temperature=1.0):
  """`_probabilities` in NumPy, of the logits divided by `temperature`."""
  logits = np.concatenate([image / 64.0, np.zeros(image.shape[:2] + (1,))],
                          axis=-1) / temperature
  exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
  return exp / exp.sum(axis=-1, keepdims=True)


def write_stand_in_with_maps(export_dir, temperature=None):
  """A stand-in export that serves confidence and entropy maps too."""
  parser = preprocess.Parser(False, ignore_label=255, crop_size=(1, 1),
                             mean_rgb=(0.0, 0.0, 0.0),
                             stddev_rgb=(1.0, 1.0, 1.0))

  def serve(images):
    pixels, sizes, original = serving_images.decode_images(images, parser)
    probabilities = _probabilities(pixels)
    semantic = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
    return dict(
        semantic=signatures.labels_at_original_size(semantic, sizes,
                                                    original),
        height=original[:, 0], width=original[:, 1],
        **signatures.uncertainty_outputs(probabilities, sizes, original))

  def serve_probabilities(images):
    pixels, _, _ = serving_images.decode_images(images, parser)
    return {'probabilities': _probabilities(pixels)}

  root = tf.train.Checkpoint()
  root.variables = [tf.Variable(7, dtype=tf.int64, name='global_step')]
  spec = [tf.TensorSpec([None], tf.string)]
  root.serve = tf.function(serve, input_signature=spec)
  root.probabilities = tf.function(serve_probabilities, input_signature=spec)
  tf.saved_model.save(root, export_dir, signatures={
      signatures.SERVING_DEFAULT: root.serve,
      signatures.PROBABILITIES: root.probabilities})
  os.makedirs(os.path.join(export_dir, 'assets.extra'))
  with open(os.path.join(export_dir, 'assets.extra',
                         saved_model.METADATA_FILE), 'w') as f:
    json.dump({'class_names': CLASS_NAMES, 'num_classes': 4,
               'ignore_label': 255, 'palette': 'synthetic'}, f)
  if temperature is not None:
    with open(os.path.join(export_dir, 'assets.extra', 'temperature.json'),
              'w') as f:
      json.dump({'temperature': temperature}, f)


class PredictToolTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    root = self.create_tempdir().full_path
    self.model_dir = os.path.join(root, 'model')
    # The palette as the DatasetInfo of datasets/synthetic.gin holds it.
    self._export('1700000000', 'synthetic')
    self.image_dir = os.path.join(root, 'images')
    self.label_dir = os.path.join(root, 'labels')
    self.output_dir = os.path.join(root, 'out')
    os.makedirs(self.image_dir)
    os.makedirs(self.label_dir)
    rng = np.random.default_rng(0)
    self.images, self.labels = {}, {}
    for stem, size in (('a', (24, 30)), ('b', (20, 20)), ('c', (28, 16))):
      image = rng.integers(0, 256, size + (3,)).astype(np.uint8)
      labels = rng.integers(0, 4, size)
      labels[:2] = 255  # Ignored rows.
      Image.fromarray(image).save(os.path.join(self.image_dir, stem + '.png'))
      Image.fromarray(labels.astype(np.uint8)).save(
          os.path.join(self.label_dir, stem + '.png'))
      self.images[stem], self.labels[stem] = image, labels

  def _export(self, timestamp, palette):
    """Writes a stand-in export; the newest one is the one predicted with."""
    _write_stand_in(os.path.join(self.model_dir, 'export', timestamp),
                    CLASS_NAMES, palette)

  def _call(self, **flags):
    flags = dict(dict(model_dir=self.model_dir, input=self.image_dir,
                      output_dir=self.output_dir), **flags)
    return command_testing.run(predict_images, **flags)

  def _run(self, **flags):
    result = self._call(**flags)
    self.assertEqual(result.status, 0, result.stderr)
    return result.stdout

  def _read(self, kind, stem):
    with Image.open(os.path.join(self.output_dir, kind, stem + '.png')) as f:
      return np.asarray(f)

  def test_writes_pictures_and_scores_against_labels(self):
    printed = self._run(label_dir=self.label_dir)
    palette = palettes.get_palette('synthetic')  # The export's palette.
    confusion = np.zeros((4, 4), np.int64)
    for stem, image in self.images.items():
      predicted = expected_labels(image)
      self.assertAllEqual(self._read('labels', stem), predicted)
      self.assertAllEqual(self._read('colored', stem), palette[predicted])
      self.assertAllEqual(self._read('overlay', stem), np.round(
          0.5 * image + 0.5 * palette[predicted]).astype(np.uint8))
      valid = self.labels[stem] != 255
      np.add.at(confusion, (self.labels[stem][valid], predicted[valid]), 1)
    union = confusion.sum(0) + confusion.sum(1) - np.diag(confusion)
    iou = np.diag(confusion) / union
    metrics = json.load(open(os.path.join(self.output_dir, 'metrics.json')))
    self.assertAllEqual(metrics['confusion_matrix'], confusion)
    self.assertAllClose(list(metrics['per_class_iou'].values()), iou)
    self.assertAllClose(metrics['mean_iou'], iou.mean())
    self.assertEqual(metrics['num_images'], 3)
    expected = scores_test.numpy_scores(confusion)
    for score in ('dice', 'precision', 'recall'):
      self.assertAllClose(list(metrics[f'per_class_{score}'].values()),
                          expected[score])
    # Labels and predictions are pixel noise: every pixel's 7x7 square
    # (the default 3 px) holds other classes, so the bands are the whole
    # labelled images and Boundary IoU is IoU.
    self.assertEqual(metrics['boundary_tolerance'], 3)
    self.assertAllClose(list(metrics['per_class_boundary_iou'].values()), iou)
    self.assertIn('Evaluation at step 7 (3 images)', printed)
    self.assertRegex(printed, rf'mean IoU\s+{iou.mean():.4f}')
    for index, name in enumerate(CLASS_NAMES):
      self.assertRegex(
          printed, rf'{name}\s+{iou[index]:.4f}\s+'
          rf'{expected["dice"][index]:.4f}\s+'
          rf'{expected["precision"][index]:.4f}\s+'
          rf'{expected["recall"][index]:.4f}\s+{iou[index]:.4f}\n')
    for chart in ('confusion_matrix.png', 'per_class_iou.png',
                  'per_class_scores.png'):
      self.assertTrue(os.path.exists(os.path.join(self.output_dir, chart)))

  @parameterized.parameters(None, 2.0)
  def test_confidence_entropy_and_ece_of_an_export_that_serves_them(
      self, temperature):
    write_stand_in_with_maps(
        os.path.join(self.model_dir, 'export', '1700000009'), temperature)
    printed = self._run(label_dir=self.label_dir)
    probabilities, labels = [], []
    for stem, image in self.images.items():
      found = numpy_probabilities(image.astype(np.float64), temperature or 1)
      self.assertAllEqual(self._read('labels', stem), found.argmax(-1))
      for kind, expected in (
          ('confidence', found.max(-1)),
          ('entropy', -(found * np.log(found)).sum(-1))):
        values = np.load(os.path.join(self.output_dir, kind, stem + '.npy'))
        self.assertEqual(values.dtype, np.float32)
        self.assertAllClose(values, expected, rtol=1e-5, atol=1e-6)
      probabilities.append(found.reshape(-1, 4))
      labels.append(self.labels[stem].reshape(-1))
    metrics = json.load(open(os.path.join(self.output_dir, 'metrics.json')))
    ece = calibration_test.numpy_ece(np.concatenate(probabilities),
                                     np.concatenate(labels), 255)
    self.assertAllClose(metrics['expected_calibration_error'], ece,
                        rtol=1e-5)
    self.assertEqual(metrics['temperature'], temperature)
    self.assertIn(f'expected calibration error {ece:.4f}', printed)
    self.assertIn('Wrote labels, colored, overlay, confidence, entropy',
                  printed)

  def test_colour_mask_labels_score_as_their_class_ids(self):
    # Ignored pixels in white, the colour pictures give the ignore label;
    # --unknown_colours_to_ignore reads it as ignored.
    colours = palettes.label_colours('synthetic', 255)
    confusion = np.zeros((4, 4), np.int64)
    for stem, labels in self.labels.items():
      Image.fromarray(colours[labels]).save(
          os.path.join(self.label_dir, stem + '.png'))
      predicted = expected_labels(self.images[stem])
      valid = labels != 255
      np.add.at(confusion, (labels[valid], predicted[valid]), 1)
    self._run(label_dir=self.label_dir, unknown_colours_to_ignore=True)
    metrics = json.load(open(os.path.join(self.output_dir, 'metrics.json')))
    self.assertAllEqual(metrics['confusion_matrix'], confusion)
    self.assertNotIn('expected_calibration_error', metrics)

  def test_a_colour_of_no_class_names_the_mask(self):
    colours = palettes.get_palette('synthetic')
    for stem, labels in self.labels.items():
      mask = colours[np.minimum(labels, 3)]
      if stem == 'b':
        mask[0, 0] = (1, 2, 3)
      Image.fromarray(mask).save(os.path.join(self.label_dir, stem + '.png'))
    result = self._call(label_dir=self.label_dir,
                        input=os.path.join(self.image_dir, 'b.*'))
    self.assertEqual(result.status, 2, result.stderr)
    lines = result.stderr.splitlines()
    self.assertLen(lines, 2, result.stderr)
    self.assertStartsWith(
        lines[1], f'Label {self.label_dir}/b.png has colours of no class of '
        "palette 'synthetic': (1, 2, 3) in 1 pixels.")

  def test_palette_flag_and_cityscapes_label_ids(self):
    self._run(palette='cityscapes', cityscapes_label_ids=True,
              input=os.path.join(self.image_dir, 'b.*'))
    predicted = expected_labels(self.images['b'])
    self.assertAllEqual(self._read('colored', 'b'),
                        palettes.get_palette('cityscapes')[predicted])
    # Train ids 0-3 are the label ids of road, sidewalk, building and wall.
    self.assertAllEqual(self._read('label_ids', 'b'),
                        np.array([7, 8, 11, 12])[predicted])
    self.assertFalse(os.path.exists(os.path.join(self.output_dir, 'labels',
                                                 'a.png')))

  def test_an_export_without_a_palette_is_drawn_in_pascal_voc_colours(self):
    self._export('1700000001', None)
    self._run(input=os.path.join(self.image_dir, 'a.*'))
    predicted = expected_labels(self.images['a'])
    self.assertAllEqual(self._read('colored', 'a'),
                        palettes.pascal_voc_palette()[predicted])

  def test_an_export_with_a_list_palette_is_drawn_in_its_colours(self):
    colours = [[1, 2, 3], [40, 50, 60], [200, 100, 0], [9, 9, 9]]
    self._export('1700000001', colours)
    self._run(input=os.path.join(self.image_dir, 'c.*'))
    predicted = expected_labels(self.images['c'])
    self.assertAllEqual(self._read('colored', 'c'),
                        np.array(colours)[predicted])

  def test_palette_flag_wins_over_the_export(self):
    self._run(palette='ade20k', input=os.path.join(self.image_dir, 'a.*'))
    predicted = expected_labels(self.images['a'])
    self.assertAllEqual(self._read('colored', 'a'),
                        palettes.get_palette('ade20k')[predicted])

  def test_a_file_that_is_not_an_image_is_named(self):
    bad = os.path.join(self.image_dir, 'd.png')
    with open(bad, 'wb') as f:
      f.write(b'not a png')
    result = self._call()
    self.assertEqual(result.status, 2, result.stderr)
    self.assertRegex(result.stderr, f'^Invalid configuration:\n{bad}: input 0 '
                     '.* is not a JPEG or PNG image')

  def test_tflite_writes_the_same_outputs(self):
    path = os.path.join(self.model_dir, 'export', 'tflite', 'm.tflite')
    testing_utils.write_stand_in_tflite(path, (32, 32), {
        'class_names': CLASS_NAMES, 'num_classes': 4, 'ignore_label': 255,
        'palette': 'synthetic', 'global_step': 9})
    printed = self._run(model_dir=None, tflite=path, label_dir=self.label_dir)
    palette = palettes.get_palette('synthetic')
    confusion = np.zeros((4, 4), np.int64)
    for stem, image in self.images.items():
      predicted = expected_labels(image)
      self.assertAllEqual(self._read('labels', stem), predicted)
      self.assertAllEqual(self._read('colored', stem), palette[predicted])
      self.assertAllEqual(self._read('overlay', stem), np.round(
          0.5 * image + 0.5 * palette[predicted]).astype(np.uint8))
      valid = self.labels[stem] != 255
      np.add.at(confusion, (self.labels[stem][valid], predicted[valid]), 1)
    metrics = json.load(open(os.path.join(self.output_dir, 'metrics.json')))
    self.assertAllEqual(metrics['confusion_matrix'], confusion)
    self.assertIn('Evaluation at step 9 (3 images)', printed)
    self.assertIn(f'with {path}', printed)

  def test_tflite_windows_flags_tile_larger_images(self):
    path = os.path.join(self.model_dir, 'export', 'tflite', 'w.tflite')
    os.makedirs(os.path.dirname(path))
    tflite_runner_test._write_context_tflite(path, (12, 14))
    self._run(model_dir=None, tflite=path, window_stride=['5', '6'],
              window_blending='gaussian')
    windowed = tflite_runner.TfliteModel(path, num_threads=1,
                                         window_stride=(5, 6),
                                         window_blending='gaussian')
    scaled = tflite_runner.TfliteModel(path, num_threads=1)
    differs = 0
    for stem, image in self.images.items():
      self.assertAllEqual(self._read('labels', stem),
                          windowed.predict_windowed(image))
      differs += (scaled.predict(image) != self._read('labels', stem)).sum()
    self.assertGreater(differs, 0, 'windows and scaling agree everywhere')

  def test_window_flags_without_tflite_are_a_usage_error(self):
    result = self._call(window_blending='uniform')
    self.assertEqual(result.status, 2, result.stderr)
    self.assertStartsWith(result.stderr, 'Invalid configuration:\n'
                          '--window_stride and --window_blending are for '
                          '--tflite')

  def _mistake(self, **flags):
    """The tool's one line for a mistake: exit 2 before writing anything."""
    result = self._call(**flags)
    self.assertEqual(result.status, 2)
    self.assertFalse(os.path.isdir(os.path.join(self.output_dir, 'labels')))
    lines = result.stderr.splitlines()
    self.assertLen(lines, 2, result.stderr)
    self.assertEqual(lines[0], 'Invalid configuration:')
    return lines[1]

  def test_missing_label_names_the_flag_and_the_file(self):
    os.remove(os.path.join(self.label_dir, 'b.png'))
    self.assertEqual(
        self._mistake(label_dir=self.label_dir),
        f'--label_dir={self.label_dir} has no label b.png for image '
        f'{self.image_dir}/b.png; it needs <image stem>.png per image.')

  @parameterized.named_parameters(
      ('saved_model_missing', dict(saved_model='{root}/nope', model_dir=None),
       '--saved_model={root}/nope: no such folder.'),
      ('saved_model_a_file', dict(saved_model='{root}/a_file',
                                  model_dir=None),
       '--saved_model={root}/a_file is a file, not a folder.'),
      ('saved_model_without_one', dict(saved_model='{root}/images',
                                       model_dir=None),
       '--saved_model={root}/images holds no SavedModel (saved_model.pb)'),
      ('model_dir_missing', dict(model_dir='{root}/nope'),
       '--model_dir={root}/nope: no such folder.'),
      ('model_dir_without_export', dict(model_dir='{root}/images'),
       'No SavedModel under {root}/images/export; export one with '
       'train_and_eval --mode=export --model_dir={root}/images'),
      ('tflite_missing', dict(tflite='{root}/m.tflite', model_dir=None),
       '--tflite={root}/m.tflite: no such file.'),
      ('tflite_a_folder', dict(tflite='{root}/images', model_dir=None),
       '--tflite={root}/images is a folder, not a file.'),
      ('input_missing', dict(input='{root}/nope'),
       "--input '{root}/nope' names no .jpg/.jpeg/.png/.tif/.tiff file"),
      ('label_dir_missing', dict(label_dir='{root}/nope'),
       '--label_dir={root}/nope: no such folder.'),
      ('label_dir_a_file', dict(label_dir='{root}/a_file'),
       '--label_dir={root}/a_file is a file, not a folder.'),
      ('output_dir_a_file', dict(output_dir='{root}/a_file'),
       '--output_dir={root}/a_file is a file; give a folder to write.'),
      ('output_dir_under_a_file', dict(output_dir='{root}/a_file/out'),
       '--output_dir={root}/a_file/out cannot be created: {root}/a_file is '
       'a file.'))
  def test_a_path_mistake_is_one_line_before_any_work(self, flags, message):
    root = os.path.dirname(self.image_dir)
    with open(os.path.join(root, 'a_file'), 'w') as f:
      f.write('not a folder')
    flags = {name: value and value.format(root=root)
             for name, value in flags.items()}
    self.assertStartsWith(self._mistake(**flags),
                          message.format(root=root))


if __name__ == '__main__':
  tf.test.main()
