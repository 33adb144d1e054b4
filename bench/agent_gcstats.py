"""Run ``strata`` with the cyclic garbage collector's pauses measured (bench.produce_fetch --gc-stats).

    python -m bench.agent_gcstats serve ...        # the same arguments as ``strata serve``

Registers a ``gc.callbacks`` hook that times every collection by generation, runs ``strata.cli.main`` and, at
exit, writes the totals as JSON to the file named by STRATA_BENCH_GC_STATS. Nothing in the application is
changed. To try a tuning without editing code: ``STRATA_BENCH_GC_THRESHOLD=700,10,10`` sets
``gc.set_threshold`` first, and ``STRATA_BENCH_GC_FREEZE_AFTER_S=S`` runs ``gc.collect(); gc.freeze()``
S seconds after start (the server is up by then and nothing is in flight).
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import signal
import sys
import threading
import time
from typing import Any

_stats: dict[str, Any] = {"collections": [0, 0, 0], "seconds": [0.0, 0.0, 0.0], "max_pause_s": [0.0] * 3}
_started: list[float] = [0.0]


def _callback(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
        return
    gen = info["generation"]
    pause = time.perf_counter() - _started[0]
    _stats["collections"][gen] += 1
    _stats["seconds"][gen] += pause
    _stats["max_pause_s"][gen] = max(_stats["max_pause_s"][gen], pause)


def _write() -> None:
    path = os.environ.get("STRATA_BENCH_GC_STATS")
    if path:
        _stats["threshold"] = list(gc.get_threshold())
        _stats["tracked_objects_at_exit"] = len(gc.get_objects())
        _stats["frozen_objects"] = gc.get_freeze_count()
        with open(path, "w") as fh:
            json.dump(_stats, fh)


def _collect_and_freeze() -> None:
    gc.collect()
    gc.freeze()


def _exit(*_: object) -> None:
    sys.exit(0)


def main() -> int:
    threshold = os.environ.get("STRATA_BENCH_GC_THRESHOLD")
    if threshold:
        gc.set_threshold(*(int(x) for x in threshold.split(",")))
    freeze_after = os.environ.get("STRATA_BENCH_GC_FREEZE_AFTER_S")
    if freeze_after:
        # Move everything alive once the server is up (imports, app, routes, models) out of the collector's
        # sight, as gc.freeze() in the app's startup would.
        timer = threading.Timer(float(freeze_after), _collect_and_freeze)
        timer.daemon = True
        timer.start()
    gc.callbacks.append(_callback)
    atexit.register(_write)
    # uvicorn re-raises SIGTERM after a graceful shutdown; with the default handler that kills the process
    # before atexit runs, so turn it into a normal exit.
    signal.signal(signal.SIGTERM, _exit)
    from strata.cli import main as strata_main

    return strata_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
