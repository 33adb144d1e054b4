"""Reading a multi-partition file: the trailer, the footer's chunk entries, and a chunk's CRC check. Every
corruption of the footer or trailer surfaces as ``CodecError``."""

from __future__ import annotations

import struct

from crc32c import crc32c
from pyroaring import BitMap

from storage.errors import CodecError
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


def parse_trailer(trailer: bytes | bytearray | memoryview) -> tuple[int, int]:
    """Return (footer_length, footer_crc) from the last ``TRAILER_SIZE`` bytes of an object."""
    if len(trailer) != TRAILER_SIZE:
        raise CodecError(f"trailer is {len(trailer)} bytes, expected {TRAILER_SIZE}")
    footer_length, footer_crc, version, magic = TRAILER.unpack(trailer)
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
    (count,) = COUNT.unpack_from(data, 0)
    pos = COUNT.size
    # Each entry is at least 2 + 1 + ENTRY.size bytes; bounding count first keeps a bad count cheap.
    if count * (TOPIC_LENGTH.size + 1 + ENTRY.size) > len(data) - pos:
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
    (topic_length,) = TOPIC_LENGTH.unpack_from(data, pos)
    pos += TOPIC_LENGTH.size
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
    ) = ENTRY.unpack_from(data, pos)
    pos += ENTRY.size
    if flags & ~FLAG_BITMAP:
        raise CodecError(f"footer entry for {topic}/{partition} has unknown flags {flags:#x}")
    present: BitMap | None = None
    if flags & FLAG_BITMAP:
        (blob_length,) = BITMAP_LENGTH.unpack_from(data, pos)
        pos += BITMAP_LENGTH.size
        blob = data[pos : pos + blob_length]
        if blob_length == 0 or len(blob) != blob_length:
            raise CodecError(f"footer bitmap for {topic}/{partition} is empty or truncated")
        pos += blob_length
        present = _deserialize_bitmap(blob, topic, partition)
        if present.min() == 0 and len(present) == present.max() + 1:
            raise CodecError(f"footer bitmap for {topic}/{partition} is dense; dense chunks carry none")
    problem = check_meta_values(
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
