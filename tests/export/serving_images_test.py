"""The serving receiver's images of N channels and 16 bits, as evaluated."""

import numpy as np
import tensorflow as tf

from official_seg.data import encode
from official_seg.data import preprocess
from official_seg.export import saved_model
from official_seg.export import serving_images


class ServingImagesTest(tf.test.TestCase):
  """Served pixels equal the eval parser's of the same stored values."""

  def _parser(self, channels, bit_depth):
    return preprocess.Parser(False, ignore_label=255, crop_size=(6, 6),
                             mean_rgb=[100.0], stddev_rgb=[50.0],
                             image_channels=channels,
                             image_bit_depth=bit_depth)

  def _evaluated(self, image, parser):
    decoded = {'image': tf.constant(image), 'filename': tf.constant('x'),
               'label': tf.zeros(image.shape[:2] + (1,), tf.uint8),
               'height': image.shape[0], 'width': image.shape[1]}
    return parser(decoded)[0]['image']

  def test_16_bit_pngs_of_1_3_and_4_channels_are_served_as_evaluated(self):
    rng = np.random.default_rng(7)
    for channels in (1, 3, 4):
      image = rng.integers(0, 4096, (5, 4, channels)).astype(np.uint16)
      parser = self._parser(channels, 16)
      served, sizes, _ = serving_images.decode_images(
          tf.constant([encode.encode_pixels_png(image)]), parser)
      self.assertAllEqual(sizes, [[5, 4]])
      self.assertAllEqual(served[0], self._evaluated(image, parser))

  def test_float_tensor_of_five_channels_is_normalized_by_the_parser(self):
    image = np.random.default_rng(8).integers(
        0, 65536, (1, 3, 2, 5)).astype(np.float32)
    parser = self._parser(5, 16)
    with tf.Graph().as_default():
      receiver = saved_model.serving_input_receiver_fn(parser)()
      pixels = receiver.receiver_tensors_alternatives['image_tensor']['images']
      with tf.compat.v1.Session() as session:
        served = session.run(receiver.features['image'], {pixels: image})
    expected = (image * 255 / 65535 - 100) / 50
    self.assertAllClose(served, expected, rtol=1e-5, atol=1e-5)


if __name__ == '__main__':
  tf.test.main()
