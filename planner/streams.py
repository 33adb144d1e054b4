"""Forward-only reading of chunks from one streaming GET.

The job runner opens exactly one stream per input file per pass and walks all of the job's
partitions in (topic, partition) order; files keep their chunks in that order, so every stream only moves
forward. Bytes between wanted chunks are read and discarded, never re-requested: no seek, no second GET.
"""

from __future__ import annotations

from planner.throttle import ReadThrottle
from storage.errors import CorruptObject
from storage.objectstore.base import ObjectStore, ObjectStream

_SKIP_PIECE = 1 << 20


class ForwardReader:
    """Reads byte ranges in increasing order from one lazily opened stream of ``key`` over [0, end)."""

    def __init__(self, store: ObjectStore, key: str, end: int, throttle: ReadThrottle | None = None) -> None:
        self.store = store
        self.key = key
        self.end = end
        self.throttle = throttle  # every byte taken from the stream, skipped ones included, is counted
        self.position = 0
        self.bytes_read = 0
        self.closed = False  # opened once, then closed: still one GET
        self._stream: ObjectStream | None = None

    @property
    def opened(self) -> bool:
        return self._stream is not None

    def read(self, position: int, length: int) -> bytes:
        if position < self.position:
            raise ValueError(f"{self.key}: cannot go back from {self.position} to {position}")
        if position + length > self.end:
            raise ValueError(f"{self.key}: range {position}+{length} is past the stream end {self.end}")
        if self._stream is None:
            self._stream = self.store.open_stream(self.key, 0, self.end)
        while self.position < position:
            self._take(min(_SKIP_PIECE, position - self.position))
        return self._take(length)

    def _take(self, n: int) -> bytes:
        assert self._stream is not None
        parts = []
        remaining = n
        while remaining:
            piece = self._stream.read(remaining)
            if not piece:
                raise CorruptObject(
                    f"object {self.key} ended at byte {self.position + n - remaining}, "
                    f"before the {n} bytes the metadata places there",
                    object_key=self.key,
                )
            parts.append(piece)
            remaining -= len(piece)
            if self.throttle is not None:
                self.throttle.take(len(piece))
        self.position += n
        self.bytes_read += n
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
            self.closed = True
