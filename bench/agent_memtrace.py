"""Run ``strata`` with tracemalloc on, to attribute the agent's memory (bench.produce_fetch --mem-trace).

    python -m bench.agent_memtrace serve ...        # the same arguments as ``strata serve``

Starts ``tracemalloc`` (``STRATA_BENCH_MEMTRACE_FRAMES`` frames, default 6) before the application is
imported, and samples the traced total every 100 ms in a thread. Whenever it exceeds the largest snapshot
taken so far by 10 %, it takes a snapshot (so the last one is near the peak). At exit it writes, to the file
named by STRATA_BENCH_MEMTRACE, the peak traced bytes and the largest snapshot's top allocation sites: by
line, and by the first frame inside the application or a library of interest. Nothing in the application
is changed, but tracemalloc slows the agent down (figures from such a run are for attribution only).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

_state: dict[str, Any] = {"snapshot": None, "snapshot_bytes": 0, "snapshot_at_s": 0.0, "samples": []}
_t0 = time.monotonic()
_ROOT = str(Path(__file__).resolve().parent.parent) + "/"


def _sampler() -> None:
    while True:
        time.sleep(0.1)
        current, _peak = tracemalloc.get_traced_memory()
        _state["samples"].append((round(time.monotonic() - _t0, 1), current))
        if current > 32 * 1024 * 1024 and current > _state["snapshot_bytes"] * 1.1:
            _state["snapshot"] = tracemalloc.take_snapshot()
            _state["snapshot_bytes"] = current
            _state["snapshot_at_s"] = round(time.monotonic() - _t0, 1)


def _site(frames: Any) -> str:
    """The innermost frame in the project, else the innermost frame (where the bytes were allocated)."""
    for frame in frames:  # most recent call first
        name = frame.filename
        if "/site-packages/" not in name and "/lib/python3" not in name:
            return f"{name.removeprefix(_ROOT)}:{frame.lineno}"
    frame = frames[0]
    return f"{frame.filename.rsplit('site-packages/', 1)[-1]}:{frame.lineno}"


def _write() -> None:
    path = os.environ.get("STRATA_BENCH_MEMTRACE")
    if not path:
        return
    out: dict[str, Any] = {"peak_traced_bytes": tracemalloc.get_traced_memory()[1]}
    snap = _state["snapshot"]
    if snap is not None:
        out["snapshot_bytes"] = _state["snapshot_bytes"]
        out["snapshot_at_s"] = _state["snapshot_at_s"]
        by_line = snap.statistics("lineno")
        out["top_lines"] = [
            {"site": f"{s.traceback[0].filename.rsplit('/', 2)[-1]}:{s.traceback[0].lineno}", "bytes": s.size}
            for s in by_line[:25]
        ]
        sites: dict[str, int] = {}
        for stat in snap.statistics("traceback"):
            key = _site(stat.traceback)
            sites[key] = sites.get(key, 0) + stat.size
        ranked = sorted(sites.items(), key=lambda kv: -kv[1])[:25]
        out["top_project_sites"] = [{"site": k, "bytes": v} for k, v in ranked]
    out["traced_timeline"] = _state["samples"][:: max(1, len(_state["samples"]) // 200)]
    with open(path, "w") as fh:
        json.dump(out, fh)


def _exit(*_: object) -> None:
    sys.exit(0)


def main() -> int:
    tracemalloc.start(int(os.environ.get("STRATA_BENCH_MEMTRACE_FRAMES", "6")))
    threading.Thread(target=_sampler, daemon=True).start()
    atexit.register(_write)
    signal.signal(signal.SIGTERM, _exit)  # as bench.agent_gcstats: let atexit run
    from strata.cli import main as strata_main

    return strata_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
