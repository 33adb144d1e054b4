"""Where a Spark read's CPU goes: the JVM (by thread group), its Python workers, moto, and the machine.

Read from /proc around each query (see ``CpuMeter.measure``). A dead process's time is in its parent's
cutime/cstime once reaped, so summing utime+stime+cutime+cstime over the living processes counts every CPU
second once (pyspark's workers are reaped by its daemon).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.probes import CLK_TCK, system_busy_s


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, utime + stime + cutime + cstime in seconds) of a process, None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), sum(int(x) for x in fields[11:15]) / CLK_TCK


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def process_tree_cpu(root: int, exclude: set[int]) -> dict[str, float]:
    """CPU seconds (own + reaped children) of ``root``'s descendants: the JVM, and the Python processes.

    A dead process's time is in its parent's cutime/cstime once reaped, so summing utime+stime+cutime+cstime
    over the living processes counts every CPU second once (pyspark workers are reaped by the daemon).
    """
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        st = _stat(int(entry))
        if st is not None:
            parents[int(entry)], cpu[int(entry)] = st
    out = {"jvm": 0.0, "python_workers": 0.0}
    for pid in cpu:
        p, inside = pid, False
        while p > 1:
            p = parents.get(p, 0)
            if p in exclude:
                break
            if p == root:
                inside = True
                break
        if not inside or pid in exclude:
            continue
        out["jvm" if "java" in _comm(pid).split(" ", 1)[0] else "python_workers"] += cpu[pid]
    return out


# JVM threads by name (/proc/PID/task/TID/comm, 15 characters): where the JVM's CPU goes.
JVM_THREAD_GROUPS = (
    ("gc", re.compile(r"^(GC Thread|G1 |VM Thread|VM Periodic)")),
    ("jit", re.compile(r"^C[12] Compiler")),
    ("executor tasks", re.compile(r"^Executor task")),
    ("python i/o threads", re.compile(r"(?i)python|stdout writ|stdin writ|writer for")),
    ("driver: py4j (planning, codegen)", re.compile(r"^Thread-\d+$")),
)


def jvm_threads_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of the JVM's living threads, grouped by JVM_THREAD_GROUPS; 'exited' = the rest."""
    out = {name: 0.0 for name, _ in JVM_THREAD_GROUPS}
    out["other threads"] = 0.0
    task_dir = Path(f"/proc/{pid}/task")
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return out
    for tid in tids:
        try:
            comm = (task_dir / tid / "comm").read_text().strip()
            fields = (task_dir / tid / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds = (int(fields[11]) + int(fields[12])) / CLK_TCK
        group = next((name for name, pattern in JVM_THREAD_GROUPS if pattern.search(comm)), "other threads")
        out[group] += seconds
    st = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    out["exited threads"] = max(0.0, (int(st[11]) + int(st[12])) / CLK_TCK - sum(out.values()))
    return out


def jvm_pid() -> int | None:
    """The Spark JVM started by this process (a descendant whose command is java)."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or not _comm(int(entry)).split(" ", 1)[0].endswith("java"):
            continue
        p = int(entry)
        while p > 1:
            st = _stat(p)
            if st is None:
                break
            p = st[0]
            if p == me:
                return int(entry)
    return None


def pyspark_daemons() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and "pyspark.daemon" in _comm(int(entry)):
            st = _stat(int(entry))
            # the daemon itself, not its forked workers (whose parent is a daemon)
            if st is not None and "pyspark.daemon" not in _comm(st[0]):
                pids.append(int(entry))
    return pids


class CpuMeter:
    """CPU seconds of the Spark JVM (by thread group), the Python workers, moto and the machine."""

    def __init__(self, moto_pid: int | None) -> None:
        self.moto_pid = moto_pid
        self.jvm: int | None = None

    def read(self) -> dict[str, float]:
        exclude = {self.moto_pid} if self.moto_pid else set()
        out = process_tree_cpu(os.getpid(), exclude)
        st = _stat(self.moto_pid) if self.moto_pid else None
        out["moto"] = st[1] if st else 0.0
        out["driver"] = sum(os.times()[:2])
        out["system"] = system_busy_s()
        if self.jvm is None:
            self.jvm = jvm_pid()
        if self.jvm is not None:
            out.update({f"jvm: {k}": v for k, v in jvm_threads_cpu(self.jvm).items()})
        out["wall"] = time.perf_counter()
        return out

    @contextlib.contextmanager
    def measure(self, into: dict[str, Any]) -> Iterator[None]:
        before = self.read()
        yield
        after = self.read()
        wall = after["wall"] - before["wall"]
        into["wall_s"] = round(wall, 3)
        cpu = {k: round(after[k] - before.get(k, 0.0), 2) for k in after if k != "wall"}
        top = {k: v for k, v in cpu.items() if not k.startswith("jvm: ") and k != "system"}
        cpu["other"] = round(max(0.0, cpu["system"] - sum(top.values())), 2)
        into["cpu_s"] = cpu
