"""A byte-bounded LRU of object bytes: whole files the agent flushed itself, and ranges it fetched.

A tailing consumer on the agent that wrote the data is served from the flushed file without a GET.
Entries are immutable (objects are never rewritten under the same key), so the cache never needs
invalidation; an entry for a file that GC deletes simply ages out.

The cache holds at most ``max_bytes``, and at most the ``room`` its owner leaves it: the agent gives it
what its produce buffer does not hold of its budget, and the buffer calls ``make_room`` as it fills. So
under produce load the cache gives way (evicting its least recently used entries), and record memory stays
within the produce buffer's bound instead of the buffer's plus the cache's.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable


class ObjectCache:
    def __init__(self, max_bytes: int, room: Callable[[], int] | None = None) -> None:
        self.max_bytes = max_bytes
        self._room = room
        self._lock = threading.Lock()
        self._files: OrderedDict[str, bytes] = OrderedDict()
        self._ranges: OrderedDict[tuple[str, int, int], bytes] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    @property
    def size(self) -> int:
        return self._bytes

    def limit(self) -> int:
        """How many bytes the cache may hold now."""
        if self._room is None:
            return self.max_bytes
        return max(0, min(self.max_bytes, self._room()))

    def make_room(self) -> None:
        """Evict down to ``limit()``: the owner needs the memory back."""
        if not self._bytes:  # nothing to give back (the produce buffer asks on every reservation)
            return
        limit = self.limit()
        if self._bytes > limit:
            with self._lock:
                self._evict(limit)

    def put_file(self, key: str, data: bytes) -> None:
        limit = self.limit()
        if len(data) > limit:
            return
        with self._lock:
            if key not in self._files:
                self._files[key] = data
                self._bytes += len(data)
            self._evict(limit)

    def put_range(self, key: str, start: int, data: bytes) -> None:
        limit = self.limit()
        if len(data) > limit:
            return
        with self._lock:
            rkey = (key, start, start + len(data))
            if rkey not in self._ranges and key not in self._files:
                self._ranges[rkey] = data
                self._bytes += len(data)
            self._evict(limit)

    def has_file(self, key: str) -> bool:
        """Whether the whole object is cached (no LRU update, no hit counted)."""
        with self._lock:
            return key in self._files

    def get_file(self, key: str) -> bytes | None:
        """The whole object if it is cached as a file (not copied: callers slice what they need)."""
        with self._lock:
            data = self._files.get(key)
            if data is None:
                self.misses += 1
                return None
            self._files.move_to_end(key)
            self.hits += 1
            return data

    def get(self, key: str, start: int, end: int) -> bytes | None:
        """Bytes [start, end) of the object if a cached file or range covers them."""
        with self._lock:
            data = self._files.get(key)
            if data is not None:
                self._files.move_to_end(key)
                self.hits += 1
                return data[start:end]
            for (rkey, rstart, rend), rdata in self._ranges.items():
                if rkey == key and rstart <= start and end <= rend:
                    self._ranges.move_to_end((rkey, rstart, rend))
                    self.hits += 1
                    return rdata[start - rstart : end - rstart]
            self.misses += 1
            return None

    def _evict(self, limit: int) -> None:
        # Evict least recently used, ranges before whole files: whole files serve tailing consumers.
        while self._bytes > limit and self._ranges:
            _, data = self._ranges.popitem(last=False)
            self._bytes -= len(data)
        while self._bytes > limit and self._files:
            _, data = self._files.popitem(last=False)
            self._bytes -= len(data)
