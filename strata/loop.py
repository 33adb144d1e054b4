"""The background loop of a Strata process in the worker role (or all): one compaction round at a time.

Each round (``planner/round.py``: retention, planning, the jobs this process can lease, GC) runs in a
thread so the event loop keeps serving HTTP. Rounds run every ``worker_interval_ms``, or at once when the
admin endpoint sets ``runtime.worker_wakeup``.
"""

from __future__ import annotations

import asyncio
import logging

from storage.errors import StrataError
from strata.runtime import Runtime

log = logging.getLogger("strata.loop")


async def run_background_loop(runtime: Runtime) -> None:
    compaction_round = runtime.compaction_round()
    interval = runtime.settings.worker_interval_ms / 1000
    while True:
        runtime.worker_wakeup.clear()
        try:
            await asyncio.to_thread(compaction_round.run_once)
        except StrataError as exc:
            log.warning("background round failed (%d): %s", exc.code, exc.message)
        except Exception:
            # Anything else is a bug, but it must not end the loop silently: compaction, retention and GC
            # would stop for good while the agent keeps serving.
            log.exception("background round failed unexpectedly")
        try:
            await asyncio.wait_for(runtime.worker_wakeup.wait(), interval)
        except TimeoutError:
            pass
