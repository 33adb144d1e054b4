"""The processes a benchmark starts: agents, moto, sinks and load generators, on 127.0.0.1 only.

Every process is started with ``python -m`` from a source tree (this repository by default) with that tree
first on ``PYTHONPATH``, so a benchmark measures the tree it runs from, whatever the virtualenv's editable
install points to. Each one logs to a file of its own and is stopped with SIGTERM, then SIGKILL, within
``STOP_TIMEOUT_S``. AWS credentials are fakes and every AWS setting that could reach a real account is
masked, so that boto3 and moto never look past the loopback address.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

MiB = 1024 * 1024
BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
PYTHON = sys.executable
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/nonexistent/strata-bench/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/strata-bench/aws-credentials",
}
MASKED_AWS_ENV = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def fake_aws(env: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """``env`` with fake AWS credentials and no setting that could name a real endpoint or account."""
    env.update(FAKE_AWS_ENV)
    for name in MASKED_AWS_ENV:
        env.pop(name, None)
    return env


def bench_env(
    tree: Path = ROOT, extra: dict[str, str] | None = None, defaults_only: bool = False
) -> dict[str, str]:
    """The environment of a child process: ``tree``'s packages first, fake AWS, unbuffered output; with
    ``defaults_only``, no ``STRATA_*`` variable, so that an agent runs on its embedded defaults."""
    env = dict(fake_aws(dict(os.environ)))
    if defaults_only:
        env = {k: v for k, v in env.items() if not k.startswith("STRATA_")}
    path = os.environ.get("PYTHONPATH")
    env["PYTHONPATH"] = str(tree) + (os.pathsep + path if path else "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def module_cmd(module: str, *args: str) -> list[str]:
    """The command that runs ``module`` (``bench.loadgen``, ``strata.cli``, ...) with this interpreter."""
    return [PYTHON, "-m", module, *args]


# --- ports --------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_range(n: int) -> int:
    """The first of ``n`` consecutive free ports (a Kafka listener's lanes), tried by binding all of them."""
    for _ in range(100):
        first = free_port()
        if first + n > 65536:
            continue
        with contextlib.ExitStack() as stack:
            try:
                for port in range(first, first + n):
                    sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return first
    raise RuntimeError(f"no {n} consecutive free ports")


# --- processes ----------------------------------------------------------------------------------------------
@dataclass
class Proc:
    """A subprocess this benchmark started, with its output in a log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``STOP_TIMEOUT_S``; the exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(STOP_TIMEOUT_S)
        if self.log_file is not None:
            self.log_file.close()
        return self.popen.returncode

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def spawn(
    name: str,
    cmd: list[str],
    log_path: Path,
    extra_env: dict[str, str] | None = None,
    tree: Path = ROOT,
    defaults_only: bool = False,
) -> Proc:
    """Start ``cmd`` in ``tree`` with ``bench_env``; stdout and stderr go to ``log_path``."""
    log_file = log_path.open("wb")
    env = bench_env(tree, extra_env, defaults_only)
    popen = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=tree, env=env)
    return Proc(name, popen, log_path, log_file)


def stop_proc(proc: Proc, label: str) -> None:
    """Stop ``proc``, and log its output when it did not exit as a stopped server does."""
    rc = proc.stop()
    if rc not in (0, -signal.SIGTERM, None):  # uvicorn re-raises SIGTERM once it has shut down
        log(f"[{label}] {proc.name} exited with {rc}:\n{proc.tail()}")


def wait_http(url: str, proc: Proc, timeout: float = START_TIMEOUT_S) -> None:
    """Until ``url`` answers 200; raises if ``proc`` exits first or the time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.tail()}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{proc.name} did not answer {url} within {timeout} s:\n{proc.tail()}")


def wait_tcp(port: int, proc: Proc, timeout: float = START_TIMEOUT_S) -> None:
    """Until 127.0.0.1:``port`` accepts a connection; raises if ``proc`` exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.tail()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{proc.name} does not accept connections on port {port} within {timeout} s")


# --- moto ---------------------------------------------------------------------------------------------------
@dataclass
class Moto:
    """moto's S3 server in a process of its own (``bench.moto_server``)."""

    proc: subprocess.Popen[bytes]
    endpoint: str
    log: IO[str]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT_S)
        self.log.close()


def start_moto(buckets: list[str], workdir: Path) -> Moto:
    """``bench.moto_server`` with ``buckets`` created; its endpoint is the first line it prints."""
    log_path = workdir / "moto.log"
    moto_log = log_path.open("w")
    proc = subprocess.Popen(
        module_cmd("bench.moto_server", *buckets),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=moto_log,
        cwd=ROOT,
        env=bench_env(),
    )
    stdout = proc.stdout
    assert stdout is not None
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(stdout.readline().decode()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    if not ready or not ready[0].startswith("http://127.0.0.1:"):
        proc.kill()
        proc.wait()
        moto_log.close()
        raise RuntimeError(f"moto did not start: {log_path.read_text()[-2000:]}")
    return Moto(proc, ready[0].strip(), moto_log)


@contextlib.contextmanager
def backend_stores(
    backend: str, workdir: Path, buckets: list[str]
) -> Iterator[tuple[list[list[str]], dict[str, int]]]:
    """The ``strata serve`` store arguments of each of ``buckets`` on ``backend``, and the pids of what
    serves them: on ``s3`` moto (stopped on the way out), on ``local`` each agent's own directory."""
    if backend != "s3":
        yield [[] for _ in buckets], {}
        return
    moto = start_moto(buckets, workdir)
    common = ["--s3-endpoint", moto.endpoint, "--s3-region", "us-east-1"]
    try:
        yield [["--bucket", f"s3://{bucket}", *common] for bucket in buckets], {"moto": moto.pid}
    finally:
        moto.stop()


# --- agents -------------------------------------------------------------------------------------------------
@dataclass
class Agent:
    """``strata serve`` started by a benchmark: its process, HTTP base URL and Kafka bootstrap address."""

    proc: Proc
    url: str
    bootstrap: str | None
    data_dir: Path

    @property
    def pid(self) -> int:
        return self.proc.pid


@dataclass
class AgentSpec:
    """How to start an agent: ``strata serve`` arguments after the data directory, host and ports."""

    serve_args: list[str]
    kafka_ports: int = 0  # consecutive ports reserved for the Kafka listener's lanes; 0: no listener
    module: str = "strata.cli"  # or a wrapper with the same arguments (bench.agent_gcstats, ...)
    tree: Path = ROOT
    env: dict[str, str] = field(default_factory=dict)
    defaults_only: bool = False  # drop every STRATA_* variable: the embedded defaults


def start_agent(spec: AgentSpec, workdir: Path, name: str, data_name: str | None = None) -> Agent:
    """``strata serve`` on free ports, answering ``/healthz``; ``data_name`` reuses a data directory."""
    port = free_port()
    data_dir = workdir / (data_name or name)
    data_dir.mkdir(exist_ok=True)
    cmd = module_cmd(spec.module, "serve", "--data-dir", str(data_dir), "--host", "127.0.0.1")
    cmd += ["--port", str(port)]
    kafka_port = free_port_range(spec.kafka_ports) if spec.kafka_ports else -1
    cmd += ["--kafka-port", str(kafka_port)]
    if spec.kafka_ports:
        cmd += ["--kafka-advertised-host", "127.0.0.1"]
    cmd += spec.serve_args
    log_path = workdir / f"{name}.log"
    # No schema registry port (Confluent's 8081 by default): agents of one benchmark would meet on it. A
    # variable, not a flag, so that a tree from before the setting starts too.
    env = {"STRATA_SCHEMA_REGISTRY_PORT": "-1", **spec.env}
    proc = spawn(name, cmd, log_path, extra_env=env, tree=spec.tree, defaults_only=spec.defaults_only)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/healthz", proc)
        if spec.kafka_ports:
            wait_tcp(kafka_port, proc)
    except RuntimeError:
        proc.stop()
        raise
    bootstrap = f"127.0.0.1:{kafka_port}" if spec.kafka_ports else None
    return Agent(proc, url, bootstrap, data_dir)
