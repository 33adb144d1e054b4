"""The background loop of a Strata process in the worker role (or all): one compaction round at a time,
each followed by a lake round.

Each round (``planner/round.py``: retention, planning, the jobs this process can lease, GC) runs in a
thread so the event loop keeps serving HTTP, and so does the lake round after it (``pipeline/lake/round.py``:
the Iceberg commits that are due; ``--no-lake`` turns it off). They run one after the other, never at once,
so a worker's memory holds one of them at a time. Rounds run every ``worker_interval_ms``, or at once when
the admin endpoint sets ``runtime.worker_wakeup``, or when a lake table is due if that is sooner
(``LakeRound.next_due_ms``: a table behind is due at once, another when its interval has passed), so the
lake's commit intervals are kept to the millisecond rather than to the worker interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar

from storage.errors import StrataError
from strata.runtime import Runtime

log = logging.getLogger("strata.loop")

T = TypeVar("T")


async def run_background_loop(runtime: Runtime, after_round: Callable[[], None] | None = None) -> None:
    """Rounds until cancelled; ``after_round`` is called after each (a child process reports then)."""
    compaction_round = runtime.compaction_round()
    lake_round = runtime.lake_round() if runtime.settings.lake else None
    interval = runtime.settings.worker_interval_ms / 1000
    while True:
        runtime.worker_wakeup.clear()
        await _guarded("background round", compaction_round.run_once)
        wait = interval
        if lake_round is not None:
            await _guarded("lake round", lake_round.run_once)
            due_ms = await _guarded("lake schedule", lake_round.next_due_ms)
            if due_ms is not None:
                wait = min(wait, max(0.0, (due_ms - runtime.clock.now_ms()) / 1000))
        if after_round is not None:
            after_round()
        try:
            await asyncio.wait_for(runtime.worker_wakeup.wait(), wait)
        except TimeoutError:
            pass


async def _guarded(what: str, run: Callable[[], T]) -> T | None:
    """``run`` in a thread: its result, or None when it failed (logged; the loop goes on)."""
    try:
        return await asyncio.to_thread(run)
    except StrataError as exc:
        log.warning("%s failed (%d): %s", what, exc.code, exc.message)
    except Exception:
        # Anything else is a bug, but it must not end the loop silently: compaction, retention, GC and the
        # lake would stop for good while the agent keeps serving.
        log.exception("%s failed unexpectedly", what)
    return None
