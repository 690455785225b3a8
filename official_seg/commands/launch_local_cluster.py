"""Runs a train_and_eval cluster as local processes on 127.0.0.1, each with its TF_CONFIG.

  launch_local_cluster --workers 1 --ps 1 --evaluator \
    --gin_file=gin/experiments/quickstart.gin \
    --gin_file=gin/platforms/parameter_server.gin --model_dir=/tmp/cluster

starts a chief, one worker, one parameter server and an evaluator, prefixes
each output line with its task, and exits with status 0 once every task has
exited 0. When a task fails, on Ctrl-C, on SIGTERM or after --timeout_secs,
every task's process group is stopped (SIGTERM, then SIGKILL). Other
arguments (or those after `--`) are passed on to every task, e.g. --dry_run.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from official_seg import command_line

_HOST = '127.0.0.1'
_POLL_SECS = 0.2


def free_ports(count):
  """`count` distinct ports free on 127.0.0.1 (all held until all are found)."""
  sockets = []
  try:
    for _ in range(count):
      sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      sock.bind((_HOST, 0))
      sockets.append(sock)
    return [sock.getsockname()[1] for sock in sockets]
  finally:
    for sock in sockets:
      sock.close()


def tf_configs(workers, ps, evaluator, ports):
  """The TF_CONFIG of every task, parameter servers first.

  Args:
    workers: int, workers besides the chief.
    ps: int, parameter servers.
    evaluator: bool, add an evaluator task (outside the cluster, as TF wants).
    ports: list of 1 + workers + ps ports.

  Returns:
    List of (task name, TF_CONFIG dict).
  """
  addresses = [f'{_HOST}:{port}' for port in ports]
  cluster = {'chief': addresses[:1]}
  if workers:
    cluster['worker'] = addresses[1:1 + workers]
  if ps:
    cluster['ps'] = addresses[1 + workers:]
  jobs = [('ps', ps), ('chief', 1), ('worker', workers)]
  jobs += [('evaluator', 1)] if evaluator else []
  return [(f'{job}:{index}',
           {'cluster': cluster, 'task': {'type': job, 'index': index}})
          for job, count in jobs for index in range(count)]


def _relay(name, stream, lock):
  """Copies a task's output lines to stdout, each prefixed with its name."""
  for line in stream:
    with lock:
      sys.stdout.write(f'[{name}] {line}')
      sys.stdout.flush()


class Cluster:
  """Child processes, one process group each, with their output relayed."""

  def __init__(self):
    self.tasks = []
    self._lock = threading.Lock()

  def start(self, name, tf_config, command):
    """Starts `command` as task `name`, in its own process group."""
    env = dict(os.environ, TF_CONFIG=json.dumps(tf_config),
               TF_FORCE_GPU_ALLOW_GROWTH='true')
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, errors='replace', start_new_session=True)
    relay = threading.Thread(target=_relay,
                             args=(name, process.stdout, self._lock))
    relay.start()
    self.tasks.append((name, process, relay))
    self.say(f'Started {name} (pid {process.pid}) with TF_CONFIG='
             f'{json.dumps(tf_config)}')

  def say(self, message):
    """Prints a line of the launcher's own, between the tasks' lines."""
    with self._lock:
      print(f'[launcher] {message}', flush=True)

  def wait(self, timeout_secs):
    """Waits until all exit 0, one fails or time runs out.

    Returns:
      0 when every task exited 0; else the first failure's status, or 124
      after `timeout_secs`.
    """
    deadline = time.monotonic() + timeout_secs if timeout_secs else None
    exited = set()
    while len(exited) < len(self.tasks):
      for name, process, _ in self.tasks:
        code = process.poll()
        if code is None or name in exited:
          continue
        exited.add(name)
        self.say(f'{name} exited with status {code}.')
        if code:
          self.say('A task failed; stopping the cluster.')
          return code
      if deadline and time.monotonic() > deadline:
        self.say(f'Timed out after {timeout_secs} s; stopping the cluster.')
        return 124
      time.sleep(_POLL_SECS)
    return 0

  def stop(self, grace_secs):
    """SIGTERM to every live task's process group, SIGKILL after the grace."""
    for _, process, _ in self.tasks:
      _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace_secs
    for _, process, _ in self.tasks:
      try:
        process.wait(max(0.0, deadline - time.monotonic()))
      except subprocess.TimeoutExpired:
        _signal_group(process, signal.SIGKILL)
        process.wait()
    for _, _, relay in self.tasks:
      relay.join()


def _signal_group(process, signum):
  """Signals the task's process group while its leader is not yet reaped.

  An unreaped leader keeps its pid, so the group id cannot name another
  process group.
  """
  if process.poll() is not None:
    return
  try:
    os.killpg(process.pid, signum)
  except ProcessLookupError:
    pass


def _raise_interrupt(signum, frame):
  """SIGTERM stops the cluster as Ctrl-C does."""
  del signum, frame  # Unused.
  raise KeyboardInterrupt


def parse_args(argv):
  """The launcher's arguments; those after `--` go to every task."""
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  parser.add_argument('--gin_file', action='append', default=[],
                      help='Passed on to every task; repeatable.')
  parser.add_argument('--gin_param', action='append', default=[],
                      help='Passed on to every task; repeatable.')
  parser.add_argument('--model_dir', required=True,
                      help='The model dir all tasks share.')
  parser.add_argument('--mode', default='train_and_eval',
                      help="The tasks' --mode.")
  parser.add_argument('--workers', type=int, default=0,
                      help='Worker tasks besides the chief.')
  parser.add_argument('--ps', type=int, default=0,
                      help='Parameter-server tasks.')
  parser.add_argument('--evaluator', action='store_true',
                      help='Also start an evaluator task.')
  parser.add_argument('--timeout_secs', type=float, default=0,
                      help='Stop every task after this long; 0: no limit.')
  parser.add_argument('--grace_secs', type=float, default=10,
                      help='Seconds a task gets after SIGTERM before SIGKILL.')
  args, extra = parser.parse_known_args(argv)
  if extra and extra[0] == '--':
    extra = extra[1:]
  return args, extra


def task_command(args, extra_args):
  """The train_and_eval command line every task runs."""
  command = [sys.executable, '-m', 'official_seg.train_and_eval',
             f'--model_dir={args.model_dir}', f'--mode={args.mode}']
  command += [f'--gin_file={path}' for path in args.gin_file]
  command += [f'--gin_param={binding}' for binding in args.gin_param]
  return command + list(extra_args)


def _main(argv):
  args, extra = parse_args(argv[1:])
  command = task_command(args, extra)
  configs = tf_configs(args.workers, args.ps, args.evaluator,
                       free_ports(1 + args.workers + args.ps))
  signal.signal(signal.SIGTERM, _raise_interrupt)
  cluster = Cluster()
  status = 130
  try:
    for name, tf_config in configs:
      cluster.start(name, tf_config, command)
    status = cluster.wait(args.timeout_secs)
  except KeyboardInterrupt:
    cluster.say('Interrupted; stopping the cluster.')
  finally:
    cluster.stop(args.grace_secs)
  return status


def main(argv=None):
  """The command's entry point; returns its exit status: the cluster's, or
  `command_line`'s for an error of the launcher itself."""
  return command_line.call(_main, list(sys.argv if argv is None else argv))


if __name__ == '__main__':
  sys.exit(main())
