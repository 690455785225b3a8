"""Tests of the scarce-label synthetic set: classes, distractors, scales, occlusion, lighting."""

import colorsys

import numpy as np
import tensorflow as tf

from official_seg.data import image_classes
from official_seg.data import tfexample
from official_seg.datasets import scarce
from tests import testing_utils

_SAMPLES = 30


def _draw(count=_SAMPLES, seed=0):
  rng = np.random.default_rng(seed)
  return [scarce.make_sample(rng) for _ in range(count)]


class ScarceTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.samples = _draw()

  def test_classes_need_shape_and_texture_together(self):
    self.assertGreaterEqual(len(scarce.CLASSES), 8)
    self.assertLen(set(scarce.CLASSES), len(scarce.CLASSES))
    for shape in scarce.SHAPES:
      self.assertGreaterEqual(sum(s == shape for s, _ in scarce.CLASSES), 2)
    for texture in scarce.TEXTURES:
      self.assertGreaterEqual(sum(t == texture for _, t in scarce.CLASSES), 2)
    seen = set()
    for _, label, objects in self.samples:
      for obj in objects:
        if obj.class_id:
          self.assertEqual(scarce.CLASSES[obj.class_id - 1],
                           (obj.shape, obj.texture))
          seen.add(obj.class_id)
      self.assertTrue(set(np.unique(label)) <=
                      set(range(len(scarce.CLASS_NAMES))) |
                      {scarce.IGNORE_LABEL})
    self.assertEqual(seen, set(range(1, len(scarce.CLASS_NAMES))))

  def test_distractors_of_no_class_label_background(self):
    distractors = [(obj, label) for _, label, objects in self.samples
                   for obj in objects if obj.class_id == 0]
    self.assertGreater(len(distractors), 5)
    kinds = {(o.shape in scarce.DISTRACTOR_SHAPES,
              o.texture in scarce.DISTRACTOR_TEXTURES)
             for o, _ in distractors}
    self.assertEqual(kinds, {(True, False), (False, True)})

  def test_scales_and_occlusion_vary(self):
    objects = [obj for _, _, objs in self.samples for obj in objs]
    sizes = [obj.size for obj in objects]
    self.assertGreater(max(sizes) / min(sizes), 3.0)
    occluded = [obj for obj in objects if 0 < obj.visible < obj.drawn]
    self.assertGreater(len(occluded), 5)
    for obj in objects:
      self.assertLessEqual(obj.visible, obj.drawn)

  def test_image_sizes_lighting_and_colours_vary(self):
    shapes = {image.shape for image, _, _ in self.samples}
    for height, width, channels in shapes:
      self.assertBetween(height, 180, 220)
      self.assertBetween(width, 180, 220)
      self.assertEqual(channels, 3)
    means = np.array([image.reshape(-1, 3).mean(0)
                      for image, _, _ in self.samples])
    # Brightness and colour cast differ from image to image.
    self.assertGreater(means.mean(1).std(), 8)
    self.assertGreater((means / means.mean(1, keepdims=True)).std(0).min(),
                       0.03)
    # One class comes in many hues: colour is no cue.
    hues = []
    for image, label, _ in self.samples:
      for class_id in np.unique(label):
        if class_id == 1:
          rgb = image[label == 1].mean(0) / 255
          hues.append(colorsys.rgb_to_hsv(*rgb)[0])
    self.assertGreater(len(hues), 3)
    self.assertGreater(np.ptp(hues), 0.3)

  def test_same_seed_same_images(self):
    first, second = _draw(3, seed=5), _draw(3, seed=5)
    for (image, label, objects), (image2, label2, objects2) in zip(first,
                                                                  second):
      self.assertAllEqual(image, image2)
      self.assertAllEqual(label, label2)
      self.assertEqual(objects, objects2)

  def test_written_split_decodes(self):
    output = self.create_tempdir().full_path
    written = scarce.write_dataset(output, {'train': 3, 'val': 2},
                                   num_shards=2)
    self.assertEqual(written, {'train': 3, 'val': 2})
    self.assertEqual(image_classes.read(output, 'train', 'S'),
                     testing_utils.shard_image_labels(output, 'train'))
    records = tf.data.TFRecordDataset(
        tf.io.gfile.glob(f'{output}/train-*.tfrecord'))
    decoder = tfexample.Decoder()
    rng = np.random.default_rng(100)  # The train split's seed.
    expected = sorted((scarce.make_sample(rng)[:2] for _ in range(3)),
                      key=lambda pair: pair[0].shape)
    decoded = sorted(([d['image'].numpy(), d['label'].numpy()[..., 0]]
                      for d in map(decoder.decode, records)),
                     key=lambda pair: pair[0].shape)
    self.assertLen(decoded, 3)
    for (image, label), (image2, label2) in zip(expected, decoded):
      self.assertAllEqual(image, image2)  # PNG is lossless.
      self.assertAllEqual(label, label2)


if __name__ == '__main__':
  tf.test.main()
