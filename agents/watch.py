"""Wake long-polling fetches when a partition's high watermark moves.

Local flushes notify directly. Commits by other agents are not seen here, so waiters also wake on a
short timer and re-read the high watermark from the metadata store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


class PartitionWatch:
    def __init__(self) -> None:
        self._events: dict[tuple[str, int], asyncio.Event] = {}

    def notify(self, partitions: Iterable[tuple[str, int]]) -> None:
        for tp in partitions:
            event = self._events.pop(tp, None)
            if event is not None:
                event.set()

    async def wait(self, topic: str, partition: int, timeout_s: float) -> bool:
        """True if a local flush touched the partition before the timeout."""
        event = self._events.setdefault((topic, partition), asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            return False
        return True
