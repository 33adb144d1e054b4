"""Produce / fetch benchmark of a Strata agent, with the bare-FastAPI ceiling measured in the same run.

    .venv/bin/python bench/produce_fetch.py [--backend local|s3|both] [--clients N] [--duration S]
                                            [--records-per-request R] [--py-spy PATH] ...

For each backend (a local directory, or moto S3 in its own process; SQLite metadata in both cases):
1. ceiling: a bare FastAPI app (bench/bare_app.py: the same ProduceIn body model, fake offsets, uvicorn with
   uvloop + httptools like ``strata serve``) driven by the same load generator with the same parameters,
   once before the agent's produce window and once after it; the ceiling is their mean (see
   ``bracketed_ceiling``);
2. produce: ``strata serve --flush-interval-ms 250`` as a subprocess, N closed-loop HTTP clients in a separate
   process (bench/loadgen.py), 1 KiB values, keyed records over the topic's partitions. MiB/s counts record
   keys + values. PUTs and flushes are read from the agent's /metrics before and after;
3. idle: 3 s without requests, PUTs counted again (target 0);
4. fetch catch-up: a fresh agent on the same bucket and metadata (cold cache; --fetch-warm reuses the
   producing agent) reads everything back from offset 0, one consumer per partition, 8 MiB max_bytes;
5. overload: a fresh agent (--buffer-bytes 64 MiB) hammered with many clients sending ~1 MiB requests; its
   RSS (VmRSS sampled every 50 ms, and VmHWM) against buffer limit + 150 MiB, and the 429s counted.

--phases picks produce (1-4) and/or overload (5); --gc-stats, --py-spy and --mem-trace profile the agent (GC,
CPU, memory: bench/agent_memtrace.py writes tracemalloc's top allocation sites near the peak). CPU per MiB
and minor page faults per MiB (a page the kernel had to map and zero: ~2.6 us each on this VM) are read from
/proc for the agent and the bare app.
Every process it starts binds 127.0.0.1 only and is stopped at the end (SIGTERM, then SIGKILL). Every phase is
bounded in time. Results: a table on stdout and JSON under bench/results/ (ignored by git).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx
import orjson

MiB = 1024 * 1024
BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
PYTHON = sys.executable
STRATA = Path(PYTHON).with_name("strata")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/nonexistent/strata-bench/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/strata-bench/aws-credentials",
}
MASKED_AWS_ENV = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")

# Targets from the issue (2-core machine, 250 ms flush interval).
TARGET_PUTS_PER_FLUSH = 1.0
TARGET_IDLE_PUTS = 0
TARGET_PUTS_PER_S = 4.0
TARGET_P50_MS = 200.0
TARGET_P99_MS = 350.0
TARGET_CEILING_RATIO = 0.60
TARGET_PRODUCE_MIB_S = 40.0
TARGET_FETCH_MIB_S = 100.0
TARGET_FETCH_GETS_PER_MIB = 0.25  # at most 1 GET per 4 MiB served (issue 10, section 3)
TARGET_RSS_HEADROOM_MIB = 150.0


# --- processes --------------------------------------------------------------------------------------------
def bench_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(FAKE_AWS_ENV)
    for name in MASKED_AWS_ENV:
        env.pop(name, None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


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


@dataclass
class Proc:
    """A subprocess this benchmark started, with its output in a log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    log_file: Any = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stop(self) -> int | None:
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


def spawn(name: str, cmd: list[str], log_path: Path, extra_env: dict[str, str] | None = None) -> Proc:
    log_file = log_path.open("wb")
    env = {**bench_env(), **(extra_env or {})}
    popen = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    return Proc(name, popen, log_path, log_file)


def wait_http(url: str, proc: Proc, timeout: float = START_TIMEOUT_S) -> None:
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


@dataclass
class Moto:
    proc: subprocess.Popen[bytes]
    endpoint: str
    log: TextIO

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
    log = (workdir / "moto.log").open("w")
    proc = subprocess.Popen(
        [PYTHON, str(BENCH_DIR / "moto_server.py"), *buckets],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        cwd=ROOT,
        env=bench_env(),
    )
    assert proc.stdout is not None
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline().decode()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(START_TIMEOUT_S)
    if not ready or not ready[0].startswith("http://"):
        proc.kill()
        proc.wait()
        log.close()
        raise RuntimeError(f"moto did not start: {(workdir / 'moto.log').read_text()[-2000:]}")
    return Moto(proc, ready[0].strip(), log)


# --- /proc sampling ---------------------------------------------------------------------------------------
def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (fields[0] is the state, field 3 of
    proc(5)); None if the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def proc_cpu_s(pid: int) -> float:
    """utime + stime of the process (all its threads), in seconds; 0 if it is gone."""
    fields = proc_stat(pid)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK if fields else 0.0


def proc_minor_faults(pid: int) -> int:
    """Minor page faults of the process (all its threads) so far; 0 if it is gone. Each is a page the
    kernel mapped and zeroed on first touch: memory malloc had handed back and took again."""
    fields = proc_stat(pid)
    return int(fields[7]) if fields else 0


def proc_mem_kib(pid: int) -> dict[str, int]:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                name, value = line.split(":", 1)
                out[name] = int(value.split()[0])
    except OSError:
        pass
    return out


def system_busy_s() -> float:
    """CPU seconds spent busy by the whole machine (all cores), from /proc/stat."""
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + parts[4]  # idle + iowait
    return (sum(parts[:8]) - idle) / CLK_TCK


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class RssSampler:
    """Samples a process's VmRSS every ``interval`` seconds in a thread; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = proc_mem_kib(self.pid).get("VmRSS", 0)
            self.peak_kib = max(self.peak_kib, rss)
            self.samples += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class CpuWindow:
    """CPU seconds used by given processes and by the whole machine between two marks."""

    pids: dict[str, int]
    start: dict[str, float] = field(default_factory=dict)
    end: dict[str, float] = field(default_factory=dict)
    faults_start: dict[str, int] = field(default_factory=dict)
    faults_end: dict[str, int] = field(default_factory=dict)

    def _read(self) -> dict[str, float]:
        out = {name: proc_cpu_s(pid) for name, pid in self.pids.items()}
        out["system"] = system_busy_s()
        out["wall"] = time.monotonic()
        return out

    def _faults(self) -> dict[str, int]:
        return {name: proc_minor_faults(pid) for name, pid in self.pids.items()}

    def mark_start(self) -> None:
        self.start = self._read()
        self.faults_start = self._faults()

    def mark_end(self) -> None:
        self.end = self._read()
        self.faults_end = self._faults()

    def faults(self) -> dict[str, int]:
        """Minor page faults per process between the marks."""
        return {k: self.faults_end[k] - self.faults_start[k] for k in self.faults_end}

    def cores(self) -> dict[str, float]:
        wall = self.end["wall"] - self.start["wall"]
        return {k: round((self.end[k] - self.start[k]) / wall, 2) for k in self.end if k != "wall"}


# --- metrics ----------------------------------------------------------------------------------------------
def scrape(base_url: str) -> dict[str, float]:
    text = httpx.get(base_url + "/metrics", timeout=10.0).text
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        with contextlib.suppress(ValueError):
            out[name] = float(value)
    return out


def puts(m: dict[str, float]) -> float:
    return m.get('strata_object_store_requests_total{kind="PUT"}', 0.0)


def gets(m: dict[str, float]) -> float:
    return m.get('strata_object_store_requests_total{kind="GET"}', 0.0)


def flushes(m: dict[str, float]) -> float:
    return m.get("strata_flushes_total", 0.0)


def delta_mean(before: dict[str, float], after: dict[str, float], histogram: str) -> float | None:
    """Mean of a Prometheus histogram's observations between two scrapes."""
    count = after.get(histogram + "_count", 0.0) - before.get(histogram + "_count", 0.0)
    total = after.get(histogram + "_sum", 0.0) - before.get(histogram + "_sum", 0.0)
    return total / count if count else None


def max_bucket(m: dict[str, float], histogram: str) -> str | None:
    """The smallest histogram bucket bound holding every observation (a coarse maximum)."""
    count = m.get(histogram + "_count", 0.0)
    bounds = []
    for name, value in m.items():
        if name.startswith(histogram + '_bucket{le="') and value >= count > 0:
            bounds.append(name.split('le="', 1)[1].rstrip('"}'))
    return min(bounds, key=float) if bounds else None


def wait_buffer_empty(base_url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if scrape(base_url).get("strata_buffer_bytes", 0.0) == 0.0:
            return
        time.sleep(0.1)


# --- load generator ---------------------------------------------------------------------------------------
def percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    rank = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))  # nearest rank
    return sorted_values[rank]


def run_produce_load(
    url: str,
    topics: list[str],
    *,
    clients: int,
    records_per_request: int,
    value_bytes: int,
    procs: int,
    client: str = "aiohttp",
    warmup: float,
    duration: float,
    think_ms: float = 0.0,
    on_window_start: Any = None,
    on_window_end: Any = None,
) -> dict[str, Any]:
    """Run the load generator (``procs`` processes, ``clients`` split among them) and merge its results."""
    popens = []
    out_dir = Path(tempfile.mkdtemp(prefix="strata-loadgen-"))
    start_file = out_dir / "start"
    try:
        for i in range(procs):
            n = clients // procs + (1 if i < clients % procs else 0)
            cmd = [PYTHON, str(BENCH_DIR / "loadgen.py"), "produce", "--url", url]
            cmd += ["--topics", ",".join(topics), "--clients", str(n)]
            cmd += ["--records-per-request", str(records_per_request), "--value-bytes", str(value_bytes)]
            cmd += ["--start-file", str(start_file), "--duration", str(duration), "--seed", str(i + 1)]
            cmd += ["--think-ms", str(think_ms), "--client", client, "--out", str(out_dir / f"{i}.json")]
            popens.append(subprocess.Popen(cmd, cwd=ROOT, env=bench_env()))
        # Every process has built its request bodies and clients: give them one start time.
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all((out_dir / f"{i}.json.ready").exists() for i in range(procs)):
            if time.monotonic() > deadline or any(p.poll() is not None for p in popens):
                raise RuntimeError("load generator did not get ready")
            time.sleep(0.02)
        start_at = time.time() + warmup
        (out_dir / "start.tmp").write_text(repr(start_at))
        (out_dir / "start.tmp").rename(start_file)
        time.sleep(max(0.0, start_at - time.time()))
        if on_window_start is not None:
            on_window_start()
        time.sleep(max(0.0, start_at + duration - time.time()))
        if on_window_end is not None:
            on_window_end()
        parts = []
        for i, p in enumerate(popens):
            try:
                p.wait(timeout=duration + warmup + 90)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if p.returncode != 0:
                raise RuntimeError(f"load generator failed with {p.returncode}")
            parts.append(orjson.loads((out_dir / f"{i}.json").read_bytes()))
    finally:
        for p in popens:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(out_dir, ignore_errors=True)
    latencies = sorted(x for part in parts for x in part["latencies_ms"])
    status: dict[str, int] = {}
    errors: dict[str, int] = {}
    for part in parts:
        for k, v in part["status"].items():
            status[k] = status.get(k, 0) + v
        for k, v in part["errors"].items():
            errors[k] = errors.get(k, 0) + v
    ok_payload = sum(p["ok_payload_bytes"] for p in parts)
    ok_records = sum(p["ok_records"] for p in parts)
    ok_requests = sum(p["ok_requests"] for p in parts)
    return {
        "clients": clients,
        "loadgen_procs": procs,
        "loadgen_client": client,
        "records_per_request": records_per_request,
        "value_bytes": value_bytes,
        "body_bytes": parts[0]["body_bytes"],
        "think_ms": think_ms,
        "window_s": duration,
        "mib_s": ok_payload / duration / MiB,
        "records_s": ok_records / duration,
        "requests_s": ok_requests / duration,
        "latency_ms": {
            "n": len(latencies),
            "p50": percentile(latencies, 0.50),
            "p90": percentile(latencies, 0.90),
            "p99": percentile(latencies, 0.99),
            "max": latencies[-1] if latencies else None,
        },
        "status": status,
        "errors": errors,
        "unfinished_clients": sum(p["unfinished_clients"] for p in parts),
        "total_ok_records": sum(p["total_ok_records"] for p in parts),
        "loadgen_cpu_cores": round(sum(p["cpu_s"] for p in parts) / duration, 2),
    }


def run_fetch_load(url: str, topics: list[str], *, concurrency: int, max_bytes: int, timeout: float) -> Any:
    with tempfile.TemporaryDirectory(prefix="strata-loadgen-") as tmp:
        out = Path(tmp) / "fetch.json"
        cmd = [PYTHON, str(BENCH_DIR / "loadgen.py"), "fetch", "--url", url, "--topics", ",".join(topics)]
        cmd += ["--concurrency", str(concurrency), "--max-bytes", str(max_bytes), "--timeout", str(timeout)]
        cmd += ["--out", str(out)]
        subprocess.run(cmd, cwd=ROOT, env=bench_env(), timeout=timeout + 60, check=True)
        return orjson.loads(out.read_bytes())


# --- phases -----------------------------------------------------------------------------------------------
@contextlib.contextmanager
def py_spy(args: argparse.Namespace, pid: int, name: str, seconds: float) -> Iterator[None]:
    """Record a py-spy profile of ``pid`` while the block runs, if --py-spy was given.

    Collapsed stacks (``--format raw``) of the thread holding the GIL only (``--gil``): for a one-event-loop
    server that is where its core goes. Summarise with bench/pyspy_top.py.
    """
    if not args.py_spy:
        yield
        return
    out = RESULTS_DIR / f"{args.run_id}-{name}.folded"
    cmd = [args.py_spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "100", "--gil"]
    cmd += ["-o", str(out), "--duration", str(max(1, int(seconds)))]
    spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        if spy.poll() is None:
            spy.send_signal(signal.SIGINT)  # py-spy writes what it has recorded and exits
        try:
            spy.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait()


def start_agent(
    args: argparse.Namespace,
    workdir: Path,
    name: str,
    store_args: list[str],
    buffer_bytes: int,
    data_name: str | None = None,
) -> tuple[Proc, str]:
    """``strata serve`` on a free port; ``data_name`` reuses another agent's data directory."""
    port = free_port()
    data_dir = workdir / (data_name or name)
    data_dir.mkdir(exist_ok=True)
    if args.gc_stats:
        cmd = [PYTHON, str(BENCH_DIR / "agent_gcstats.py")]
    elif args.mem_trace:
        cmd = [PYTHON, str(BENCH_DIR / "agent_memtrace.py")]
    else:
        cmd = [str(STRATA)] if STRATA.exists() else [PYTHON, "-m", "strata.cli"]
    cmd += [
        "serve",
        "--data-dir",
        str(data_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--kafka-port",
        "-1",
    ]
    cmd += ["--flush-interval-ms", str(args.flush_interval_ms), "--buffer-bytes", str(buffer_bytes)]
    cmd += ["--role", args.role, "--log-level", "warning", *store_args]
    env = {"STRATA_BENCH_GC_STATS": str(workdir / f"{name}.gc.json")} if args.gc_stats else {}
    if args.mem_trace:
        env["STRATA_BENCH_MEMTRACE"] = str(RESULTS_DIR / f"{args.run_id}-{args.backend_now}-{name}.mem.json")
    proc = spawn(name, cmd, workdir / f"{name}.log", extra_env=env)
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/healthz", proc)
    return proc, url


def create_topics(url: str, topics: list[str], partitions: int) -> None:
    per_topic = max(1, partitions // len(topics))
    for topic in topics:
        r = httpx.post(url + "/v1/topics", json={"name": topic, "partitions": per_topic}, timeout=30.0)
        if r.status_code != 201:
            raise RuntimeError(f"creating topic {topic} failed: {r.status_code} {r.text[:500]}")


def bare_phase(
    args: argparse.Namespace, workdir: Path, topics: list[str], records_per_request: int
) -> dict[str, Any]:
    port = free_port()
    cmd = [PYTHON, "-m", "uvicorn", "--app-dir", str(BENCH_DIR), "bare_app:app", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--loop", "uvloop", "--http", "httptools", "--log-level", "warning"]
    cmd += ["--no-access-log", "--lifespan", "on"]
    proc = spawn("bare", cmd, workdir / "bare.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/healthz", proc)
        cpu = CpuWindow({"server": proc.pid})
        result = run_produce_load(
            url,
            topics,
            clients=args.clients,
            records_per_request=records_per_request,
            value_bytes=args.value_bytes,
            procs=args.loadgen_procs,
            client=args.loadgen_client,
            warmup=args.warmup,
            duration=args.duration,
            think_ms=args.think_ms,
            on_window_start=cpu.mark_start,
            on_window_end=cpu.mark_end,
        )
        result["cpu_cores"] = cpu.cores()
        result["minor_faults"] = cpu.faults()
        result["loadavg_after"] = loadavg()
        return result
    finally:
        proc.stop()


def produce_phase(
    args: argparse.Namespace, agent: Proc, url: str, topics: list[str], extra_pids: dict[str, int]
) -> dict[str, Any]:
    marks: dict[str, dict[str, float]] = {"before": scrape(url)}
    cpu = CpuWindow({"agent": agent.pid, **extra_pids})

    def window_start() -> None:
        marks["start"] = scrape(url)
        cpu.mark_start()

    def window_end() -> None:
        cpu.mark_end()
        marks["end"] = scrape(url)

    with py_spy(args, agent.pid, f"{args.backend_now}-produce", args.warmup + args.duration + 60):
        result = run_produce_load(
            url,
            topics,
            clients=args.clients,
            records_per_request=args.records_per_request,
            value_bytes=args.value_bytes,
            procs=args.loadgen_procs,
            client=args.loadgen_client,
            warmup=args.warmup,
            duration=args.duration,
            think_ms=args.think_ms,
            on_window_start=window_start,
            on_window_end=window_end,
        )
    wait_buffer_empty(url)
    marks["after"] = scrape(url)
    nflush = flushes(marks["after"]) - flushes(marks["before"])
    nput = puts(marks["after"]) - puts(marks["before"])
    window = args.duration
    flush_bytes = marks["after"]["strata_flush_bytes_total"] - marks["before"].get(
        "strata_flush_bytes_total", 0
    )
    result.update(
        {
            "flushes": nflush,
            "puts": nput,
            "puts_per_flush": nput / nflush if nflush else None,
            "puts_s": (puts(marks["end"]) - puts(marks["start"])) / window,
            "flushes_s": (flushes(marks["end"]) - flushes(marks["start"])) / window,
            "mib_per_flush": flush_bytes / nflush / MiB if nflush else None,
            "flush_seconds_mean": delta_mean(marks["before"], marks["after"], "strata_flush_seconds"),
            "server_latency_ms_mean": 1000
            * (delta_mean(marks["start"], marks["end"], "strata_produce_latency_seconds") or 0.0),
            "flush_failures": marks["after"].get("strata_flush_failures_total", 0.0),
            "cpu_cores": cpu.cores(),
            "minor_faults": cpu.faults(),
            "loadavg_after": loadavg(),
        }
    )
    # 0 PUTs while idle: nothing is buffered now; count PUTs and flushes over args.idle seconds.
    time.sleep(args.idle)
    idle = scrape(url)
    result["idle_s"] = args.idle
    result["idle_puts"] = puts(idle) - puts(marks["after"])
    result["idle_flushes"] = flushes(idle) - flushes(marks["after"])
    return result


def throughput_phase(
    args: argparse.Namespace, agent: Proc, url: str, topics: list[str], extra_pids: dict[str, int]
) -> dict[str, Any]:
    """Closed-loop produce with enough bytes in flight that the flush interval is not the limit.

    At the latency load (128 clients x 100 records of 1 KiB, 12.5 MiB in flight) Little's law caps
    throughput near 12.5 MiB / the latency; --throughput-records-per-request raises what is in flight, and
    the same load runs against the bare FastAPI app for the ceiling. Measured (docs/benchmarks.md): from
    150 records (19 MiB in flight) on, admission refuses part of the load (it reserves 4x a body while the
    body is parsed, against the 64 MiB buffer), so this load is off by default.
    """
    cpu = CpuWindow({"agent": agent.pid, **extra_pids})
    result = run_produce_load(
        url,
        topics,
        clients=args.clients,
        records_per_request=args.throughput_records_per_request,
        value_bytes=args.value_bytes,
        procs=args.loadgen_procs,
        client=args.loadgen_client,
        warmup=args.warmup,
        duration=args.duration,
        think_ms=0.0,
        on_window_start=cpu.mark_start,
        on_window_end=cpu.mark_end,
    )
    result["cpu_cores"] = cpu.cores()
    return result


def fetch_phase(
    args: argparse.Namespace, agent: Proc, url: str, topics: list[str], extra_pids: dict[str, int]
) -> dict[str, Any]:
    before = scrape(url)
    cpu = CpuWindow({"agent": agent.pid, **extra_pids})
    cpu.mark_start()
    with py_spy(args, agent.pid, f"{args.backend_now}-fetch", args.fetch_timeout + 60):
        result = run_fetch_load(
            url,
            topics,
            concurrency=args.fetch_concurrency,
            max_bytes=args.fetch_max_bytes,
            timeout=args.fetch_timeout,
        )
        cpu.mark_end()
    after = scrape(url)
    result["mib_s"] = result["payload_bytes"] / result["elapsed_s"] / MiB if result["elapsed_s"] else None
    result["gets"] = gets(after) - gets(before)
    result["store_read_mib"] = (
        after.get("strata_object_store_read_bytes_total", 0)
        - before.get("strata_object_store_read_bytes_total", 0)
    ) / MiB
    result["cpu_cores"] = cpu.cores()
    result["minor_faults"] = cpu.faults()
    result["loadavg_after"] = loadavg()
    return result


def overload_phase(
    args: argparse.Namespace, workdir: Path, topics: list[str], store_args: list[str]
) -> dict[str, Any]:
    agent, url = start_agent(args, workdir, "agent-overload", store_args, args.overload_buffer_bytes)
    try:
        create_topics(url, topics, args.partitions)
        baseline = proc_mem_kib(agent.pid)
        before = scrape(url)
        max_buffer = 0.0
        stop = threading.Event()

        def watch_buffer() -> None:
            nonlocal max_buffer
            while not stop.is_set():
                with contextlib.suppress(httpx.HTTPError):
                    max_buffer = max(max_buffer, scrape(url).get("strata_buffer_bytes", 0.0))
                stop.wait(0.25)

        watcher = threading.Thread(target=watch_buffer, daemon=True)
        cpu = CpuWindow({"agent": agent.pid})
        with RssSampler(agent.pid) as sampler:
            watcher.start()
            try:
                result = run_produce_load(
                    url,
                    topics,
                    clients=args.overload_clients,
                    records_per_request=args.overload_records_per_request,
                    value_bytes=args.value_bytes,
                    procs=args.loadgen_procs,
                    client=args.loadgen_client,
                    warmup=args.warmup,
                    duration=args.overload_duration,
                    on_window_start=cpu.mark_start,
                    on_window_end=cpu.mark_end,
                )
            finally:
                stop.set()
                watcher.join()
        mem = proc_mem_kib(agent.pid)
        after = scrape(url)
        nflush = flushes(after) - flushes(before)
        flush_bytes = after.get("strata_flush_bytes_total", 0.0) - before.get("strata_flush_bytes_total", 0.0)
        result["flushes"] = nflush
        result["puts"] = puts(after) - puts(before)
        result["mib_per_flush"] = flush_bytes / nflush / MiB if nflush else None
        result["flush_seconds_mean"] = delta_mean(before, after, "strata_flush_seconds")
        result["flush_seconds_max_bucket"] = max_bucket(after, "strata_flush_seconds")
        limit_mib = args.overload_buffer_bytes / MiB + TARGET_RSS_HEADROOM_MIB
        result.pop("latency_ms", None)
        result.update(
            {
                "buffer_bytes_limit_mib": args.overload_buffer_bytes / MiB,
                "cache_bytes_mib": 64.0,
                "baseline_rss_mib": baseline.get("VmRSS", 0) / 1024,
                "peak_rss_sampled_mib": sampler.peak_kib / 1024,
                "vmhwm_mib": mem.get("VmHWM", 0) / 1024,
                "rss_limit_mib": limit_mib,
                "max_buffer_bytes_mib": max_buffer / MiB,
                "http_429": result["status"].get("429", 0),
                "cpu_cores": cpu.cores(),
                "loadavg_after": loadavg(),
            }
        )
        return result
    finally:
        agent.stop()


def stop_agent(agent: Proc, backend: str) -> dict[str, Any] | None:
    """Stop the agent; with --gc-stats, return its garbage-collector totals."""
    rc = agent.stop()
    if rc not in (0, -signal.SIGTERM, None):  # uvicorn re-raises SIGTERM once it has shut down
        log(f"[{backend}] {agent.name} exited with {rc}:\n{agent.tail()}")
    gc_path = agent.log_path.with_suffix(".gc.json")
    if gc_path.exists():
        return dict(json.loads(gc_path.read_text()))
    return None


def bracketed_ceiling(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The bare ceiling measured just before and just after the agent's produce window, as one figure.

    On this 2-vCPU machine the speed of the same code drifts by tens of percent within minutes (the
    bare app alone gave 158-211 MiB/s within half an hour: docs/benchmarks.md); one measurement on either
    side of the agent's window cancels a steady drift, where one before it alone could flatter or wrong
    the ratio. Throughput and CPU are the means of the two windows, which have the same length; both runs
    stay in ``runs``."""
    combined = dict(before)
    combined["mib_s"] = (before["mib_s"] + after["mib_s"]) / 2
    combined["records_s"] = (before["records_s"] + after["records_s"]) / 2
    combined["cpu_cores"] = {
        k: round((before["cpu_cores"].get(k, 0.0) + after["cpu_cores"].get(k, 0.0)) / 2, 2)
        for k in before["cpu_cores"]
    }
    combined["minor_faults"] = {
        k: before["minor_faults"].get(k, 0) + after["minor_faults"].get(k, 0) for k in before["minor_faults"]
    }
    combined["window_s"] = before["window_s"] + after["window_s"]
    combined["runs"] = [before, after]
    return combined


def produce_and_fetch(
    args: argparse.Namespace,
    backend: str,
    workdir: Path,
    topics: list[str],
    store_args: list[str],
    extra_pids: dict[str, int],
    out: dict[str, Any],
) -> None:
    log(f"[{backend}] ceiling: bare FastAPI, {args.clients} clients x {args.records_per_request} records")
    bare_before = bare_phase(args, workdir, topics, args.records_per_request)
    if args.throughput_records_per_request:
        out["bare_throughput"] = bare_phase(args, workdir, topics, args.throughput_records_per_request)
    agent, url = start_agent(args, workdir, "agent", store_args, args.buffer_bytes)
    try:
        create_topics(url, topics, args.partitions)
        out["agent_baseline_rss_mib"] = proc_mem_kib(agent.pid).get("VmRSS", 0) / 1024
        log(f"[{backend}] produce: strata agent, {args.clients} clients x {args.records_per_request} records")
        with RssSampler(agent.pid, 0.1) as sampler:
            out["produce"] = produce_phase(args, agent, url, topics, extra_pids)
        out["produce"]["peak_rss_mib"] = sampler.peak_kib / 1024
        if args.throughput_records_per_request:
            n, r = args.clients, args.throughput_records_per_request
            log(f"[{backend}] produce throughput: strata agent, {n} clients x {r} records")
            out["throughput"] = throughput_phase(args, agent, url, topics, extra_pids)
        if args.fetch_warm:
            log(f"[{backend}] fetch catch-up (same agent, warm cache)")
            out["fetch"] = fetch_phase(args, agent, url, topics, extra_pids)
            out["fetch"]["cache"] = "warm"
    finally:
        if "produce" in out:
            out["produce"]["agent_cpu_total_s"] = proc_cpu_s(agent.pid)
        gc_stats = stop_agent(agent, backend)
        if gc_stats is not None and "produce" in out:
            out["produce"]["agent_gc"] = gc_stats
    log(f"[{backend}] ceiling again, after the agent: bare FastAPI")
    out["bare"] = bracketed_ceiling(bare_before, bare_phase(args, workdir, topics, args.records_per_request))
    if not args.fetch_warm:
        # Catch-up reads history: a fresh agent on the same bucket and metadata, so its cache is cold and
        # every byte comes from the object store.
        log(f"[{backend}] fetch catch-up (fresh agent, cold cache)")
        agent, url = start_agent(args, workdir, "agent-fetch", store_args, args.buffer_bytes, "agent")
        try:
            out["fetch"] = fetch_phase(args, agent, url, topics, extra_pids)
            out["fetch"]["cache"] = "cold"
        finally:
            stop_agent(agent, backend)


def run_backend(args: argparse.Namespace, backend: str, workdir: Path) -> dict[str, Any]:
    args.backend_now = backend
    topics = [f"bench-{i}" for i in range(args.topics)]
    moto: Moto | None = None
    store_args: list[str] = []
    overload_store_args: list[str] = []
    extra_pids: dict[str, int] = {}
    out: dict[str, Any] = {"backend": backend, "loadavg_before": loadavg()}
    try:
        if backend == "s3":
            moto = start_moto(["strata-bench", "strata-bench-overload"], workdir)
            extra_pids["moto"] = moto.proc.pid
            common = ["--s3-endpoint", moto.endpoint, "--s3-region", "us-east-1"]
            store_args = ["--bucket", "s3://strata-bench", *common]
            overload_store_args = ["--bucket", "s3://strata-bench-overload", *common]
        if "produce" in args.phases:
            produce_and_fetch(args, backend, workdir, topics, store_args, extra_pids, out)
        if "overload" in args.phases:
            n, r = args.overload_clients, args.overload_records_per_request
            log(f"[{backend}] overload: {n} clients x {r} records")
            out["overload"] = overload_phase(args, workdir, topics, overload_store_args)
    finally:
        if moto is not None:
            moto.stop()
    out["targets"] = evaluate(out)
    return out


# --- report -----------------------------------------------------------------------------------------------
def evaluate(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Every figure with its target and pass/miss (None: no target, shown for the analysis)."""
    rows: list[dict[str, Any]] = []

    def row(name: str, value: Any, target: str, ok: bool | None, unit: str = "") -> None:
        rows.append({"metric": name, "value": value, "unit": unit, "target": target, "pass": ok})

    if "produce" in r:
        p, b = r["produce"], r["bare"]
        ratio = p["mib_s"] / b["mib_s"] if b["mib_s"] else None
        row("produce throughput", round(p["mib_s"], 1), ">= 40", p["mib_s"] >= TARGET_PRODUCE_MIB_S, "MiB/s")
        row("produce records/s", round(p["records_s"]), "-", None, "rec/s")
        row("bare FastAPI ceiling", round(b["mib_s"], 1), "-", None, "MiB/s")
        if "runs" in b:
            before, after = (round(run["mib_s"], 1) for run in b["runs"])
            row("bare FastAPI ceiling before / after the agent", f"{before} / {after}", "-", None, "MiB/s")
        ok = ratio is not None and ratio >= TARGET_CEILING_RATIO
        row("produce / ceiling", round(ratio * 100, 1) if ratio is not None else None, ">= 60", ok, "%")
        agent_ms = cpu_ms_per_mib(p["cpu_cores"].get("agent"), p["mib_s"])
        bare_ms = cpu_ms_per_mib(b["cpu_cores"].get("server"), b["mib_s"])
        row("agent CPU per MiB produced", agent_ms, "-", None, "ms")
        row("bare server CPU per MiB", bare_ms, "-", None, "ms")
        row("agent minor page faults per MiB", faults_per_mib(p, "agent"), "-", None)
        row("bare server minor page faults per MiB", faults_per_mib(b, "server"), "-", None)
        if agent_ms and bare_ms:
            row("ceiling ratio by CPU cost (bare/agent)", round(100 * bare_ms / agent_ms, 1), "-", None, "%")
        row(
            "agent / load generator CPU",
            f"{p['cpu_cores'].get('agent')} / {p['loadgen_cpu_cores']}",
            "-",
            None,
        )
        row("other load during produce", other_cores(p), "-", None, "cores")
        p50, p99 = p["latency_ms"]["p50"], p["latency_ms"]["p99"]
        row("produce latency p50", round(p50, 1), "<= 200", p50 <= TARGET_P50_MS, "ms")
        row("produce latency p99", round(p99, 1), "<= 350", p99 <= TARGET_P99_MS, "ms")
        ppf = p["puts_per_flush"]
        row("PUTs per flush", round(ppf, 3) if ppf else None, "= 1", ppf == TARGET_PUTS_PER_FLUSH)
        row(
            "PUTs per second (under load)",
            round(p["puts_s"], 2),
            "<= 4",
            p["puts_s"] <= TARGET_PUTS_PER_S,
            "/s",
        )
        row("MiB per flush", round(p["mib_per_flush"] or 0, 2), "-", None, "MiB")
        row("flush upload+commit, mean", round(1000 * (p["flush_seconds_mean"] or 0)), "-", None, "ms")
        idle_ok = p["idle_puts"] == TARGET_IDLE_PUTS
        row(f"PUTs while idle ({p['idle_s']:g} s)", p["idle_puts"], "= 0", idle_ok)
    if "throughput" in r:
        t, bt = r["throughput"], r["bare_throughput"]
        name = f"{r['throughput']['clients']} x {r['throughput']['records_per_request']} records"
        row(f"produce throughput, {name}", round(t["mib_s"], 1), ">= 60", t["mib_s"] >= 60.0, "MiB/s")
        row(f"bare FastAPI ceiling, {name}", round(bt["mib_s"], 1), "-", None, "MiB/s")
        t_ratio = t["mib_s"] / bt["mib_s"] if bt["mib_s"] else None
        t_ok = t_ratio is not None and t_ratio >= TARGET_CEILING_RATIO
        shown = round(t_ratio * 100, 1) if t_ratio is not None else None
        row(f"produce / ceiling, {name}", shown, ">= 60", t_ok, "%")
        refused = sum(v for k, v in t["status"].items() if k != "200")
        row(f"requests refused or failed, {name}", refused, "= 0", refused == 0)
        row(
            f"agent CPU per MiB produced, {name}",
            cpu_ms_per_mib(t["cpu_cores"].get("agent"), t["mib_s"]),
            "-",
            None,
            "ms",
        )
    if "fetch" in r:
        f = r["fetch"]
        complete = f["records"] == f["expected_records"]
        ok = f["mib_s"] >= TARGET_FETCH_MIB_S and complete
        row(f"fetch catch-up ({f['cache']} cache)", round(f["mib_s"], 1), ">= 100", ok, "MiB/s")
        # Per MiB served (key and value bytes the consumers received), not per MiB read from the store:
        # reading the same files again shows as read amplification, not as fewer GETs per MiB.
        served_mib = f["payload_bytes"] / MiB
        gets_per_mib = f["gets"] / served_mib if served_mib else None
        row(
            "fetch GETs per MiB served",
            f"{gets_per_mib:.3f} ({f['gets']:g} / {served_mib:.0f})" if gets_per_mib is not None else "-",
            "<= 0.25",
            gets_per_mib is not None and gets_per_mib <= TARGET_FETCH_GETS_PER_MIB,
        )
        row(
            "fetch MiB read from the store per MiB served",
            round(f["store_read_mib"] / served_mib, 2) if served_mib else "-",
            "-",
            None,
        )
        row("agent minor page faults per MiB fetched", faults_per_mib(f, "agent"), "-", None)
        row(
            "agent CPU per MiB fetched",
            cpu_ms_per_mib(f["cpu_cores"].get("agent"), f["mib_s"]),
            "-",
            None,
            "ms",
        )
    o = r.get("overload")
    if o is not None:
        peak = max(o["peak_rss_sampled_mib"], o["vmhwm_mib"])
        limit = o["rss_limit_mib"]
        row("agent peak RSS under overload", round(peak, 1), f"<= {limit:g}", peak <= limit, "MiB")
        row("max strata_buffer_bytes seen", round(o["max_buffer_bytes_mib"], 1), "<= 64", None, "MiB")
        row("429 answers under overload", o["http_429"], "-", None)
    return rows


def cpu_ms_per_mib(cores: float | None, mib_s: float) -> float | None:
    """CPU milliseconds a process spent per MiB of payload: robust to a busy machine, unlike MiB/s."""
    if not cores or not mib_s:
        return None
    return round(1000 * cores / mib_s, 1)


def faults_per_mib(phase: dict[str, Any], name: str) -> float | None:
    """Minor page faults a process took per MiB of payload in a phase (None if not measured)."""
    faults = phase.get("minor_faults", {}).get(name)
    if "payload_bytes" in phase:  # fetch
        payload_mib = phase["payload_bytes"] / MiB
    else:  # produce: the CPU window is the load's measured window
        payload_mib = (phase.get("mib_s") or 0.0) * phase.get("window_s", 0.0)
    if faults is None or not payload_mib:
        return None
    return round(faults / payload_mib, 1)


def other_cores(phase: dict[str, Any]) -> float:
    """Cores busy with processes this benchmark did not start (other work on the machine)."""
    cores = dict(phase["cpu_cores"])
    system = cores.pop("system", 0.0)
    return round(max(0.0, system - sum(cores.values()) - phase.get("loadgen_cpu_cores", 0.0)), 2)


def markdown_table(r: dict[str, Any]) -> str:
    lines = ["| metric | value | target | result |", "| --- | --- | --- | --- |"]
    for t in r["targets"]:
        verdict = "-" if t["pass"] is None else ("pass" if t["pass"] else "**miss**")
        target = "-" if t["target"] == "-" else f"{t['target']} {t['unit']}".strip()
        lines.append(f"| {t['metric']} | {t['value']} {t['unit']}".rstrip() + f" | {target} | {verdict} |")
    return "\n".join(lines)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def code_fingerprint() -> str:
    """sha256 of the application sources, to tie figures to a state of the tree (the bench runs no git)."""
    digest = hashlib.sha256()
    for package in ("agents", "api", "storage", "planner"):
        for path in sorted((ROOT / package).rglob("*.py")):
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def machine_info() -> dict[str, Any]:
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    cpu_model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu_model,
        "mem_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_at_start": loadavg(),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("local", "s3", "both"), default="both")
    parser.add_argument("--clients", type=int, default=128, help="concurrent closed-loop produce clients")
    parser.add_argument("--records-per-request", type=int, default=100)
    parser.add_argument(
        "--throughput-records-per-request",
        type=int,
        default=0,
        help="records per request of an extra load with more bytes in flight (0: none); see throughput_phase",
    )
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--topics", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=32, help="total, split evenly over the topics")
    parser.add_argument("--duration", type=float, default=10.0, help="measured produce window, seconds")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--idle", type=float, default=3.0, help="idle window for the 0-PUT check")
    parser.add_argument("--loadgen-procs", type=int, default=1, help="load generator processes")
    parser.add_argument(
        "--loadgen-client",
        choices=("aiohttp", "httpx"),
        default="aiohttp",
        help="the produce load's HTTP client (httpx: the client of runs before the ninth session)",
    )
    parser.add_argument("--flush-interval-ms", type=int, default=250)
    parser.add_argument("--buffer-bytes", type=int, default=64 * MiB)
    parser.add_argument("--role", choices=("agent", "all"), default="agent")
    parser.add_argument("--fetch-concurrency", type=int, default=8)
    parser.add_argument("--fetch-max-bytes", type=int, default=8 * MiB)
    parser.add_argument("--fetch-timeout", type=float, default=30.0)
    parser.add_argument(
        "--fetch-warm",
        action="store_true",
        help="fetch from the producing agent (warm cache), not a fresh one",
    )
    parser.add_argument(
        "--think-ms", type=float, default=0.0, help="produce clients pause uniform 0..T ms after each answer"
    )
    parser.add_argument("--overload-clients", type=int, default=128)
    parser.add_argument("--overload-records-per-request", type=int, default=1000)
    parser.add_argument("--overload-duration", type=float, default=8.0)
    parser.add_argument("--overload-buffer-bytes", type=int, default=64 * MiB)
    parser.add_argument(
        "--phases", default="produce,overload", help="produce (with ceiling, idle and fetch), overload"
    )
    parser.add_argument("--py-spy", default=None, help="path of a py-spy binary: profile produce and fetch")
    parser.add_argument(
        "--gc-stats", action="store_true", help="run the agent under bench/agent_gcstats.py (GC pause totals)"
    )
    parser.add_argument(
        "--mem-trace",
        action="store_true",
        help="run the agent under bench/agent_memtrace.py (tracemalloc top sites near the peak; slow)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, data)")
    parser.add_argument("--out", default=None, help="JSON results file (default bench/results/<time>.json)")
    args = parser.parse_args(argv)
    args.run_id = time.strftime("%Y%m%d-%H%M%S")
    args.phases = sorted(set(args.phases.split(",")))
    if not set(args.phases) <= {"produce", "overload"}:
        parser.error("--phases takes produce and/or overload")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.py_spy and not shutil.which(args.py_spy):
        log(f"py-spy not found at {args.py_spy}")
        return 2
    RESULTS_DIR.mkdir(exist_ok=True)
    backends = ["local", "s3"] if args.backend == "both" else [args.backend]
    workdir = Path(tempfile.mkdtemp(prefix="strata-bench-"))
    started = time.monotonic()
    report: dict[str, Any] = {
        "run_id": args.run_id,
        "command": " ".join([".venv/bin/python", "bench/produce_fetch.py", *(argv or sys.argv[1:])]),
        "machine": machine_info(),
        "code_sha256": code_fingerprint(),
        "params": {k: v for k, v in vars(args).items() if k not in ("run_id", "backend_now")},
        "backends": {},
    }
    try:
        for backend in backends:
            backend_dir = workdir / backend
            backend_dir.mkdir()
            try:
                report["backends"][backend] = run_backend(args, backend, backend_dir)
            except (RuntimeError, OSError, httpx.HTTPError, subprocess.SubprocessError) as exc:
                log(f"[{backend}] failed: {exc}")
                report["backends"][backend] = {"backend": backend, "error": str(exc)}
    finally:
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    out = Path(args.out) if args.out else RESULTS_DIR / f"produce_fetch-{args.run_id}.json"
    out.write_text(json.dumps(report, indent=2))
    for backend, r in report["backends"].items():
        print(f"\n### {backend}\n")
        print(markdown_table(r) if "targets" in r else f"failed: {r.get('error')}")
        if "produce" in r and other_cores(r["produce"]) > 1.0:
            busy = other_cores(r["produce"])
            print(f"\nWARNING: other processes used {busy} of {os.cpu_count()} cores while producing; rerun")
    took = report["elapsed_s"]
    print(f"\nload average at start {report['machine']['loadavg_at_start']}; took {took} s; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
