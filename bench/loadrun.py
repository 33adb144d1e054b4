"""Load generator processes driven by an orchestrator: started apart, released at one time, merged.

A generator never runs in the process it measures, and several may run at once, so they agree on the
measured window through files: each creates ``OUT.ready`` once its clients and bodies are built, the
orchestrator then writes the window's wall-clock start to the start file (written aside and renamed, so
that it is never read half written), and each generator writes its JSON result to ``OUT``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.harness import ROOT, START_TIMEOUT_S, bench_env

Hook = Callable[[], None] | None


@contextlib.contextmanager
def generators(
    cmds: list[list[str]], prefix: str
) -> Iterator[tuple[list[subprocess.Popen[bytes]], list[Path]]]:
    """Start one process per command, each told its result file by ``--out``; killed on the way out.

    Yields the processes and their result files; every command gets ``--start-file`` and ``--out``.
    """
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    outs = [tmp / f"{i}.json" for i in range(len(cmds))]
    popens: list[subprocess.Popen[bytes]] = []
    try:
        for cmd, out in zip(cmds, outs, strict=True):
            full = [*cmd, "--start-file", str(tmp / "start"), "--out", str(out)]
            popens.append(subprocess.Popen(full, cwd=ROOT, env=bench_env()))
        yield popens, outs
    finally:
        for p in popens:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def wait_ready(popens: list[subprocess.Popen[bytes]], outs: list[Path]) -> None:
    """Until every generator has created its ``.ready`` file; raises if one exits or time runs out."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not all(Path(str(o) + ".ready").exists() for o in outs):
        if time.monotonic() > deadline:
            raise RuntimeError("a load generator did not get ready in time")
        if any(p.poll() is not None for p in popens):
            # It may have written a fatal error (no broker, say) and exited before getting ready.
            for o in outs:
                if o.exists():
                    raise RuntimeError(f"load generator: {json.loads(o.read_text()).get('fatal', '?')}")
            raise RuntimeError("a load generator exited before getting ready")
        time.sleep(0.02)


def release(outs: list[Path], start_at: float) -> None:
    """Tell every generator the window's wall-clock start."""
    tmp = outs[0].parent
    (tmp / "start.tmp").write_text(repr(start_at))
    (tmp / "start.tmp").rename(tmp / "start")


def run_window(outs: list[Path], warmup: float, duration: float, on_start: Hook, on_end: Hook) -> None:
    """Release the generators ``warmup`` seconds ahead of the window; call the hooks at its two ends."""
    start_at = time.time() + warmup
    release(outs, start_at)
    time.sleep(max(0.0, start_at - time.time()))
    if on_start is not None:
        on_start()
    time.sleep(max(0.0, start_at + duration - time.time()))
    if on_end is not None:
        on_end()


def collect(popens: list[subprocess.Popen[bytes]], outs: list[Path], limit_s: float) -> list[dict[str, Any]]:
    """Every generator's result, waiting at most ``limit_s`` in all; raises on a failed generator."""
    deadline = time.monotonic() + limit_s
    parts = []
    for p, o in zip(popens, outs, strict=True):
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise RuntimeError(f"a load generator did not finish within {limit_s:.0f} s") from None
        if p.returncode != 0 or not o.exists():
            raise RuntimeError(f"a load generator failed with {p.returncode}")
        part: dict[str, Any] = json.loads(o.read_text())
        if "fatal" in part:
            raise RuntimeError(f"load generator: {part['fatal']}")
        parts.append(part)
    return parts


def wait_for_start(out: str, start_file: str, limit_s: float = 120.0) -> float:
    """The generator's side: say this process is ready, then wait for the orchestrator's start time."""
    Path(out + ".ready").touch()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            return float(Path(start_file).read_text())
        except (OSError, ValueError):
            time.sleep(0.01)
    raise TimeoutError(f"no start time in {start_file} after {limit_s} s")


def sum_counts(parts: list[dict[str, Any]], key: str) -> dict[str, int]:
    """The generators' counters under ``key`` (by status, by error name), added up."""
    total: dict[str, int] = {}
    for part in parts:
        for k, v in part[key].items():
            total[k] = total.get(k, 0) + v
    return total
