"""The multi-partition file: one object per flush, holding one chunk per topic-partition. Sans-IO.

Layout of a whole object (all integers big-endian)::

    +----------------+----------------+-----+--------------------+---------+------------------+
    | chunk 0 bytes  | chunk 1 bytes  | ... | chunk n-1 bytes    | footer  | trailer (16 B)   |
    +----------------+----------------+-----+--------------------+---------+------------------+
    0                                                            F         F + footer_length

A chunk is a concatenation of Kafka RecordBatch v2 (see ``storage/records.py``); this module treats it as
opaque bytes. Chunks are contiguous, start at byte 0, and are **sorted by (topic, partition)**, so several
files can be merged with forward-only streams. A flush writes each topic-partition once; a compaction
output may hold several chunks of one partition (runs of the log that other files separate), in increasing
offset order. Topics compare by Unicode
code point, which is also the byte order of their utf-8 encoding. Batch base offsets inside a
chunk are relative to the chunk (its first batch starts at 0); the chunk's absolute base offset lives only in
the metadata store, which assigns it at commit.

Footer (``footer_length`` bytes, covered by ``footer_crc``)::

    chunk_count        u32
    chunk_count times:
      topic_length       u16      then topic, utf-8, 1..65535 bytes
      partition          u32
      position           u64      byte offset of the chunk in the object
      length             u32      bytes of the chunk
      record_count       u32      records in the chunk, >= 1
      last_offset_delta  u32      relative offset of the chunk's last record (0 = its base offset)
      min_timestamp      i64
      max_timestamp      i64
      crc                u32      CRC-32C of the chunk's bytes
      flags              u8       bit 0: a bitmap of present offsets follows; other bits must be 0
      [bitmap_length     u32      only if flags bit 0; then bitmap_length bytes of a portable-format
                                  roaring bitmap (pyroaring ``BitMap.serialize()``) of the relative
                                  offsets present]

Without a bitmap the chunk is dense: every relative offset 0..last_offset_delta holds a record, so
``record_count == last_offset_delta + 1``. Compaction output with holes carries the bitmap; its cardinality is
``record_count`` and its maximum is ``last_offset_delta``.

Trailer, fixed ``TRAILER_SIZE`` = 16 bytes at the very end::

    footer_length  u32
    footer_crc     u32      CRC-32C of the footer bytes
    version        u16      FORMAT_VERSION (1)
    magic          6 bytes  b"STRATA"

A reader fetches the last 16 bytes, then the footer range (:func:`footer_span`), then only the chunk ranges it
needs, each checked against its footer CRC (:func:`verify_chunk`). The trailer's magic and version are checked
exactly; a damaged ``footer_length`` or ``footer_crc`` makes the footer fail its CRC, so every corruption of
footer or trailer surfaces as :class:`~storage.errors.CodecError`.

What a crash leaves behind: a file is written by exactly one PUT, and object stores make a PUT all or nothing,
so an object is either complete or absent; there is no partially written file to repair. A file that was
uploaded but whose metadata commit never happened (the writer crashed in between) is referenced by no chunk
row: it is an orphan, and garbage collection deletes it after its grace period. Readers only open objects
the metadata store references.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from crc32c import crc32c
from pyroaring import BitMap

from storage.errors import CodecError

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "TRAILER_SIZE",
    "ChunkMeta",
    "FileBuilder",
    "footer_span",
    "parse_footer",
    "parse_trailer",
    "read_index",
    "verify_chunk",
]

MAGIC = b"STRATA"
FORMAT_VERSION = 1
_TRAILER = struct.Struct(">IIH6s")
TRAILER_SIZE = _TRAILER.size

_COUNT = struct.Struct(">I")
_TOPIC_LENGTH = struct.Struct(">H")
# partition, position, length, record_count, last_offset_delta, min_ts, max_ts, crc, flags
_ENTRY = struct.Struct(">IQIIIqqIB")
_BITMAP_LENGTH = struct.Struct(">I")

_FLAG_BITMAP = 0x01

_U16_MAX = (1 << 16) - 1
_U32_MAX = (1 << 32) - 1
_U64_MAX = (1 << 64) - 1
_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class ChunkMeta:
    """One footer entry. ``present is None`` means dense (every relative offset 0..last_offset_delta).

    Offsets here are relative to the chunk's base offset, which only the metadata store knows.
    """

    topic: str
    partition: int
    position: int
    length: int
    record_count: int
    last_offset_delta: int
    min_timestamp: int
    max_timestamp: int
    crc: int
    # BitMap is unhashable; leaving it out of the hash keeps equal metas hashing equal.
    present: BitMap | None = field(hash=False)

    @property
    def end(self) -> int:
        """The byte just past the chunk in its object."""
        return self.position + self.length


def _check_meta_values(
    topic_bytes: bytes,
    partition: int,
    length: int,
    record_count: int,
    last_offset_delta: int,
    min_timestamp: int,
    max_timestamp: int,
    present: BitMap | None,
) -> str | None:
    """Return why these footer values are inconsistent, or None; shared by the writer and the reader."""
    if not 1 <= len(topic_bytes) <= _U16_MAX:
        return f"topic is {len(topic_bytes)} utf-8 bytes, not 1..65535"
    if not 0 <= partition <= _U32_MAX:
        return f"partition {partition} does not fit in u32"
    if not 1 <= length <= _U32_MAX:
        return f"chunk length {length} is not 1..2^32-1"
    if not 1 <= record_count <= _U32_MAX:
        return f"record count {record_count} is not 1..2^32-1"
    if not 0 <= last_offset_delta <= _U32_MAX:
        return f"last offset delta {last_offset_delta} does not fit in u32"
    if not _I64_MIN <= min_timestamp <= max_timestamp <= _I64_MAX:
        return f"timestamps {min_timestamp}..{max_timestamp} are not an int64 range"
    if present is None:
        if record_count != last_offset_delta + 1:
            return f"dense chunk has {record_count} records but spans {last_offset_delta + 1} offsets"
    else:
        if len(present) != record_count:
            return f"bitmap holds {len(present)} offsets but the chunk has {record_count} records"
        if present.max() != last_offset_delta:
            return f"bitmap ends at {present.max()} but the last offset delta is {last_offset_delta}"
    return None


class FileBuilder:
    """Accumulates chunks in (topic, partition) order and produces the whole object in one piece."""

    def __init__(self) -> None:
        self._parts: list[bytes | bytearray | memoryview] = []
        self._chunks: list[ChunkMeta] = []
        self._size = 0
        self._footer_size = _COUNT.size  # the footer's bytes so far: its count, then one entry per chunk
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
        size = _TOPIC_LENGTH.size + len(topic.encode("utf-8")) + _ENTRY.size
        if present and not (present.min() == 0 and len(present) == present.max() + 1):  # else stored dense
            size += _BITMAP_LENGTH.size + len(present.serialize())
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
        problem = _check_meta_values(
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
        trailer = _TRAILER.pack(len(footer), crc32c(footer), FORMAT_VERSION, MAGIC)
        self._pieces_done = [*self._parts, footer, trailer]
        self.object_size = self._size + len(footer) + len(trailer)
        assert self.object_size == self.object_size_now  # the projection writers cap their objects by
        self._parts = []
        return self._pieces_done


def _encode_footer(chunks: Sequence[ChunkMeta]) -> bytes:
    parts = [_COUNT.pack(len(chunks))]
    for meta in chunks:
        topic = meta.topic.encode("utf-8")
        parts.append(_TOPIC_LENGTH.pack(len(topic)))
        parts.append(topic)
        parts.append(
            _ENTRY.pack(
                meta.partition,
                meta.position,
                meta.length,
                meta.record_count,
                meta.last_offset_delta,
                meta.min_timestamp,
                meta.max_timestamp,
                meta.crc,
                0 if meta.present is None else _FLAG_BITMAP,
            )
        )
        if meta.present is not None:
            blob = meta.present.serialize()
            parts.append(_BITMAP_LENGTH.pack(len(blob)))
            parts.append(blob)
    return b"".join(parts)


def parse_trailer(trailer: bytes | bytearray | memoryview) -> tuple[int, int]:
    """Return (footer_length, footer_crc) from the last ``TRAILER_SIZE`` bytes of an object."""
    if len(trailer) != TRAILER_SIZE:
        raise CodecError(f"trailer is {len(trailer)} bytes, expected {TRAILER_SIZE}")
    footer_length, footer_crc, version, magic = _TRAILER.unpack(trailer)
    if magic != MAGIC:
        raise CodecError(f"trailer magic is {magic!r}, not {MAGIC!r}: not a Strata file")
    if version != FORMAT_VERSION:
        raise CodecError(f"file format version {version} is not supported (expected {FORMAT_VERSION})")
    return footer_length, footer_crc


def footer_span(file_size: int, trailer: bytes | bytearray | memoryview) -> tuple[int, int]:
    """Return (start, length) of the footer in an object of ``file_size`` bytes, for one ranged GET."""
    footer_length, _ = parse_trailer(trailer)
    start = file_size - TRAILER_SIZE - footer_length
    if start < 0:
        raise CodecError(f"footer of {footer_length} bytes does not fit in a {file_size}-byte object")
    return start, footer_length


def parse_footer(
    footer: bytes | bytearray | memoryview, expected_crc: int, *, footer_start: int | None = None
) -> list[ChunkMeta]:
    """Decode and check a footer. ``footer_start``, if given, is where the footer sits in its object, and the
    last chunk must end exactly there."""
    data = bytes(footer)
    if crc32c(data) != expected_crc:
        raise CodecError("footer fails its CRC-32C check")
    try:
        return _parse_footer_entries(data, footer_start)
    except struct.error:
        raise CodecError("footer is truncated") from None


def _parse_footer_entries(data: bytes, footer_start: int | None) -> list[ChunkMeta]:
    (count,) = _COUNT.unpack_from(data, 0)
    pos = _COUNT.size
    # Each entry is at least 2 + 1 + _ENTRY.size bytes; bounding count first keeps a bad count cheap.
    if count * (_TOPIC_LENGTH.size + 1 + _ENTRY.size) > len(data) - pos:
        raise CodecError(f"footer declares {count} chunks, more than its bytes can hold")
    chunks: list[ChunkMeta] = []
    expected_position = 0
    previous: tuple[str, int] | None = None
    for _ in range(count):
        meta, pos = _read_footer_entry(data, pos)
        topic, partition = meta.topic, meta.partition
        if previous is not None and (topic, partition) < previous:
            raise CodecError(f"footer entry {topic}/{partition} breaks (topic, partition) order")
        if meta.position != expected_position:
            raise CodecError(
                f"chunk {topic}/{partition} starts at {meta.position}, expected {expected_position}: "
                "chunks are contiguous"
            )
        previous = (topic, partition)
        expected_position = meta.position + meta.length
        chunks.append(meta)
    if pos != len(data):
        raise CodecError(f"footer has {len(data) - pos} bytes after its last entry")
    if footer_start is not None and expected_position != footer_start:
        raise CodecError(f"chunks end at {expected_position} but the footer starts at {footer_start}")
    return chunks


def _read_footer_entry(data: bytes, pos: int) -> tuple[ChunkMeta, int]:
    """Decode and check the footer entry at ``pos`` on its own; return it and the position after it.

    The checks across entries (order, contiguity) are the caller's. One call per chunk, not per record.
    """
    (topic_length,) = _TOPIC_LENGTH.unpack_from(data, pos)
    pos += _TOPIC_LENGTH.size
    topic_bytes = data[pos : pos + topic_length]
    if len(topic_bytes) != topic_length:
        raise CodecError("footer is truncated inside a topic name")
    try:
        topic = topic_bytes.decode("utf-8")
    except UnicodeDecodeError:
        raise CodecError("footer topic name is not valid utf-8") from None
    pos += topic_length
    (
        partition,
        position,
        length,
        record_count,
        last_offset_delta,
        min_timestamp,
        max_timestamp,
        crc,
        flags,
    ) = _ENTRY.unpack_from(data, pos)
    pos += _ENTRY.size
    if flags & ~_FLAG_BITMAP:
        raise CodecError(f"footer entry for {topic}/{partition} has unknown flags {flags:#x}")
    present: BitMap | None = None
    if flags & _FLAG_BITMAP:
        (blob_length,) = _BITMAP_LENGTH.unpack_from(data, pos)
        pos += _BITMAP_LENGTH.size
        blob = data[pos : pos + blob_length]
        if blob_length == 0 or len(blob) != blob_length:
            raise CodecError(f"footer bitmap for {topic}/{partition} is empty or truncated")
        pos += blob_length
        present = _deserialize_bitmap(blob, topic, partition)
        if present.min() == 0 and len(present) == present.max() + 1:
            raise CodecError(f"footer bitmap for {topic}/{partition} is dense; dense chunks carry none")
    problem = _check_meta_values(
        topic_bytes,
        partition,
        length,
        record_count,
        last_offset_delta,
        min_timestamp,
        max_timestamp,
        present,
    )
    if problem is not None:
        raise CodecError(f"footer entry for {topic}/{partition}: {problem}")
    meta = ChunkMeta(
        topic=topic,
        partition=partition,
        position=position,
        length=length,
        record_count=record_count,
        last_offset_delta=last_offset_delta,
        min_timestamp=min_timestamp,
        max_timestamp=max_timestamp,
        crc=crc,
        present=present,
    )
    return meta, pos


def _deserialize_bitmap(blob: bytes, topic: str, partition: int) -> BitMap:
    try:
        present = BitMap.deserialize(blob)
    except ValueError:
        raise CodecError(f"footer bitmap for {topic}/{partition} does not deserialize") from None
    # pyroaring accepts trailing bytes after a valid bitmap; the declared length must be exact.
    if len(present.serialize()) != len(blob) or len(present) == 0:
        raise CodecError(f"footer bitmap for {topic}/{partition} has trailing bytes or is empty")
    return present


def read_index(data: bytes | bytearray | memoryview) -> list[ChunkMeta]:
    """Read the chunk index of a whole object held in memory."""
    view = memoryview(data)
    if len(view) < TRAILER_SIZE:
        raise CodecError(f"object of {len(view)} bytes is shorter than the {TRAILER_SIZE}-byte trailer")
    trailer = view[len(view) - TRAILER_SIZE :]
    start, length = footer_span(len(view), trailer)
    _, footer_crc = parse_trailer(trailer)
    return parse_footer(view[start : start + length], footer_crc, footer_start=start)


def verify_chunk(data: bytes | bytearray | memoryview, meta_crc: int, *, object_key: str = "") -> None:
    """Raise ``CodecError`` unless ``data`` (one chunk's bytes) matches the CRC its footer entry gives."""
    actual = crc32c(data)
    if actual != meta_crc:
        where = f" in {object_key}" if object_key else ""
        raise CodecError(
            f"chunk{where} fails its CRC-32C check (stored {meta_crc:#010x}, computed {actual:#010x})",
            object_key=object_key or None,
        )
