"""A real TensorBoard on a short run's model dir shows its pictures, scalars and matrices."""

import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import numpy as np
from PIL import Image
import tensorflow as tf

from official_seg.data import palettes
from official_seg.evaluation import results
from official_seg.runtime import experiment
from tests import testing_utils

_TENSORBOARD = os.path.join(os.path.dirname(sys.executable), 'tensorboard')
_CLASSES = ('background', 'disk', 'box', 'triangle')  # datasets/synthetic.gin
_WHITE = (255, 255, 255)  # The documented colour of ignored pixels.


def _free_port():
  with socket.socket() as sock:
    sock.bind(('127.0.0.1', 0))
    return sock.getsockname()[1]


def _first_val_label(data_dir):
  """The label of the split's first example as the eval input reads it."""
  testing_utils.parse_tiny_quickstart(data_dir)
  _, labels = next(iter(testing_utils.make_input_fn(False)({'batch_size': 1})))
  return labels.numpy()[0, ..., 0]


# Checkpoints at steps 0, 75 and 150: train_and_eval evaluates 75 and 150
# (never the untrained step 0). Early checkpoints of this tiny model predict
# one class everywhere at evaluation, so two of them can paint the same
# prediction (docs/tensorboard.md); steps 75 and 150 paint different ones.
_TRAIN_STEPS = 150
_CHECKPOINT_STEPS = 75


class TensorBoardTest(testing_utils.TinyDataTestCase):
  """One short train_and_eval run, then TensorBoard's HTTP API on its model dir."""

  num_train = 6
  num_val = 5

  def setUp(self):
    super().setUp()
    self.model_dir = self.create_tempdir().full_path
    # In this process: what the binary runs after parsing its flags; the
    # event files, pictures and graph are the same. TensorBoard is the
    # process here.
    testing_utils.parse_tiny_quickstart(
        self.data_dir, train_steps=_TRAIN_STEPS,
        # Seeded: an unseeded run could predict background at both
        # evaluated checkpoints, and paint the same picture twice.
        extra=['build_run_config.tf_random_seed = 0',
               'build_dataset.seed = 0',
               # The users' default, which tiny_bindings turns off.
               'build_run_config.save_graph_def = True',
               f'host_call.image_summary_steps = {_CHECKPOINT_STEPS}',
               'build_run_config.save_checkpoints_steps = '
               f'{_CHECKPOINT_STEPS}'])
    experiment.run('train_and_eval', self.model_dir)
    self.port = _free_port()
    server = subprocess.Popen(
        [_TENSORBOARD, f'--logdir={self.model_dir}', '--host=127.0.0.1',
         f'--port={self.port}', '--load_fast=false', '--reload_interval=0'],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    self.addCleanup(self._stop, server)
    self._wait_until_loaded()

  def _stop(self, server):
    server.terminate()
    try:
      server.wait(timeout=20)
    except subprocess.TimeoutExpired:
      server.kill()
      server.wait()

  def _get(self, path, **query):
    url = f'http://127.0.0.1:{self.port}{path}'
    if query:
      url += '?' + urllib.parse.urlencode(query)
    with urllib.request.urlopen(url, timeout=30) as response:
      return response.read()

  def _json(self, path, **query):
    return json.loads(self._get(path, **query))

  def _wait_until_loaded(self):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
      try:
        tags = self._json('/data/plugin/images/tags')
        if 'eval' in tags and '.' in tags:
          return
      except OSError:
        pass
      time.sleep(0.5)
    self.fail('TensorBoard did not serve both runs within 120 s.')

  def _images(self, run, tag):
    """{step: uint8 [H, W, C]} of one image tag."""
    found = {}
    for entry in self._json('/data/plugin/images/images', run=run, tag=tag,
                            sample=0):
      png = self._get('/data/plugin/images/individualImage?' + entry['query'])
      found[entry['step']] = np.asarray(Image.open(io.BytesIO(png)))
    return found

  def test_dashboards_show_pictures_scalars_and_confusion_matrix(self):
    evaluated = sorted(r['global_step'] for r in
                       results.read_records(os.path.join(self.model_dir,
                                                         'eval')))
    self.assertGreaterEqual(len(evaluated), 2)
    scalars = self._json('/data/plugin/scalars/tags')
    for name in _CLASSES:
      self.assertIn(f'iou/{name}', scalars['eval'])
    self.assertIn('pixel_accuracy', scalars['eval'])
    for name in ('gradient_norm', 'labelled_pixels', 'examples_per_second',
                 'learning_rate', 'loss/total'):
      self.assertIn(name, scalars['.'])
    iou = self._json('/data/plugin/scalars/scalars', run='eval',
                     tag='iou/background')
    self.assertEqual(sorted(point[1] for point in iou), evaluated)

    images = self._json('/data/plugin/images/tags')
    self.assertEqual(
        {'pictures/image', 'pictures/label', 'pictures/prediction'},
        set(images['.']))
    self.assertEqual(sorted(self._images('.', 'pictures/label')),
                     list(range(0, _TRAIN_STEPS, _CHECKPOINT_STEPS)))
    for tag in ('confusion_matrix/image', 'pictures/image/0',
                'pictures/label/0', 'pictures/prediction/0'):
      self.assertEqual(sorted(self._images('eval', tag)), evaluated, tag)

    # The first validation example's label, painted independently.
    label = _first_val_label(self.data_dir)
    colours = palettes.get_palette('synthetic').copy()
    colours[255] = _WHITE
    pictures = self._images('eval', 'pictures/label/0')
    for step in evaluated:
      self.assertAllEqual(pictures[step][..., :3], colours[label])
    # The prediction picture of the same example at two checkpoints.
    predictions = self._images('eval', 'pictures/prediction/0')
    self.assertNotAllEqual(predictions[evaluated[0]],
                           predictions[evaluated[-1]])
    matrix = self._images('eval', 'confusion_matrix/image')[evaluated[-1]]
    self.assertGreater(min(matrix.shape[:2]), 200)

    self.assertTrue(self._json('/data/plugin/graphs/info')['.']['run_graph'])
    self.assertTrue(os.path.exists(os.path.join(self.model_dir,
                                                'graph.pbtxt')))


if __name__ == '__main__':
  tf.test.main()
