"""Tests for the validation pictures and the confusion-matrix image of each evaluation."""

import glob
import io
import os

import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.evaluation import eval_summaries


def _pictures(first_value, count):
  """`count` 2x2 pictures whose pixels all equal their index + first_value."""
  values = np.arange(first_value, first_value + count, dtype=np.uint8)
  return np.broadcast_to(values[:, None, None, None], [count, 2, 2, 3])


class EvalSummariesTest(tf.test.TestCase):

  def test_keeps_the_first_valid_pictures_over_batches(self):
    batches = [(_pictures(10, 2), [1.0, 1.0]),
               (_pictures(20, 2), [1.0, 0.0]),  # 21 is batch padding.
               (_pictures(30, 2), [1.0, 1.0])]
    with tf.Graph().as_default():
      pictures = tf.compat.v1.placeholder(tf.uint8, [2, 2, 2, 3])
      valid = tf.compat.v1.placeholder(tf.float32, [2])
      metrics = eval_summaries.picture_metrics({'label': pictures}, valid,
                                               max_images=4)
      summary, update = metrics['pictures/label']
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.local_variables_initializer())
        for batch, mask in batches:
          sess.run(update, {pictures: batch, valid: mask})
        values = tf.compat.v1.Summary.FromString(sess.run(summary)).value
    shown = [np.asarray(Image.open(io.BytesIO(v.image.encoded_image_string)))
             for v in values]
    self.assertEqual([picture[0, 0, 0] for picture in shown], [10, 11, 20, 30])
    self.assertAllEqual(shown[3], np.full([2, 2, 3], 30, np.uint8))

  def test_confusion_matrix_image_written_at_the_step(self):
    eval_dir = self.create_tempdir().full_path
    eval_summaries.write_confusion_image(
        eval_dir, 7, [[5, 1], [0, 4]], ['background', 'object'])
    events = [event for path in glob.glob(os.path.join(eval_dir, 'events.*'))
              for event in tf.compat.v1.train.summary_iterator(path)
              if event.summary.value]
    self.assertLen(events, 1)
    self.assertEqual(events[0].step, 7)
    (value,) = events[0].summary.value
    self.assertEqual(value.tag, eval_summaries.CONFUSION_IMAGE_TAG)
    picture = Image.open(io.BytesIO(value.image.encoded_image_string))
    self.assertEqual(picture.size, (value.image.width, value.image.height))
    self.assertEqual(picture.format, 'PNG')


if __name__ == '__main__':
  tf.test.main()
