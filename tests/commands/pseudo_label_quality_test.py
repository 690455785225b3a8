"""pseudo_label_quality on a tiny trained, exported model."""

import io
import json
import os
import shutil
import tempfile

from absl.testing import parameterized
import gin
import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.commands import pseudo_label_quality
from official_seg.data import tfexample
from official_seg.export import predictor
from official_seg.export import signatures
from official_seg.export import tflite_runner
from official_seg.runtime import experiment
from tests import testing_utils
from tests.commands import command_testing

_CLASSES = 4
_IGNORE = 255


def _records(data_dir, split, limit):
  """(encoded image, label [h, w]) of the split's first records, via protos."""
  found = []
  for path in sorted(tf.io.gfile.glob(tfexample.shard_pattern(data_dir,
                                                              split))):
    for record in tf.data.TFRecordDataset(path):
      feature = tf.train.Example.FromString(record.numpy()).features.feature
      label = Image.open(io.BytesIO(
          feature[tfexample.LABEL_ENCODED].bytes_list.value[0]))
      found.append((feature[tfexample.IMAGE_ENCODED].bytes_list.value[0],
                    np.asarray(label)))
  return found[:limit]


def _served(export_dir, records):
  """The probabilities signature's output for each record, cut to its label."""
  serve = tf.saved_model.load(export_dir).signatures[signatures.PROBABILITIES]
  return [serve(images=tf.constant([encoded]))['probabilities'][0].numpy()[
      :label.shape[0], :label.shape[1]] for encoded, label in records]


def _expected(probabilities, labels, threshold):
  """Kept counts by (true, pseudo) and labelled counts, by NumPy bincount."""
  kept = np.zeros((_CLASSES, _CLASSES), np.int64)
  labelled = np.zeros(_CLASSES, np.int64)
  for probability, label in zip(probabilities, labels):
    valid = label != _IGNORE
    labelled += np.bincount(label[valid], minlength=_CLASSES)
    chosen = valid & (probability.max(-1) >= threshold)
    pairs = label[chosen] * _CLASSES + probability.argmax(-1)[chosen]
    kept += np.bincount(pairs, minlength=_CLASSES ** 2).reshape(kept.shape)
  return kept, labelled


class PseudoLabelQualityToolTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.data_dir = os.path.join(cls.root, 'data')
    testing_utils.write_tiny_dataset(cls.data_dir, num_train=4, num_val=2,
                                     num_shards=1)
    cls.model_dir = os.path.join(cls.root, 'model')
    testing_utils.copy_trained_tiny_model(cls.model_dir)
    testing_utils.parse_tiny_quickstart(cls.data_dir)
    experiment.run('export', cls.model_dir)
    gin.clear_config()
    cls.export_dir = predictor.find_saved_model(cls.model_dir)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def _run(self, **flags):
    flags = dict(dict(
        saved_model=self.model_dir, gin_file=['experiments/quickstart.gin'],
        gin_param=testing_utils.tiny_bindings(self.data_dir)), **flags)
    return command_testing.run(pseudo_label_quality, **flags)

  def test_figures_equal_numpy_on_the_served_probabilities(self):
    # The first 3 train images (the default split), served by hand.
    records = _records(self.data_dir, 'train', 3)
    labels = [label for _, label in records]
    probabilities = _served(self.export_dir, records)
    confidence = np.concatenate([p.max(-1).ravel() for p in probabilities])
    # Thresholds that keep about three quarters and a quarter of the pixels.
    thresholds = [float(v) for v in np.quantile(confidence, [0.25, 0.75])]
    output = os.path.join(self.create_tempdir().full_path, 'quality.json')
    result = self._run(thresholds=[repr(t) for t in thresholds],
                       max_images=3, output=output)
    self.assertEqual(result.status, 0, result.stderr)
    with open(output) as f:
      found = json.load(f)
    self.assertEqual(found['num_images'], 3)
    self.assertEqual(found['saved_model'], self.export_dir)
    for figures, threshold in zip(found['thresholds'], thresholds):
      kept, labelled = _expected(probabilities, labels, threshold)
      self.assertEqual(figures['labelled'], list(labelled))
      self.assertAllClose(figures['kept_share'], kept.sum() / labelled.sum())
      self.assertAllClose(figures['pixel_accuracy'],
                          np.trace(kept) / kept.sum())
      with np.errstate(invalid='ignore'):
        coverage = kept.sum(1) / labelled
        precision = np.diag(kept) / kept.sum(0)
      self.assertAllClose([np.nan if v is None else v
                           for v in figures['coverage']], coverage)
      self.assertAllClose([np.nan if v is None else v
                           for v in figures['precision']], precision)
      self.assertRegex(result.stdout,
                       rf'kept share\s+{kept.sum() / labelled.sum():.4f}')
    shares = [figures['kept_share'] for figures in found['thresholds']]
    self.assertGreater(shares[0] - shares[1], 0.2, 'a vacuous comparison')
    self.assertIn("split 'train'", result.stdout)
    self.assertRegex(result.stdout, r'\ntriangle\s+\d\.\d{4}')

  def test_the_export_s_own_resize_wins_over_the_gin_files(self):
    # The export records that its parser does not resize; gin files that
    # say otherwise would cut every image at the wrong size.
    self.assertEqual(predictor.Predictor(self.export_dir).resize_range,
                     (None, None, None))
    resize = (20, 33, 8)
    records = _records(self.data_dir, 'train', 3)
    shapes = [label.shape for _, label in records]
    # The median confidence: a threshold that any shift of the cut moves.
    threshold = np.median(np.concatenate([
        p.max(-1).ravel() for p in _served(self.export_dir, records)]))
    self.assertNotEqual([tflite_runner.fitted_size(shape, (np.inf, np.inf),
                                                   resize) for shape in shapes],
                        shapes, 'a vacuous comparison')
    found = []
    for extra in ([], [f'Parser.{name} = {value}' for name, value in zip(
        ('min_resize_value', 'max_resize_value', 'resize_factor'), resize)]):
      output = os.path.join(self.create_tempdir().full_path, 'quality.json')
      result = self._run(
          thresholds=[repr(float(threshold))], max_images=3,
          output=output,
          gin_param=testing_utils.tiny_bindings(self.data_dir) + extra)
      self.assertEqual(result.status, 0, result.stderr)
      with open(output) as f:
        found.append(json.load(f)['thresholds'])
    self.assertEqual(found[0], found[1])

  @parameterized.parameters(((None, None, None), (12, 15)),
                            ((20, None, None), (20, 25)))
  def test_probabilities_are_cut_and_mapped_back_as_served_labels(
      self, resize_range, size):
    padded = np.random.default_rng(0).random((30, 30, _CLASSES))
    found = predictor.probabilities_at_decoded_size(
        padded, (12, 15), resize_range)
    self.assertEqual(found.shape, (12, 15, _CLASSES))
    # The SavedModel's own labels of an image the eval parser resized.
    served = signatures.labels_at_original_size(
        padded.argmax(-1)[None].astype(np.int32), np.array([size], np.int32),
        np.array([[12, 15]], np.int32))[0]
    self.assertAllEqual(found.argmax(-1), served)
    if resize_range[0] is None:
      self.assertAllClose(found, padded[:12, :15])

  @parameterized.named_parameters(
      ('threshold_of_one', dict(thresholds=['0.7', '1.0']),
       'Threshold 1.0 must lie in [0, 1)'),
      ('threshold_not_a_number', dict(thresholds=['high']),
       '--thresholds=high: give numbers in [0, 1)'),
      ('saved_model_missing', dict(saved_model='{root}/nope'),
       '--saved_model={root}/nope: no such folder.'),
      ('split_without_shards', dict(split='tset'),
       "No TFRecord shards match '{data}/tset-?????-of-?????.tfrecord'"))
  def test_a_mistake_is_one_line_and_exit_2(self, changed, message):
    root = self.create_tempdir().full_path
    changed = {key: value.format(root=root) if isinstance(value, str)
               else value for key, value in changed.items()}
    result = self._run(**changed)
    self.assertEqual(result.status, 2)
    lines = result.stderr.splitlines()
    self.assertLen(lines, 2, result.stderr)
    self.assertEqual(lines[0], 'Invalid configuration:')
    self.assertStartsWith(lines[1], message.format(root=root,
                                                   data=self.data_dir))


if __name__ == '__main__':
  tf.test.main()
