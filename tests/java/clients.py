"""Run the Java client scenarios of tests/java/src (Kafka's own producer, consumer and Admin client) and
read their one JSON answer. The sources are compiled with the JDK's javac against Kafka's jars into
``.cache/kafka/classes``, again whenever a source is newer than its class files: under a file lock, since the
suite's pytest-xdist workers may all ask at once.

A test process sends its scenarios to one JVM (``Clients serve``), and the runs of Kafka's tools that
``tool`` makes to another (``Tools``), each started at its first use and stopped when the process exits: a
JVM's start and its loading of Kafka's classes cost more CPU than most scenarios or tool runs. A call that
overruns its timeout, or finds its JVM gone, stops that JVM, and the next call starts another. Kafka
Streams runs in a JVM of its own each time (its threads and state directory are the JVM's), and so does
every tool run through ``kafka.run``: the README's commands are checked as an operator runs them.
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
TOOLS = "strata.javatests.Tools"


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


class _ServingJvm:
    """A JVM that reads a call per line written and answers each with a line read."""

    def __init__(self, *command: str) -> None:
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop)
        self._proc = subprocess.Popen(
            kafka.command(*command, extra_cp=[compiled()]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._pending = b""

    def ask(self, args: list[str], timeout: float) -> Any:
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        try:
            self._proc.stdin.write(("\t".join(args) + "\n").encode())
            self._proc.stdin.flush()
        except BrokenPipeError:
            raise self._gone(args[0], []) from None
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
                    raise self._gone(args[0], seen)
                self._pending += chunk

    def _gone(self, call: str, seen: list[bytes]) -> RuntimeError:
        """The JVM exited: stopped here, and the error names the call and ends with the JVM's output."""
        self._stderr.seek(0)
        err = self._stderr.read().decode(errors="replace")
        out = b"\n".join(seen).decode(errors="replace")
        self.stop()
        return RuntimeError(f"{call}: the serving JVM exited:\n{out[-2000:]}\n{err[-3000:]}")

    def kill(self) -> None:
        """Kill the JVM and wait for it, leaving this object to find it gone (for the harness's test)."""
        self._proc.kill()
        self._proc.wait()

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except BrokenPipeError:
                    pass  # stdin's last line could not reach a JVM that had exited
        self._stderr.close()


_jvms: dict[str, _ServingJvm] = {}  # by main class


def serving_jvm(main_class: str) -> _ServingJvm | None:
    """This process's serving JVM of ``main_class``, if one is running."""
    return _jvms.get(main_class)


def _ask(command: tuple[str, ...], args: list[str], timeout: float) -> Any:
    assert not any(c in arg for arg in args for c in "\t\n"), args  # the line's separators
    jvm = _jvms.get(command[0])
    if jvm is None:
        jvm = _jvms[command[0]] = _ServingJvm(*command)
    try:
        return jvm.ask(args, timeout)
    except (subprocess.TimeoutExpired, RuntimeError):
        del _jvms[command[0]]  # stopped: the next call starts another
        raise


@atexit.register
def _stop_jvms() -> None:
    for jvm in _jvms.values():
        jvm.stop()
    _jvms.clear()


def tool(main_class: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools to its end, as ``kafka.run`` does, in this process's tool JVM."""
    answer = _ask((TOOLS,), [main_class, *args], timeout)
    stderr = kafka.without_slf4j(answer["stderr"])
    return subprocess.CompletedProcess([main_class, *args], answer["code"], answer["stdout"], stderr)


def scenario(name: str, bootstrap: str, timeout: float = 120, **options: object) -> Any:
    """One scenario's answer: ``name`` with ``bootstrap=...`` and ``options`` as key=value arguments."""
    args = [f"bootstrap={bootstrap}", *(f"{k}={v}" for k, v in options.items())]
    if name not in OWN_JVM:
        return _ask((MAIN, "serve"), [name, *args], timeout)
    cmd = kafka.command(MAIN, name, *args, extra_cp=[compiled()])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{name} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])
