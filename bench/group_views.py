"""The group benchmark's view from outside: its client processes' reports, the group's state from them,
and the metadata store's write counter.

Counting metadata-store writes without touching the agent: SQLite runs in WAL mode, and the WAL index
(the ``metadata.db-shm`` file every connection maps) starts with a header whose ``iChange`` field
(4 bytes at offset 8, native byte order) is incremented by each transaction that commits changes, by any
connection of any process; a write transaction that changed nothing leaves it alone. The header is stored
twice (offsets 0 and 48); a read is used when both copies agree, as SQLite's own readers do. ``PRAGMA
data_version`` and ``total_changes`` cannot do this: they are per connection.
"""

from __future__ import annotations

import contextlib
import json
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bench.harness import ROOT, bench_env, module_cmd

T = TypeVar("T")


@dataclass
class Child:
    name: str
    popen: subprocess.Popen[str]
    log_path: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    reader: threading.Thread | None = None

    def read(self) -> None:
        assert self.popen.stdout is not None
        with self.popen.stdout:
            for line in self.popen.stdout:
                with contextlib.suppress(json.JSONDecodeError), self.lock:
                    self.events.append(json.loads(line))

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def last(self, ev: str) -> dict[str, Any] | None:
        return next((e for e in reversed(self.snapshot()) if e["ev"] == ev), None)

    def stop(self) -> None:
        if self.popen.stdin is not None and not self.popen.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.popen.stdin.write("stop\n")
                self.popen.stdin.close()

    def wait(self, timeout: float) -> int:
        try:
            rc = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            rc = self.popen.wait(10)
        if self.reader is not None:
            self.reader.join(5)
        return rc

    def tail(self) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:])


def start_child(name: str, argv: list[str], workdir: Path) -> Child:
    log_path = workdir / f"{name}.log"
    with log_path.open("w") as stderr:
        popen = subprocess.Popen(
            module_cmd("bench.group_clients", *argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            bufsize=1,
            cwd=ROOT,
            env=bench_env(),
        )
    child = Child(name, popen, log_path)
    child.reader = threading.Thread(target=child.read, daemon=True)
    child.reader.start()
    return child


def wait_until(what: str, check: Callable[[], T | None], timeout: float, children: list[Child]) -> T:
    """Poll ``check()`` until it returns something other than None."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result is not None:
            return result
        for c in children:
            if c.popen.poll() is not None:
                raise RuntimeError(
                    f"{c.name} exited with {c.popen.returncode} waiting for {what}:\n{c.tail()}"
                )
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.05)


class StoreWrites:
    """Transactions that committed changes to a SQLite database in WAL mode, by every process: the WAL
    index header's ``iChange`` (see the module docstring)."""

    HEADER = 48

    def __init__(self, db: Path) -> None:
        self.shm = Path(str(db) + "-shm")

    def read(self) -> int:
        for _ in range(1000):
            with contextlib.suppress(FileNotFoundError), self.shm.open("rb") as f:
                head = f.read(2 * self.HEADER)
                # Both copies equal and isInit set: not torn by a concurrent writer.
                if len(head) == 2 * self.HEADER and head[: self.HEADER] == head[self.HEADER :] and head[12]:
                    value: int = struct.unpack_from("=I", head, 8)[0]
                    return value
            time.sleep(0.001)
        raise RuntimeError(f"no consistent WAL-index header in {self.shm}")

    @staticmethod
    def delta(before: int, after: int) -> int:
        return (after - before) % 2**32


def latest_assignment(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    for e in reversed(events):
        if e["ev"] == "assigned":
            found: dict[str, Any] = e
            return found
        if e["ev"] in ("revoked", "leaving"):
            return None
    return None


def consuming(members: list[Child], since: float, partitions: int) -> dict[str, Any] | None:
    """When every member has an assignment made after ``since``, together covering every partition once,
    and has read a record under it: per member, its revocation, assignment and first record times."""
    owners: dict[int, str] = {}
    view: dict[str, Any] = {}
    for m in members:
        events = m.snapshot()
        assigned = latest_assignment(events)
        if assigned is None or assigned["t"] < since:
            return None
        for p in assigned["parts"]:
            if p in owners:
                return None
            owners[p] = m.name
        firsts = [e["t"] for e in events if e["ev"] == "first" and e["t"] >= assigned["t"]]
        if not firsts:
            return None
        revokes = [e["t"] for e in events if e["ev"] == "revoked" and e["t"] >= since]
        view[m.name] = {
            "revoked": min(revokes) if revokes else None,
            "assigned": assigned["t"],
            "first": min(firsts),
            "parts": assigned["parts"],
        }
    if len(owners) != partitions:
        return None
    return view


def partition_firsts(members: list[Child], since: float) -> dict[int, float]:
    out: dict[int, float] = {}
    for m in members:
        for e in m.snapshot():
            if e["ev"] == "first" and e["t"] >= since:
                out[e["p"]] = min(out.get(e["p"], e["t"]), e["t"])
    return out


def progress(members: list[Child]) -> dict[str, float]:
    total = {"records": 0.0, "bytes": 0.0, "commits": 0.0, "commit_errors": 0.0, "errors": 0.0, "last_t": 0.0}
    for m in members:
        p = m.last("progress")
        if p is None:
            continue
        for k in ("records", "bytes", "commits", "commit_errors", "errors"):
            total[k] += p[k]
        total["last_t"] = max(total["last_t"], p["last_t"])
    return total
