"""Run the Java client scenarios of tests/java/src (Kafka's own producer, consumer and Admin client) and
read their one JSON answer. The sources are compiled with the JDK's javac against Kafka's jars into
``.cache/kafka/classes``, again whenever a source is newer than its class files: under a file lock, since the
suite's pytest-xdist workers may all ask at once."""

from __future__ import annotations

import fcntl
import json
import subprocess
from pathlib import Path
from typing import Any

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


def scenario(name: str, bootstrap: str, timeout: float = 120, **options: object) -> Any:
    """One scenario's answer: ``name`` with ``bootstrap=...`` and ``options`` as key=value arguments."""
    args = [f"bootstrap={bootstrap}", *(f"{k}={v}" for k, v in options.items())]
    cmd = kafka.command(MAIN, name, *args, extra_cp=[compiled()])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{name} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])
