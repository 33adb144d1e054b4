"""Where the Kafka door checks compressed batches: a small pool of threads beside the event loop.

Checking a compressed batch means decompressing it (bounded by ``compression.output_limit``, tens of MiB
for a small batch that inflates) and walking its records; both run without the GIL (zlib and cramjam
release it, and so does the record walk, storage/_recordcheck.c). On the event loop that work would hold
every other connection's requests and acknowledgements for its duration; in this pool it holds only the
connection whose request it is, which keeps its later requests back meanwhile (their order is kept).

Memory: at most ``workers`` batches are decompressed at once, each to at most ``output_limit`` of its
size; a request waiting for a worker holds only its frame, which its reservation already counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

# Two: the machine's cores are what the work needs, and each decompressed batch is memory held.
DEFAULT_WORKERS = 2


class BatchChecks:
    def __init__(self, workers: int = DEFAULT_WORKERS) -> None:
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None

    async def run(self, work: Callable[[], T]) -> T:
        if self._pool is None:  # threads only once a compressed batch arrives
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="strata-batch-check")
        return await asyncio.get_running_loop().run_in_executor(self._pool, work)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
