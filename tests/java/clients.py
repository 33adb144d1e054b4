"""Run the Java client scenarios of tests/java/src (Kafka's own producer, consumer and Admin client) and
read their one JSON answer. The sources are compiled with the JDK's javac against Kafka's jars into
``.cache/kafka/classes``, again whenever a source is newer than its class files: under a file lock, since the
suite's pytest-xdist workers may all ask at once.

A test process sends its scenarios to one JVM (``Clients serve``), started at the first and stopped when the
process exits: a JVM's start and its loading of Kafka's classes cost more CPU than most scenarios, and the
suite runs about a hundred. A scenario that overruns its timeout kills that JVM (the next starts another).
Kafka Streams runs in a JVM of its own each time (its threads and state directory are the JVM's).
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import select
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from tests.java import kafka

SOURCES = Path(__file__).resolve().parent / "src"
CLASSES = kafka.ROOT / ".cache" / "kafka" / "classes"
MAIN = "strata.javatests.Clients"


def compiled() -> Path:
    """The class directory, compiled first if a source is newer than the last build."""
    sources = sorted(SOURCES.rglob("*.java"))
    stamp = CLASSES / ".built"
    newest = max(p.stat().st_mtime for p in sources)
    CLASSES.mkdir(parents=True, exist_ok=True)
    with open(CLASSES.parent / "classes.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not stamp.exists() or stamp.stat().st_mtime < newest:
            _javac(sources, stamp)
    return CLASSES


def _javac(sources: list[Path], stamp: Path) -> None:
    done = subprocess.run(
        ["javac", "--release", "17", "-nowarn", "-cp", kafka.classpath(), "-d", str(CLASSES)]
        + [str(p) for p in sources],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"javac failed on tests/java/src:\n{done.stderr}")
    stamp.touch()


ANSWER = b"@answer "  # Clients.ANSWER
OWN_JVM = {"streams"}


class _ScenarioJvm:
    """``Clients serve``: a scenario per line written, an answer per line read."""

    def __init__(self) -> None:
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop)
        self._proc = subprocess.Popen(
            kafka.command(MAIN, "serve", extra_cp=[compiled()]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._pending = b""

    def ask(self, args: list[str], timeout: float) -> Any:
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._proc.stdin.write(("\t".join(args) + "\n").encode())
        self._proc.stdin.flush()
        deadline = time.monotonic() + timeout
        seen: list[bytes] = []  # the clients' own output, for the error
        fd = self._proc.stdout.fileno()
        while True:
            line, newline, rest = self._pending.partition(b"\n")
            if newline:
                self._pending = rest
                if line.startswith(ANSWER):
                    return json.loads(line[len(ANSWER) :])
                seen.append(line)
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise subprocess.TimeoutExpired(args[0], timeout)
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.stop()
                    raise RuntimeError(f"{args[0]}: the scenario JVM exited:\n{self._tail(seen)}")
                self._pending += chunk

    def _tail(self, seen: list[bytes]) -> str:
        self._stderr.seek(0)
        err = self._stderr.read().decode(errors="replace")
        out = b"\n".join(seen).decode(errors="replace")
        return f"{out[-2000:]}\n{err[-3000:]}"

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._stderr.close()


_jvm: _ScenarioJvm | None = None


def _stop_jvm() -> None:
    global _jvm
    if _jvm is not None:
        _jvm.stop()
        _jvm = None


atexit.register(_stop_jvm)


def scenario(name: str, bootstrap: str, timeout: float = 120, **options: object) -> Any:
    """One scenario's answer: ``name`` with ``bootstrap=...`` and ``options`` as key=value arguments."""
    global _jvm
    args = [f"bootstrap={bootstrap}", *(f"{k}={v}" for k, v in options.items())]
    if name not in OWN_JVM:
        assert not any(c in arg for arg in args for c in "\t\n"), args  # the line's separators
        if _jvm is None:
            _jvm = _ScenarioJvm()
        try:
            return _jvm.ask([name, *args], timeout)
        except (subprocess.TimeoutExpired, RuntimeError):
            _jvm = None  # stopped: the next scenario starts another
            raise
    cmd = kafka.command(MAIN, name, *args, extra_cp=[compiled()])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{name} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])
