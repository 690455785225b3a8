"""gs:// runs of the binary and our records on a real GCS emulator on loopback."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

from official_seg.data import storage
from official_seg.export import predictor
from tests import gcs_emulator
from tests import testing_utils

_BUCKET = 'runs'
_TIMEOUT = testing_utils.BINARY_TIMEOUT_SECS
# The only CA file the libcurl inside tensorflow-io-gcs-filesystem reads.
_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt'


class ObjectStoreTest(tf.test.TestCase):
  """gs:// through tensorflow-io-gcs-filesystem, the way users reach it.

  Every process that reaches the store runs with the test CA in place of
  the CA bundle that client's libcurl reads (`_CA_BUNDLE`, compiled in, no
  setting), bound over it in a mount namespace of its own.
  """

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.folder = tempfile.TemporaryDirectory()
    cls.store = gcs_emulator.FakeGcs(cls.folder.name)
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
    cls.folder.cleanup()
    super().tearDownClass()

  def _env(self, endpoint=None):
    # TensorFlow serves gs:// through tensorflow-io-gcs-filesystem with
    # TF_USE_MODULAR_FILESYSTEM=1; that client honours the emulator endpoint.
    # The emulator's XML API misses objects whose names hold '/', so reads
    # take the JSON API, which GCS serves too.
    return dict(os.environ, TF_USE_MODULAR_FILESYSTEM='1',
                CLOUD_STORAGE_EMULATOR_ENDPOINT=endpoint or self.store.url,
                GOOGLE_CLOUD_CPP_STORAGE_REST_CONFIG='disable-xml',
                PYTHONPATH=testing_utils.REPO)

  def _trusting(self, command):
    """`command` in its own user and mount namespace that trusts the test CA.

    `unshare` execs the command, so the process's id is the command's.
    """
    return ['unshare', '--user', '--map-root-user', '--mount', 'sh', '-c',
            f'mount --bind "$0" {_CA_BUNDLE} && exec "$@"',
            self.store.ca_file] + list(command)

  def _command(self, model_dir, mode, train_steps, extra=()):
    bindings = testing_utils.tiny_bindings(
        f'gs://{_BUCKET}/data', train_steps, extra=[
            'build_run_config.keep_checkpoint_max = 10',
            'continuous_eval.min_interval_secs = 1',
            'continuous_eval.timeout_secs = 300', *extra])
    return self._trusting(
        testing_utils.binary_command(model_dir, bindings, mode))

  def _run(self, model_dir, mode, train_steps, endpoint=None, flags=()):
    return subprocess.run(
        self._command(model_dir, mode, train_steps) + list(flags),
        cwd=testing_utils.REPO, env=self._env(endpoint), capture_output=True,
        text=True, timeout=_TIMEOUT, check=False)

  def _python(self, script, endpoint=None):
    return subprocess.run(
        self._trusting([sys.executable, '-c', script]),
        cwd=testing_utils.REPO, env=self._env(endpoint), capture_output=True,
        text=True, timeout=_TIMEOUT, check=False)

  def _records(self, model):
    """The steps of `<model>/eval/metrics.jsonl` as the store holds it."""
    view = self.store.read(_BUCKET, f'{model}/eval/metrics.jsonl').decode()
    return [json.loads(line)['global_step'] for line in view.splitlines()]

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

  def test_a_file_rewritten_shorter_reads_back_whole(self):
    # The plugin's writer leaves its stat cache alone, so with a cache
    # (GCS_STAT_CACHE_MAX_AGE above 0) a read of a file this process just
    # rewrote shorter expects the old length and fails ("File contents are
    # inconsistent"), as best/best.json did in a restarted evaluator.
    path = f'gs://{_BUCKET}/rewritten/best.json'
    written = self._python(
        'import tensorflow as tf\n'
        'from official_seg.data import storage\n'
        'storage.set_gcs_plugin_defaults()\n'
        f'storage.write_whole({path!r}, "x" * 40)\n'
        f'with tf.io.gfile.GFile({path!r}) as f:\n'
        '  f.read()\n'
        f'storage.write_whole({path!r}, "y" * 30)\n'
        f'with tf.io.gfile.GFile({path!r}) as f:\n'
        '  print(f.read())\n')
    self.assertEqual(written.returncode, 0, written.stderr[-3000:])
    self.assertEqual(written.stdout.split()[-1], 'y' * 30)

  def _evaluator_killed_after_its_first_record(self, model_dir):
    evaluator = subprocess.Popen(
        self._command(model_dir, 'continuous_eval', 4),
        cwd=testing_utils.REPO, env=self._env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    lines = []
    for line in evaluator.stderr:
      lines.append(line)
      if line.rstrip().endswith('Evaluation at step 0 (3 images)'):
        break  # The table is logged after the record is written.
    evaluator.kill()
    lines.append(evaluator.stderr.read())
    evaluator.wait(timeout=_TIMEOUT)
    return ''.join(lines)

  def test_train_evaluate_restart_and_export_on_the_store(self):
    model = 'run'
    model_dir = f'gs://{_BUCKET}/{model}'
    trained = self._run(model_dir, 'train', 4)
    self.assertEqual(trained.returncode, 0, trained.stderr[-3000:])
    names = self.store.names(_BUCKET, model + '/')
    for step in (0, 2, 4):
      self.assertIn(f'{model}/model.ckpt-{step}.index', names)
    self.assertContainsSubset({f'{model}/checkpoint',
                               f'{model}/operative_config-0.gin'}, names)
    self.assertEqual([n for n in names if '.write-probe-' in n], [])

    # A separate evaluator, killed (SIGKILL) right after its first record,
    # then restarted: it goes on from the records on the store.
    log = self._evaluator_killed_after_its_first_record(model_dir)
    self.assertIn(f'Restoring parameters from {model_dir}/model.ckpt-0', log)
    self.assertEqual(self._records(model), [0], log[-3000:])
    restarted = self._run(model_dir, 'continuous_eval', 4)
    self.assertEqual(restarted.returncode, 0, restarted.stderr[-3000:])
    self.assertNotIn('Evaluation at step 0', restarted.stderr)
    for step in (2, 4):
      self.assertIn(f'Evaluation at step {step} (3 images)', restarted.stderr)
    self.assertEqual(self._records(model), [0, 2, 4])

    # train_and_eval resumes at step 4 from the store and records step 6.
    resumed = self._run(model_dir, 'train_and_eval', 6)
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    self.assertIn(f'Restoring parameters from {model_dir}/model.ckpt-4',
                  resumed.stderr)
    self.assertEqual(self._records(model), [0, 2, 4, 6])
    self.assertEqual(
        [n for n in self.store.names(_BUCKET, f'{model}/eval/records/')
         if n.endswith('.json')],
        [f'{model}/eval/records/step-{s:012d}.json' for s in (0, 2, 4, 6)])

    exported = self._run(model_dir, 'export', 6)
    self.assertEqual(exported.returncode, 0, exported.stderr[-3000:])
    export = [n for n in self.store.names(_BUCKET, f'{model}/export/')
              if n.endswith('/saved_model.pb')]
    self.assertLen(export, 1)
    self.assertIn(f'Exported {model_dir}/model.ckpt-6 to '
                  f'gs://{_BUCKET}/{os.path.dirname(export[0])}',
                  exported.stderr)
    # No folder renamed into place: no temporary export left behind.
    self.assertEqual([n for n in self.store.names(_BUCKET, f'{model}/export/')
                      if 'temp-' in n], [])
    # The export as the store holds it, read over the store's own API,
    # labels a validation image at its size.
    local = self.create_tempdir().full_path
    prefix = os.path.dirname(export[0]) + '/'
    for name in self.store.names(_BUCKET, prefix):
      if not name.endswith('/'):
        path = os.path.join(local, name[len(prefix):])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
          f.write(self.store.read(_BUCKET, name))
    model_of_step_6 = predictor.Predictor(local)
    self.assertEqual(model_of_step_6.global_step, 6)
    image = tf.io.encode_png(np.zeros([30, 37, 3], np.uint8)).numpy()
    self.assertEqual(model_of_step_6(image).shape, (30, 37))

  def test_plain_http_reads_of_large_objects_crash_the_client(self):
    # Why the store is reached over HTTPS: over plain HTTP libcurl hands
    # the client's download callback more bytes than it can hold
    # (docs/evaluation.md). TLS records keep every hand-over small.
    # The overrun corrupts the heap, and whether a process dies of it is
    # chance, likelier the more the object overruns (docs/evaluation.md
    # gives the rates): so a large object, read up to three times.
    size = 8 * 1024 * 1024
    self.store.upload(_BUCKET, 'large/object', bytes(size))
    read = ('import tensorflow as tf\n'
            'from official_seg.data import storage\n'
            'storage.set_gcs_plugin_defaults()\n'
            f'with tf.io.gfile.GFile("gs://{_BUCKET}/large/object", "rb") as f:\n'
            '  print(len(f.read()))\n')
    over_tls = self._python(read)
    self.assertEqual(over_tls.returncode, 0, over_tls.stderr[-3000:])
    self.assertEqual(over_tls.stdout.split()[-1], str(size))
    codes = []
    for _ in range(3):
      codes.append(self._python(read, endpoint=self.store.http_url).returncode)
      # The overrun heap shows as a segfault or as glibc's abort on a free.
      if codes[-1] in (-signal.SIGSEGV, -signal.SIGABRT):
        break
    self.assertIn(codes[-1], (-signal.SIGSEGV, -signal.SIGABRT), codes)

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
                       endpoint=f'http://127.0.0.1:{gcs_emulator.free_port()}',
                       flags=['--storage_timeout_secs=3'])
    self.assertEqual(failed.returncode, 1, failed.stderr[-3000:])
    self.assertIn(f'--model_dir={model_dir} cannot be created or written: '
                  f'{model_dir} did not answer a write within 3 s',
                  failed.stderr)
    self.assertNotIn('Calling model_fn', failed.stderr)
    self.assertLess(time.time() - started, _TIMEOUT)


if __name__ == '__main__':
  tf.test.main()
