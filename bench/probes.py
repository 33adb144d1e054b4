"""What a benchmark reads about processes and the machine: CPU, memory and page faults from /proc, the
machine's description, a fingerprint of the code measured, and percentiles.

The /proc readers are a few lines each and read exactly the fields the benchmarks report (utime + stime,
minor faults, VmRSS and VmHWM, the machine's busy time); psutil, the usual library for this, is not a
dependency of the project and does not expose VmHWM, the peak the memory bounds are checked against.
Percentiles use numpy (a dependency already): nearest rank, so a reported percentile is a measured value.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from bench.harness import ROOT

CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- one process --------------------------------------------------------------------------------------------
def proc_stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (fields[0] is the state, field 3 of
    proc(5)); None if the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def proc_cpu_s(pid: int | str) -> float:
    """utime + stime of the process (all its threads), in seconds; 0 if it is gone."""
    fields = proc_stat(pid)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK if fields else 0.0


def worker_children(pid: int) -> list[int]:
    """The live ``strata serve`` worker processes (multiprocessing's spawned children) of ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        fields = proc_stat(entry) if entry.isdigit() else None
        if fields is None or int(fields[1]) != pid or fields[0] == "Z":
            continue
        try:
            if b"spawn_main" in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            continue  # ended meanwhile
    return found


def settle_disk() -> float:
    """Write the page cache's dirty pages out (``sync``) before a latency window, and the seconds it took.

    The phases before it leave gigabytes dirty, and the kernel's writeback of them makes the window's
    fsyncs wait: a low-latency topic's p99 then measures the previous phase, not the agent.
    """
    started = time.monotonic()
    os.sync()
    return time.monotonic() - started


def proc_minor_faults(pid: int | str) -> int:
    """Minor page faults of the process (all its threads) so far; 0 if it is gone. Each is a page the
    kernel mapped and zeroed on first touch: memory malloc had handed back and took again."""
    fields = proc_stat(pid)
    return int(fields[7]) if fields else 0


def status_kib(name: str, pid: int | str = "self") -> int:
    """A ``VmXxx:`` line of /proc/<pid>/status in KiB (-1 if unavailable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1])
    except OSError:
        return -1
    return -1


def proc_mem_kib(pid: int | str) -> dict[str, int]:
    """VmRSS and VmHWM of the process in KiB (missing keys if it is gone)."""
    out = {}
    for name in ("VmRSS", "VmHWM"):
        kib = status_kib(name, pid)
        if kib >= 0:
            out[name] = kib
    return out


def reset_peak_rss(pid: int | str) -> bool:
    """Set the process's VmHWM (its peak RSS, kept by the kernel) to its RSS now, so that a later VmHWM is
    the peak since this moment, however short: ``5`` to /proc/<pid>/clear_refs (Linux 4.0 and on). False
    where that is refused (another user's process)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


# --- the machine --------------------------------------------------------------------------------------------
def system_busy_s() -> float:
    """CPU seconds spent busy by the whole machine (all cores), from /proc/stat."""
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + parts[4]  # idle + iowait
    return (sum(parts[:8]) - idle) / CLK_TCK


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def python_loop_s(additions: int = 10_000_000) -> float:
    """Seconds a pure-Python loop of ``additions`` integer additions (in a function: local variables) takes
    here now: the speed one core gives the interpreter at the run's start. On a shared virtual machine it
    moves by half from one hour to the next, and the agent's CPU-bound figures with it, so every run records
    it beside its figures. It samples well under a second (its own figure): a neighbour that comes and goes
    during the run is not in it."""
    started = time.perf_counter()
    total = 0
    for i in range(additions):
        total += i
    return round(time.perf_counter() - started, 3)


def machine_info(**versions: str) -> dict[str, Any]:
    """The machine a run measured, with the versions of the libraries it depends on (``versions``)."""
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
        "kernel": platform.release(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        **versions,
        "loadavg_at_start": loadavg(),
        "python_loop_10m_s": python_loop_s(),
    }


def code_fingerprint(packages: tuple[str, ...], tree: Path = ROOT) -> str:
    """sha256 of the packages' Python sources, to tie figures to a state of the tree (a copy without git
    history, or one with uncommitted changes, has no commit that says it)."""
    digest = hashlib.sha256()
    for package in packages:
        for path in sorted((tree / package).rglob("*.py")):
            digest.update(str(path.relative_to(tree)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def git_commit(tree: Path = ROOT) -> str | None:
    """The tree's commit (short hash, ``+`` when tracked files differ from it); None outside a checkout."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=tree,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+" if dirty else "")


# --- figures ------------------------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` quantile (0 < q <= 1) of ``values``; None when there are none."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q * 100, method="inverted_cdf"))


def cpu_ms_per_mib(cores: float | None, mib_s: float | None) -> float | None:
    """CPU milliseconds a process spent per MiB of payload: robust to a busy machine, unlike MiB/s."""
    if not cores or not mib_s:
        return None
    return round(1000 * cores / mib_s, 1)


def other_cores(phase: dict[str, Any]) -> float:
    """Cores busy with processes this benchmark did not start (other work on the machine)."""
    cores: dict[str, float] = dict(phase["cpu_cores"])
    system = cores.pop("system", 0.0)
    loadgen: float = phase.get("loadgen_cpu_cores", 0.0)
    return round(max(0.0, system - sum(cores.values()) - loadgen), 2)


# --- samplers -----------------------------------------------------------------------------------------------
class RssSampler:
    """VmRSS of a process (``"self"`` by default) every ``interval`` seconds in a daemon thread: the peak,
    and a timeline. A context manager, or ``start()`` / ``stop()``."""

    def __init__(self, pid: int | str = "self", interval: float = 0.05) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self.timed: list[tuple[float, int]] = []
        self.t0 = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def samples(self) -> int:
        return len(self.timed)

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = status_kib("VmRSS", self.pid)
            self.peak_kib = max(self.peak_kib, rss)
            self.timed.append((time.perf_counter() - self.t0, rss))
            self._stop.wait(self.interval)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def __enter__(self) -> RssSampler:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def peak_between(self, start: float, end: float) -> int:
        inside = [kib for t, kib in self.timed if start <= t <= end]
        return max(inside) if inside else -1

    def timeline(self, points: int = 60) -> list[tuple[float, float]]:
        """At most ``points`` (seconds, MiB) pairs: the maximum of each equal slice of the samples."""
        step = max(1, len(self.timed) // points)
        out = []
        for i in range(0, len(self.timed), step):
            part = self.timed[i : i + step]
            out.append((round(part[0][0], 2), round(max(k for _, k in part) / 1024, 1)))
        return out


@dataclass
class CpuWindow:
    """CPU seconds and minor page faults of given processes, and the machine's busy time, between two
    marks; ``cores()`` divides by the wall time between them."""

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
