"""Encoding Kafka RecordBatch v2, and patching a stored batch's base offset. Sans-IO.

The byte layout, what the CRC covers and what is relative are documented once, at the top of
``storage/records/codec.py``; this module writes exactly that layout with the codec's own structs. Callers
import it through the facade, ``storage/records/__init__.py``.

``encode_batch_reference`` is the pure-Python reference encoder. The facade's ``encode_batch`` is the
compiled one of ``storage/records/compiled.py`` (aiokafka's Cython builder), which writes the same bytes
and hands this one what it cannot write exactly (a delete horizon, a first timestamp of -1) and every
input to refuse.
"""

from __future__ import annotations

from collections.abc import Sequence

from crc32c import crc32c

from storage.errors import CodecError
from storage.records import compression

# The codec's structs and limits, shared on purpose: one definition of the layout.
from storage.records.codec import (
    _BASE_OFFSET,
    _CRC_FIELD,
    _CRC_HEADER,
    _INT32_MAX,
    _INT64_MAX,
    _INT64_MIN,
    _PREFIX,
    COMPRESSION_MASK,
    DELETE_HORIZON_FLAG,
    LOG_APPEND_TIME,
    MAGIC,
    RECORD_BATCH_OVERHEAD,
    Header,
    Record,
)

__all__ = ["batch_of_records", "encode_batch_reference", "set_base_offset"]

# Zigzag varints of -64..63 are one byte; precomputing them skips the loop for the common small fields
# (attributes-free record prefixes, small deltas, null markers, header counts).
_SMALL_VARINTS: dict[int, bytes] = {n: bytes([((n << 1) ^ (n >> 63)) & 0xFF]) for n in range(-64, 64)}


_ONE_BYTE = [bytes([n]) for n in range(0x80)]


def _varint(n: int) -> bytes:
    small = _SMALL_VARINTS.get(n)
    if small is not None:
        return small
    return uvarint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)  # zigzag


def uvarint(n: int) -> bytes:
    """An unsigned varint (7 bits a byte, low first): the zigzag varint's last step, and Kafka's flexible
    versions' lengths and counts (broker/wire.py)."""
    if 0 <= n < 0x80:  # one byte: nearly every count and length of a flexible Kafka answer
        return _ONE_BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_NULL = _SMALL_VARINTS[-1]
_ZERO = _SMALL_VARINTS[0]
_RECORD_ATTRIBUTES = b"\x00"


def _encode_headers(headers: tuple[Header, ...]) -> bytes:
    parts = [_varint(len(headers))]
    for header in headers:
        key = header.key.encode("utf-8")
        parts.append(_varint(len(key)))
        parts.append(key)
        if header.value is None:
            parts.append(_NULL)
        else:
            parts.append(_varint(len(header.value)))
            parts.append(header.value)
    return b"".join(parts)


def encode_batch_reference(
    records: Sequence[Record],
    base_offset: int = 0,
    *,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
    codec: int = compression.NONE,
    log_append_time: int | None = None,
    level: int | None = None,
) -> bytes:
    """The pure-Python reference of ``storage.records.encode_batch`` (compiled, ``record_compiled.py``):
    ``records`` as one RecordBatch v2, uncompressed unless ``codec`` names one (1-4), at ``level`` (Kafka's
    ``compression.<codec>.level``; None: the codec's default).

    Offsets must be >= ``base_offset`` and strictly increasing; gaps are allowed, because compaction output
    keeps the offsets its input had. Timestamps may go backwards (a negative ``timestampDelta``).
    ``delete_horizon_ms`` sets the delete-horizon flag and stores the horizon as baseTimestamp (KIP-534).
    ``last_offset_delta`` keeps a filtered batch's original span (it must cover the last record).
    ``log_append_time`` makes the batch LogAppendTime with that maxTimestamp (every reader then gives each
    record that time); the records keep their own timestamps, as Kafka leaves them.
    Raises ``ValueError`` for input that cannot be encoded; ``CodecError`` is reserved for bytes read back.
    """
    if codec not in compression.CODEC_NAMES:
        raise ValueError(f"unknown compression codec {codec}")
    if not records:
        raise ValueError("a record batch needs at least one record")
    if not 0 <= base_offset <= _INT64_MAX:
        raise ValueError(f"base offset {base_offset} is outside 0..2^63-1")
    base_timestamp = records[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
    max_timestamp = records[0].timestamp
    previous = base_offset - 1
    parts: list[bytes] = []
    append = parts.append
    varint = _varint
    small = _SMALL_VARINTS
    for record in records:
        offset = record.offset
        if offset <= previous:
            raise ValueError(
                f"offset {offset} is not above {previous}: "
                "offsets must be >= the base offset and strictly increasing"
            )
        previous = offset
        offset_delta = offset - base_offset
        if offset_delta > _INT32_MAX:
            raise ValueError(f"offset {offset} is more than 2^31-1 past base offset {base_offset}")
        timestamp = record.timestamp
        if not _INT64_MIN <= timestamp <= _INT64_MAX:
            raise ValueError(f"timestamp {timestamp} does not fit in int64")
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        timestamp_delta = timestamp - base_timestamp
        if not _INT64_MIN <= timestamp_delta <= _INT64_MAX:
            raise ValueError(f"timestamp {timestamp} is too far from the batch's first timestamp")
        key = record.key
        value = record.value
        # The small fields and the key are joined once; the value, usually the bulk of the record, is
        # copied only by the final join of the whole batch.
        head = b"".join(
            (
                _RECORD_ATTRIBUTES,
                small.get(timestamp_delta) or varint(timestamp_delta),
                small.get(offset_delta) or varint(offset_delta),
                _NULL if key is None else varint(len(key)),
                b"" if key is None else key,
                _NULL if value is None else varint(len(value)),
            )
        )
        trailer = _encode_headers(record.headers) if record.headers else _ZERO
        size = len(head) + len(trailer)
        if value is not None:
            size += len(value)
        if size > _INT32_MAX:
            raise ValueError(f"record at offset {offset} is larger than 2^31-1 bytes")
        append(small.get(size) or varint(size))
        append(head)
        if value is not None:
            append(value)
        append(trailer)

    span = previous - base_offset
    if last_offset_delta is not None:
        if not span <= last_offset_delta <= _INT32_MAX:
            raise ValueError(f"lastOffsetDelta {last_offset_delta} does not cover the last record")
        span = last_offset_delta
    attributes = codec | (0 if delete_horizon_ms is None else DELETE_HORIZON_FLAG)
    if log_append_time is not None:
        attributes |= LOG_APPEND_TIME
        max_timestamp = log_append_time
    covered_header = _CRC_HEADER.pack(
        # Not transactional, not control; maybe compressed, a delete horizon, LogAppendTime.
        attributes,
        span,  # lastOffsetDelta
        base_timestamp,
        max_timestamp,
        -1,  # producerId
        -1,  # producerEpoch
        -1,  # baseSequence
        len(records),
    )
    return _assemble_batch(base_offset, covered_header, b"".join(parts), level)


def _assemble_batch(
    base_offset: int,
    covered_header: bytes,
    records_bytes: bytes | bytearray | memoryview,
    level: int | None = None,
) -> bytes:
    """A whole batch from its CRC-covered header (``_CRC_HEADER``) and its *uncompressed* records.

    The records are compressed with the codec the header's attributes name, at ``level`` (Kafka's level
    for that codec; None: its default, and ignored when the batch is uncompressed); the CRC is computed
    over the bytes as stored. The partitionLeaderEpoch is -1, as in every batch Strata writes.
    """
    codec = covered_header[1] & COMPRESSION_MASK  # attributes is a big-endian int16: bits 0-2 are byte 1
    stored = records_bytes if not codec else compression.compress(codec, records_bytes, level)
    # batchLength counts partitionLeaderEpoch (4) + magic (1) + crc (4) + the CRC-covered bytes.
    batch_length = 9 + len(covered_header) + len(stored)
    if batch_length > _INT32_MAX:
        raise ValueError("record batch is larger than 2^31-1 bytes")
    crc = crc32c(stored, crc32c(covered_header))
    return b"".join(
        (
            _PREFIX.pack(base_offset, batch_length, -1, MAGIC),
            _CRC_FIELD.pack(crc),
            covered_header,
            stored,
        )
    )


def batch_of_records(
    records_bytes: bytes | bytearray,
    count: int,
    first_timestamp: int,
    max_timestamp: int,
    codec: int = 0,
    log_append_time: int | None = None,
    level: int | None = None,
) -> bytes:
    """The batch ``encode_batch`` writes for ``count`` records with offsets 0..count-1, no producer, given
    their encoded records (``records_bytes``, uncompressed) and timestamps: for encoders that write the
    records themselves (``agents/_encode.c``). CreateTime, or LogAppendTime with ``log_append_time`` as
    its maxTimestamp; compressed with ``codec`` at ``level``. Tests hold it to ``encode_batch``."""
    attributes = codec
    if log_append_time is not None:
        attributes |= LOG_APPEND_TIME
        max_timestamp = log_append_time
    covered = _CRC_HEADER.pack(attributes, count - 1, first_timestamp, max_timestamp, -1, -1, -1, count)
    # As bytes when compressed: cramjam's lz4 compressor takes no other buffer type.
    return _assemble_batch(0, covered, bytes(records_bytes) if codec else records_bytes, level)


def set_base_offset(buf: bytearray, position: int, base_offset: int) -> None:
    """Patch in place the baseOffset of the batch that starts at ``position`` in ``buf``.

    Valid without touching the CRC, because the CRC does not cover baseOffset. Raises ``CodecError`` if no
    batch header starts there, ``ValueError`` for a negative position or an offset outside int64.
    """
    if position < 0:
        raise ValueError(f"position {position} is negative")
    if not 0 <= base_offset <= _INT64_MAX:
        raise ValueError(f"base offset {base_offset} is outside 0..2^63-1")
    if position + RECORD_BATCH_OVERHEAD > len(buf):
        raise CodecError(f"no record batch header at position {position}: the buffer ends first")
    if buf[position + 16] != MAGIC:
        raise CodecError(f"no record batch at position {position}: magic is {buf[position + 16]}, not 2")
    _BASE_OFFSET.pack_into(buf, position, base_offset)
