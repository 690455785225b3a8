"""An imported DeepLab checkpoint as INIT_CHECKPOINT, and exported by --mode=export."""

import os
import shutil
import tempfile

import gin
import tensorflow as tf

from official_seg.export import predictor
from official_seg.export import signatures
from official_seg.runtime import estimator as estimator_lib
from official_seg.runtime import experiment
from official_seg.runtime import gin_config
from official_seg.runtime import run_config as run_config_lib
from tests import deeplab_testing
from tests import testing_utils
from tests.deeplab import mobilenet_v2_test as mobilenet_test
from tests.training import warm_start_test

_HEIGHT, _WIDTH = 41, 49


class ImportedCheckpointUseTest(testing_utils.TinyDataTestCase):
  """DeepLab's MobileNetV2 at half width, imported once (the cheapest)."""
  num_train = 2
  num_val = 1

  @classmethod
  def setUpClass(cls):
    """One DeepLab checkpoint and its import, shared by the tests."""
    super().setUpClass()
    cls.root = tempfile.mkdtemp()
    cls.images = deeplab_testing.random_images(2, 1, _HEIGHT, _WIDTH)
    deeplab_dir = os.path.join(cls.root, 'deeplab')
    os.makedirs(deeplab_dir)
    _, cls.expected = mobilenet_test.write_reference(deeplab_dir, cls.images,
                                                     (16,))
    cls.imported = os.path.join(cls.root, 'imported')
    gin.clear_config()
    cls.ours, _ = deeplab_testing.import_tool.import_checkpoint(
        deeplab_dir, mobilenet_test.GIN_FILES, mobilenet_test.bindings(16),
        cls.imported)

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.root, ignore_errors=True)
    super().tearDownClass()

  def _parse(self, extra=()):
    gin.clear_config()
    gin_config.parse(
        ['experiments/quickstart.gin', 'backbones/deeplab_mobilenet_v2.gin'],
        testing_utils.tiny_bindings(
            self.data_dir, train_steps=1,
            extra=mobilenet_test.bindings(16) + list(extra)),
        finalize=False)

  def test_init_checkpoint_fills_every_variable(self):
    self._parse([f"INIT_CHECKPOINT = '{self.imported}'"])
    estimator, train_fn = estimator_lib.build_estimator(
        run_config_lib.build_run_config(self.create_tempdir().full_path))[:2]
    hook = warm_start_test._InitialValues()  # pylint: disable=protected-access
    estimator.train(train_fn, max_steps=1, hooks=[hook])
    reader = tf.train.load_checkpoint(self.ours)
    names = set(reader.get_variable_to_shape_map()) - {'global_step'}
    self.assertNotEmpty(names)
    for name in sorted(names):
      self.assertAllEqual(hook.values[name], reader.get_tensor(name),
                          msg=name)

  def test_mode_export_serves_deeplabs_logits(self):
    self._parse([f'EVAL_CROP_SIZE = [{_HEIGHT}, {_WIDTH}]'])
    experiment.run('export', self.imported)
    loaded = tf.saved_model.load(predictor.find_saved_model(self.imported))
    # The parser maps [0, 255] pixels to DeepLab's [-1, 1].
    pixels = tf.constant((self.images + 1.0) * 127.5)
    served = loaded.signatures[signatures.IMAGE_TENSOR_PROBABILITIES](
        images=pixels)['logits']
    # The backbone file sets DeepLab's evaluation: its predict_labels
    # resizes logits to the image with aligned corners.
    expected = tf.compat.v1.image.resize_bilinear(
        self.expected[16], (_HEIGHT, _WIDTH), align_corners=True)
    self.assertAllClose(served, expected, rtol=0.0, atol=1e-4)
