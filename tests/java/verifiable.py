"""Running Kafka's verifiable producer and consumer (org.apache.kafka.tools.Verifiable*) as processes and
reading the JSON events they print, one per line."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.java import kafka


def events(path: Path) -> list[dict[str, Any]]:
    """The JSON events a tool printed to ``path`` so far."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # the last line, half written
                continue
    return out


@contextmanager
def tool(main_class: str, out: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """The tool running, its stdout to ``out`` and stderr beside it; killed on the way out."""
    with out.open("wb") as stdout, (out.with_suffix(".err")).open("wb") as stderr:
        proc = subprocess.Popen(kafka.command(main_class, *args), stdout=stdout, stderr=stderr)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def wait_for(predicate: Any, timeout: float, what: str, tool: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``predicate``; fail naming ``what`` after ``timeout`` s, or once ``tool`` exited without it."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if tool is not None and tool.poll() is not None and not predicate():
            pytest.fail(f"the tool exited with {tool.returncode} before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def acked_events(path: Path) -> list[dict[str, Any]]:
    """The verifiable producer's acknowledged sends, each with its partition and offset."""
    return [e for e in events(path) if e.get("name") == "producer_send_success"]
