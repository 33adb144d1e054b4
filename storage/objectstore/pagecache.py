"""How much of the local store's recent writes stays in the operating system's page cache.

The local store writes each object once and never changes it. The kernel keeps every written page cached
until memory runs short, so a producing agent grows the page cache by all it writes, and each new file
takes fresh pages. On a virtual machine those are first touches of guest memory, several times the CPU of
pages that came back from a file dropped before it: on the VM the benchmarks run on, a large share of the
agent's CPU per MiB under Kafka produce load (`docs/benchmarks.md`).

``RecentWrites`` keeps the last ``budget`` bytes of written objects cached, for readers at the tail of a
log (the local store has no copy in the agent's object cache) and for compaction, which reads recent flush
files soon after they are written, and asks the kernel to drop older ones
(``posix_fadvise(POSIX_FADV_DONTNEED)``; pages are clean once fsynced, so they are simply freed). New
writes then reuse the freed pages.

Reads are left alone. Dropping what ``get`` read as well was tried: Kafka catch-up got faster, but
compaction, which reads its inputs soon after other readers have read them, ran at about half its speed
(`docs/benchmarks.md`). A 64 MiB budget, with reads dropped too, still left compaction well below its
speed before this module.

Dropping is advice: a file that is gone already (deleted by GC) or cannot be opened is skipped, a
filesystem that refuses the advice keeps its pages, and the data on disk never changes.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from pathlib import Path

MiB = 1024 * 1024
DEFAULT_PAGE_CACHE_BYTES = 512 * MiB


class RecentWrites:
    """Thread-safe: the async local store writes from worker threads, several flushes at once."""

    def __init__(self, budget: int = DEFAULT_PAGE_CACHE_BYTES) -> None:
        if budget < 0:
            raise ValueError("the page cache budget must be >= 0")
        self.budget = budget
        self._files: deque[tuple[Path, int]] = deque()
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        """Bytes of recent writes still left in the page cache."""
        return self._held

    def written(self, path: Path, size: int) -> None:
        """``path`` (``size`` bytes) was just written and fsynced: drop the oldest beyond the budget."""
        with self._lock:
            self._files.append((path, size))
            self._held += size
            evicted: list[Path] = []
            while self._held > self.budget and self._files:
                old, old_size = self._files.popleft()
                self._held -= old_size
                evicted.append(old)
        for old in evicted:
            drop(old)


def drop(path: Path) -> None:
    """Ask the kernel to drop ``path``'s cached pages; nothing happens if it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # deleted meanwhile (GC, a topic deleted), or unreadable: nothing cached to matter
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass  # advice only: a filesystem that refuses it keeps the pages, as without this module
    finally:
        os.close(fd)
