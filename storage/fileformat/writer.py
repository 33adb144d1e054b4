"""Writing a multi-partition file: ``FileBuilder`` appends chunks and encodes the footer and trailer."""

from __future__ import annotations

from collections.abc import Sequence

from crc32c import crc32c
from pyroaring import BitMap

from storage.fileformat.layout import (
    BITMAP_LENGTH,
    COUNT,
    ENTRY,
    FLAG_BITMAP,
    FORMAT_VERSION,
    MAGIC,
    TOPIC_LENGTH,
    TRAILER,
    TRAILER_SIZE,
    ChunkMeta,
    check_meta_values,
)


class FileBuilder:
    """Accumulates chunks in (topic, partition) order and produces the whole object in one piece."""

    def __init__(self) -> None:
        self._parts: list[bytes | bytearray | memoryview] = []
        self._chunks: list[ChunkMeta] = []
        self._size = 0
        self._footer_size = COUNT.size  # the footer's bytes so far: its count, then one entry per chunk
        self._finished: bytes | None = None
        self._pieces_done: list[bytes | bytearray | memoryview] | None = None
        self.object_size = 0  # the whole object's bytes, once finished

    @property
    def size(self) -> int:
        """Bytes of chunk data added so far (the footer and trailer are not counted until ``finish``)."""
        return self._size

    @property
    def object_size_now(self) -> int:
        """The whole object's bytes if it were finished now: chunks, footer and trailer."""
        return self._size + self._footer_size + TRAILER_SIZE

    @staticmethod
    def entry_size(topic: str, present: BitMap | None = None) -> int:
        """The bytes a chunk of ``topic`` adds to the footer (with its bitmap if it has holes), so a writer
        that caps its objects can tell whether a chunk still fits before it adds it."""
        size = TOPIC_LENGTH.size + len(topic.encode("utf-8")) + ENTRY.size
        if present and not (present.min() == 0 and len(present) == present.max() + 1):  # else stored dense
            size += BITMAP_LENGTH.size + len(present.serialize())
        return size

    @property
    def chunks(self) -> tuple[ChunkMeta, ...]:
        return tuple(self._chunks)

    def add_chunk(
        self,
        topic: str,
        partition: int,
        data: bytes | bytearray | memoryview,
        *,
        record_count: int,
        last_offset_delta: int,
        min_timestamp: int,
        max_timestamp: int,
        present: BitMap | None = None,
    ) -> ChunkMeta:
        """Append one chunk and return its footer entry. ``ValueError`` if out of order or inconsistent.

        ``data`` is copied, so the caller may reuse its buffer. A ``present`` bitmap that covers every
        offset 0..last_offset_delta is stored as dense (None): ``present is not None`` means the chunk has
        holes, in the builder's output and in every index read back.
        """
        if present is not None:
            if len(present) == 0:
                raise ValueError("a present-offsets bitmap must not be empty")
            # A private copy, because the caller's bitmap may change after this returns.
            present = None if present.min() == 0 and len(present) == present.max() + 1 else BitMap(present)
        chunk = bytes(data)
        return self._add(
            topic,
            partition,
            [chunk],
            len(chunk),
            crc32c(chunk),
            record_count,
            last_offset_delta,
            min_timestamp,
            max_timestamp,
            present,
        )

    def add_chunk_pieces(
        self,
        topic: str,
        partition: int,
        pieces: list[bytes | bytearray | memoryview],
        *,
        record_count: int,
        last_offset_delta: int,
        min_timestamp: int,
        max_timestamp: int,
        length: int,
        crc: int,
    ) -> ChunkMeta:
        """``add_chunk`` for a dense chunk given as pieces, kept as they are, not copied: the caller hands
        them over and never changes them (the flusher's batches, as their producers sent them). The
        caller built the pieces up incrementally and gives their total ``length`` and ``crc`` (CRC-32C of
        their concatenation)."""
        return self._add(
            topic,
            partition,
            pieces,
            length,
            crc,
            record_count,
            last_offset_delta,
            min_timestamp,
            max_timestamp,
            None,
        )

    def _add(
        self,
        topic: str,
        partition: int,
        pieces: list[bytes | bytearray | memoryview],
        length: int,
        crc: int,
        record_count: int,
        last_offset_delta: int,
        min_timestamp: int,
        max_timestamp: int,
        present: BitMap | None,
    ) -> ChunkMeta:
        if self._finished is not None or self._pieces_done is not None:
            raise ValueError("add_chunk after finish")
        if self._chunks:
            last = self._chunks[-1]
            if (topic, partition) < (last.topic, last.partition):
                raise ValueError(
                    f"chunk {topic}/{partition} sorts before {last.topic}/{last.partition}: "
                    "chunks must arrive in (topic, partition) order"
                )
        problem = check_meta_values(
            topic.encode("utf-8"),
            partition,
            length,
            record_count,
            last_offset_delta,
            min_timestamp,
            max_timestamp,
            present,
        )
        if problem is not None:
            raise ValueError(problem)
        meta = ChunkMeta(
            topic=topic,
            partition=partition,
            position=self._size,
            length=length,
            record_count=record_count,
            last_offset_delta=last_offset_delta,
            min_timestamp=min_timestamp,
            max_timestamp=max_timestamp,
            crc=crc,
            present=present,
        )
        self._parts.extend(pieces)
        self._chunks.append(meta)
        self._size += length
        self._footer_size += self.entry_size(topic, present)
        return meta

    def finish(self) -> bytes:
        """Return the whole object: chunks, footer, trailer. Idempotent; no chunks may follow."""
        if self._finished is None:
            self._finished = b"".join(self.finish_pieces())
        return self._finished

    def finish_pieces(self) -> list[bytes | bytearray | memoryview]:
        """The whole object as its pieces in order, not joined (for a writer that writes pieces as they
        are). No chunks may follow."""
        if self._finished is not None:
            return [self._finished]
        if self._pieces_done is not None:
            return self._pieces_done
        if not self._chunks:
            raise ValueError("a file needs at least one chunk (an idle flush writes nothing)")
        footer = _encode_footer(self._chunks)
        trailer = TRAILER.pack(len(footer), crc32c(footer), FORMAT_VERSION, MAGIC)
        self._pieces_done = [*self._parts, footer, trailer]
        self.object_size = self._size + len(footer) + len(trailer)
        assert self.object_size == self.object_size_now  # the projection writers cap their objects by
        self._parts = []
        return self._pieces_done


def _encode_footer(chunks: Sequence[ChunkMeta]) -> bytes:
    parts = [COUNT.pack(len(chunks))]
    for meta in chunks:
        topic = meta.topic.encode("utf-8")
        parts.append(TOPIC_LENGTH.pack(len(topic)))
        parts.append(topic)
        parts.append(
            ENTRY.pack(
                meta.partition,
                meta.position,
                meta.length,
                meta.record_count,
                meta.last_offset_delta,
                meta.min_timestamp,
                meta.max_timestamp,
                meta.crc,
                0 if meta.present is None else FLAG_BITMAP,
            )
        )
        if meta.present is not None:
            blob = meta.present.serialize()
            parts.append(BITMAP_LENGTH.pack(len(blob)))
            parts.append(blob)
    return b"".join(parts)
