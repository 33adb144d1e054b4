"""Buffers for large Kafka frames, used again once nothing holds them.

Why: a large frame (a Produce request of about 1 MiB) gets a buffer of its own size, which the kernel
then fills (broker/connection.py). A new ``bytearray`` of that size is zero-filled, and glibc serves it
from pages mapped for it and unmapped when it is freed (the agent keeps glibc's mmap threshold at 128 KiB
so that freed memory leaves the process: ``tune_malloc`` in strata/server.py). So every 4 KiB page of every
large request cost a page fault, taken on the event loop while it zero-filled the buffer, and on a virtual
machine a page mapped afresh may cost the hypervisor a fault too. Measured under one idempotent producer
(``perf record -e page-faults`` on the agent): 99 % of its page faults were in that zero-fill, about 260
per MiB received. A buffer used again has its pages already; the pool is bounded, so what it keeps
resident is known.

When a buffer is free: everything that holds a frame, a memoryview slice of it included (the produce
buffer keeps its batches as views until their flush is answered), holds a reference to the bytearray, since
a memoryview keeps its base object alive. A buffer whose reference count is only the pool's own is
therefore held by nothing else, and CPython's count is exact: the pool never hands out a buffer that is
still read. A pool belongs to one listener and is used on its event loop only.

Sizes: a buffer is allocated an eighth larger than its first frame, and taken again for any frame of more
than half its allocation that fits in it, resized to the frame's size in place (CPython's bytearray keeps
its allocation when it shrinks to no less than half of it, or grows within it). Its bytes are the last
frame's until the kernel overwrites them, and a frame is handled only once all of it has been received,
so nothing of another client's request is ever read.

Bounded: the pool keeps at most ``max_bytes`` of buffers, in use or idle; a frame that does not fit gets a
buffer of its own, as before. Idle buffers stay resident, which is the point; their bytes are counted in
``max_bytes``, not in the produce budget.
"""

from __future__ import annotations

import sys


def _refcount_at(buffers: list[bytearray], index: int) -> int:
    """The reference count of ``buffers[index]``, seen through the same expression every time."""
    return sys.getrefcount(buffers[index])


def _unheld_count() -> int:
    """What ``_refcount_at`` gives for a buffer that only its list holds, measured on this interpreter
    rather than assumed: which references the interpreter's own stack counts differs between versions, and
    a count that matched a buffer still held would hand out bytes something reads."""
    return _refcount_at([bytearray(1)], 0)


class FramePool:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buffers: list[bytearray] = []
        self._allocs: list[int] = []  # each buffer's allocation, read without touching the buffer
        self._kept = 0  # sum of _allocs
        self._unheld = _unheld_count()
        self.reused = 0  # frames served by a buffer used before (a counter for tests and probes)

    def take(self, size: int) -> bytearray:
        """A bytearray of exactly ``size`` bytes that nothing else references; its contents are undefined."""
        for index, alloc in enumerate(self._allocs):
            if size < alloc <= 2 * size and _refcount_at(self._buffers, index) == self._unheld:
                buf = self._buffers[index]
                if len(buf) > size:
                    del buf[size:]
                elif len(buf) < size:
                    buf.extend(bytes(size - len(buf)))
                self.reused += 1
                return buf
        # An eighth more than asked, for a buffer the pool keeps: a client's large requests differ by a few
        # bytes (librdkafka fills a request up to its batch.size), and a buffer can serve only frames within
        # its allocation. One the pool has no room for is allocated as asked, used once.
        alloc = size + size // 8 + 1
        if self._kept + alloc > self.max_bytes:
            return bytearray(size)
        buf = bytearray(alloc - 1)
        del buf[size:]  # shrunk in place: the allocation stays
        alloc = buf.__alloc__()
        self._buffers.append(buf)
        self._allocs.append(alloc)
        self._kept += alloc
        return buf
