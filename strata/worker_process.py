"""Role ``all``'s background worker in a child process of its own (``--worker-process``, on by default).

Why a process: compaction's merges and the lake writer are CPU-bound Python. In the agent's process they
run in a thread that takes the interpreter lock from the event loop for milliseconds at a time, and every
produce request waiting on that loop pays for it: the ack p99 of a topic at 20 MiB/s on the embedded
default was twice as high with the worker in the agent's process as beside it, and eleven times as high
while the lake wrote (docs/benchmarks.md).
The child runs the same loop (``strata/loop.py``) on the same settings in role ``worker``, so the two share
only the bucket and the metadata store, as an agent and a worker on separate hosts do; a round cut short
(the child killed, or restarted) leaves what a crashed worker leaves: leases that expire and orphans GC
removes.

Why ``multiprocessing`` (spawn): it is the standard library's way to start a Python child with pickled
arguments (the settings) and a duplex pipe, without a second entry point on the command line. Spawn, not
fork: the agent's process has threads and an event loop that a forked child must not inherit.

The pipe carries:
- parent to child: wakeups (the admin endpoint's compact-now, the lake's commit-now), one message each;
- child to parent: after each round, a ``WorkerReport``: the child's object-store request totals, which
  the parent adds to its own counters (so ``strata_object_store_requests_total`` and the console's cost
  view count the worker's requests, as they did with the worker in one process), and its compaction and
  lake metric families, which the parent serves at ``/metrics`` (``WorkerFamilies``).

Lifetime: the parent restarts a child that exits, after a pause that doubles up to ``MAX_BACKOFF_S`` while
children keep dying young. The child ends when its pipe closes, that is when the parent ends however it
ends (a SIGKILL included), and it ignores SIGINT: Ctrl-C stops the parent, which then stops the child.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import signal
from collections.abc import Iterable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from storage.objectstore.base import RequestCounters
from strata.loop import run_background_loop
from strata.runtime import Runtime, build_runtime
from strata.settings import Settings

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

log = logging.getLogger("strata.worker")

# The metric families the worker's rounds record (planner/metrics.py, pipeline/lake/metrics.py).
WORKER_FAMILY_PREFIXES = ("strata_compaction_", "strata_lake_")
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
# A child that ran this long was healthy: the next restart waits FIRST_BACKOFF_S again.
HEALTHY_RUN_S = 60.0
STOP_TIMEOUT_S = 10.0
WAKE = "wake"


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """What a child reports after each round: totals since it started."""

    requests: dict[str, int]
    bytes_read: int
    bytes_written: int
    families: list[Metric]


class WorkerFamilies(Collector):
    """The child's latest metric families, served by the parent's registry as its own."""

    def __init__(self) -> None:
        self.families: list[Metric] = []

    def describe(self) -> Iterable[Metric]:
        # Nothing: the families are not known until the child reports, and registering must not collect.
        return ()

    def collect(self) -> Iterable[Metric]:
        return list(self.families)


class CountsAbsorber:
    """Adds a child's request totals to the parent's counters, as deltas from its previous report."""

    def __init__(self, counters: RequestCounters) -> None:
        self.counters = counters
        self._seen = WorkerReport({}, 0, 0, [])

    def new_child(self) -> None:
        """A new child counts from zero."""
        self._seen = WorkerReport({}, 0, 0, [])

    def absorb(self, report: WorkerReport) -> None:
        seen = self._seen
        for kind, total in report.requests.items():
            delta = total - seen.requests.get(kind, 0)
            if delta > 0:
                self.counters.add(kind, delta)
        self.counters.add_bytes(
            read=max(0, report.bytes_read - seen.bytes_read),
            written=max(0, report.bytes_written - seen.bytes_written),
        )
        self._seen = report


class WorkerProcess:
    """The parent's side: starts the child, forwards wakeups, takes its reports, restarts it."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.families = WorkerFamilies()
        self.absorber = CountsAbsorber(runtime.counters)
        runtime.metrics.registry.register(self.families)

    async def run(self) -> None:
        """Keep a child running until cancelled (then stop it)."""
        backoff = FIRST_BACKOFF_S
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            code = await self._run_child()
            backoff = FIRST_BACKOFF_S if loop.time() - started >= HEALTHY_RUN_S else backoff
            log.warning("the worker process exited with %s; starting another in %.0f s", code, backoff)
            await asyncio.sleep(backoff)
            backoff = min(MAX_BACKOFF_S, backoff * 2)

    async def _run_child(self) -> int | None:
        """One child, from start to exit: its exit code."""
        ctx = multiprocessing.get_context("spawn")
        ours, theirs = ctx.Pipe()
        settings = replace(self.runtime.settings, role="worker")
        proc = ctx.Process(target=child_main, args=(settings, theirs), name="strata-worker", daemon=True)
        await asyncio.to_thread(proc.start)
        theirs.close()
        self.absorber.new_child()
        log.info("strata worker process %d started", proc.pid)
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        loop.add_reader(proc.sentinel, _resolve, ended)
        loop.add_reader(ours.fileno(), self._receive, ours)
        wakeups = asyncio.create_task(self._forward_wakeups(ours))
        try:
            await ended
        finally:
            loop.remove_reader(proc.sentinel)
            loop.remove_reader(ours.fileno())
            wakeups.cancel()
            await asyncio.gather(wakeups, return_exceptions=True)
            await asyncio.shield(asyncio.to_thread(_stop, proc))
            ours.close()
        return proc.exitcode

    def _receive(self, conn: Connection) -> None:
        try:
            report = conn.recv()
        except (EOFError, OSError):
            # The child is gone; its sentinel ends _run_child. Stop watching the pipe meanwhile.
            asyncio.get_running_loop().remove_reader(conn.fileno())
            return
        if isinstance(report, WorkerReport):
            self.absorber.absorb(report)
            self.families.families = report.families

    async def _forward_wakeups(self, conn: Connection) -> None:
        wakeup = self.runtime.worker_wakeup
        while True:
            await wakeup.wait()
            wakeup.clear()
            try:
                conn.send(WAKE)
            except OSError:
                return  # the child is gone: _run_child is ending


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _stop(proc: BaseProcess) -> None:
    """Ask the child to stop (SIGTERM), then kill it if it does not."""
    if proc.is_alive():
        proc.terminate()
        proc.join(STOP_TIMEOUT_S)
    if proc.is_alive():
        proc.kill()
    proc.join()


# --- the child ------------------------------------------------------------------------------------------
def child_main(settings: Settings, conn: Connection) -> None:
    """The child process: the background loop on its own runtime, until the parent's pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    runtime = build_runtime(settings)
    asyncio.run(_child_loop(runtime, conn))


async def _child_loop(runtime: Runtime, conn: Connection) -> None:
    loop = asyncio.get_running_loop()
    parent_gone: asyncio.Future[None] = loop.create_future()

    def on_message() -> None:
        try:
            conn.recv()
        except (EOFError, OSError):
            loop.remove_reader(conn.fileno())
            _resolve(parent_gone)
            return
        runtime.worker_wakeup.set()

    def report() -> None:
        try:
            conn.send(worker_report(runtime))
        except OSError:
            _resolve(parent_gone)

    loop.add_reader(conn.fileno(), on_message)
    rounds = asyncio.create_task(run_background_loop(runtime, after_round=report))
    await asyncio.wait({rounds, parent_gone}, return_when=asyncio.FIRST_COMPLETED)
    rounds.cancel()
    await asyncio.gather(rounds, return_exceptions=True)


def worker_report(runtime: Runtime) -> WorkerReport:
    counters = runtime.counters
    families = [
        family
        for family in runtime.metrics.registry.collect()
        if family.name.startswith(WORKER_FAMILY_PREFIXES)
    ]
    return WorkerReport(counters.snapshot(), counters.bytes_read, counters.bytes_written, families)
