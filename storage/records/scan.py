"""Rewriting stored batches: compaction's side of the RecordBatch v2 codec (scan records without decoding
values, copy survivors byte for byte, set the delete horizon, KIP-534) and changing a batch's codec.

The byte layout, what the CRC covers and what is relative are documented once, at the top of
``storage/records/codec.py``; this module reads and writes exactly that layout, with the codec's own structs
and varint reader. Sans-IO like the codec; every malformed input raises ``CodecError``.
Import these names from ``storage.records``.

A compressed batch is scanned in its expanded form (header, then decompressed records), and a batch
filtered from it is compressed again with the same codec, as Kafka's cleaner does (``MemoryRecords.filterTo``
writes retained records with the original batch's compression type). A compressed batch that keeps all of
its records and needs no new delete horizon is copied as stored, as Kafka copies a wholly retained batch.

``scan_batch_reference`` (``storage.records.scan_batch``) is the pure-Python reference of compaction's
scan, which runs as a C loop into columns (``storage/records/columns.py``, with the same checks and error
messages). ``filter_batch`` and ``recompress_batch`` stay here in Python: they parse no record (survivors
and records are copied as bytes), except when a new delete horizon must be set, which decodes and
re-encodes that one batch with the reference.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from crc32c import crc32c

from storage.errors import CodecError
from storage.records import compression

# The codec's private structs and readers, shared on purpose: one definition of the layout.
from storage.records.codec import (
    _BASE_OFFSET,
    _CRC_FIELD,
    _CRC_HEADER,
    _CRC_START,
    _MIN_RECORD_SIZE,
    COMPRESSION_MASK,
    LOG_APPEND_TIME,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Record,
    _expand_batch,
    _varint_tail,
)
from storage.records.decode import decode_batch
from storage.records.encode import _assemble_batch, encode_batch_reference

__all__ = [
    "RecordSpan",
    "filter_batch",
    "filter_ranges",
    "recompress_batch",
    "scan_batch_reference",
    "set_max_timestamp",
    "stamp_log_append_time",
]

# attributes .. maxTimestamp (bytes 21-42): the part of the CRC-covered header a LogAppendTime stamp
# rewrites; lastOffsetDelta and baseTimestamp between them are copied.
_STAMPED = struct.Struct(">hiqq")
_STAMPED_END = _CRC_START + _STAMPED.size


@dataclass(slots=True)
class RecordSpan:
    """What compaction needs of a record, and where its bytes are within its batch.

    ``start``/``end`` delimit the whole record (its length varint included) inside the batch's expanded
    form (the batch itself unless it is compressed: see the codec's layout doc), so a kept record is
    copied as it is: its offsetDelta and timestampDelta stay valid as long as the batch
    keeps its baseOffset and baseTimestamp. Not frozen: one is built per record per compaction pass, and
    a frozen dataclass's constructor costs several times more.
    """

    offset: int
    timestamp: int
    key: bytes | None
    tombstone: bool
    start: int
    end: int


def scan_batch_reference(batch: bytes, header: BatchHeader, offset_base: int = 0) -> list[RecordSpan]:
    """Offsets, timestamps, keys and tombstone flags of one batch's records; values are skipped. The
    reference of compaction's column scan (``storage/records/columns.py``).

    ``batch`` is exactly one batch (as ``iter_batches`` yields it, as bytes). Its CRC is not re-checked.
    """
    if len(batch) != header.size:
        raise CodecError(f"batch is {len(batch)} bytes, its header says {header.size}")
    batch, pos, end = _expand_batch(batch, 0, header)
    pos += RECORD_BATCH_OVERHEAD
    first_offset = offset_base + header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.attributes & LOG_APPEND_TIME
    last_delta = header.last_offset_delta
    previous_delta = -1
    out: list[RecordSpan] = []
    tail = _varint_tail
    try:
        for _ in range(header.records_count):
            start = pos
            b = batch[pos]
            pos += 1
            n, pos = (b, pos) if b < 0x80 else tail(batch, pos, b, 32)
            record_end = pos + ((n >> 1) ^ -(n & 1))
            if record_end > end or record_end - pos < _MIN_RECORD_SIZE - 1:
                raise CodecError("record length runs past its batch or is too small")
            pos += 1
            b = batch[pos]
            pos += 1
            n, pos = (b, pos) if b < 0x80 else tail(batch, pos, b, 64)
            timestamp_delta = (n >> 1) ^ -(n & 1)
            b = batch[pos]
            pos += 1
            n, pos = (b, pos) if b < 0x80 else tail(batch, pos, b, 32)
            offset_delta = (n >> 1) ^ -(n & 1)
            if offset_delta <= previous_delta or offset_delta > last_delta:
                raise CodecError(f"offset delta {offset_delta} is out of order or past lastOffsetDelta")
            previous_delta = offset_delta
            b = batch[pos]
            pos += 1
            n, pos = (b, pos) if b < 0x80 else tail(batch, pos, b, 32)
            length = (n >> 1) ^ -(n & 1)
            key: bytes | None = None
            if length >= 0:
                if pos + length > record_end:
                    raise CodecError("record key runs past its record")
                key = batch[pos : pos + length]
                pos += length
            elif length != -1:
                raise CodecError(f"record key length {length} is invalid")
            b = batch[pos]
            pos += 1
            n, pos = (b, pos) if b < 0x80 else tail(batch, pos, b, 32)
            length = (n >> 1) ^ -(n & 1)
            if length < -1 or pos + max(length, 0) > record_end:
                raise CodecError(f"record value length {length} is invalid")
            out.append(
                RecordSpan(
                    first_offset + offset_delta,
                    header.max_timestamp if log_append_time else base_timestamp + timestamp_delta,
                    key,
                    length == -1,
                    start,
                    record_end,
                )
            )
            pos = record_end
    except IndexError:
        raise CodecError("record runs past the end of its batch") from None
    if pos != end:
        raise CodecError("record batch has bytes left after its recordsCount records")
    return out


def filter_batch(
    batch: bytes,
    header: BatchHeader,
    kept: Sequence[RecordSpan],
    *,
    offset_base: int,
    base_offset: int,
    delete_horizon_ms: int | None = None,
    level: int | None = None,
) -> bytes:
    """A batch holding only ``kept`` (ordered, non-empty, from
    ``scan_batch_reference(batch, header, offset_base)``).

    The result keeps every kept record's offset and timestamp and the batch's lastOffsetDelta; its
    baseOffset field becomes ``base_offset`` (relative to the output chunk: the caller moves the batch
    from its input chunk to an output chunk with another base). Kept records are copied byte for byte,
    unless a new delete horizon must be set: that moves baseTimestamp, so the records are re-encoded
    (once per batch holding tombstones, on the first compaction that keeps them). The result has the
    batch's codec: a compressed batch's survivors are compressed again with it, at ``level`` (the topic's
    ``compression.<codec>.level`` for that codec; None: the codec's default).
    """
    return filter_ranges(
        batch,
        header,
        [span.offset for span in kept],
        max((span.timestamp for span in kept), default=0),
        [(span.start, span.end) for span in kept],
        offset_base=offset_base,
        base_offset=base_offset,
        delete_horizon_ms=delete_horizon_ms,
        level=level,
    )


def filter_ranges(
    batch: bytes | memoryview,
    header: BatchHeader,
    offsets: Sequence[int],
    max_timestamp: int,
    ranges: Sequence[tuple[int, int]],
    *,
    offset_base: int,
    base_offset: int,
    delete_horizon_ms: int | None = None,
    level: int | None = None,
) -> bytes:
    """``filter_batch`` given the kept records' offsets, their largest timestamp and their byte ranges
    in the expanded batch (``start``/``end`` of their spans), for callers that scanned into columns."""
    if not offsets:
        raise ValueError("a record batch needs at least one record")
    codec = header.attributes & COMPRESSION_MASK
    if delete_horizon_ms is not None and header.delete_horizon_ms != delete_horizon_ms:
        wanted = set(offsets)
        shift = base_offset - (offset_base + header.base_offset)
        records = [
            Record(r.offset + shift, r.timestamp, r.key, r.value, r.headers)
            for r in decode_batch(bytes(batch), 0, header, offset_base)
            if r.offset in wanted
        ]
        return encode_batch_reference(
            records,
            base_offset,
            delete_horizon_ms=delete_horizon_ms,
            last_offset_delta=header.last_offset_delta,
            codec=codec,
            # A LogAppendTime batch stays one, with its append time (decode gave every record that time).
            log_append_time=header.append_time,
            level=level,
        )
    if codec and len(offsets) == header.records_count:
        # Nothing removed: the stored bytes are the answer. Compressing again would cost CPU and could
        # change them. baseOffset is outside the CRC.
        out = bytearray(batch)
        _BASE_OFFSET.pack_into(out, 0, base_offset)
        return bytes(out)
    expanded = _expand_batch(batch, 0, header)[0]  # the batch itself when uncompressed
    covered = _CRC_HEADER.pack(
        header.attributes,
        header.last_offset_delta,
        header.base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(offsets),
    )
    return _assemble_batch(
        base_offset, covered, b"".join(expanded[start:end] for start, end in ranges), level
    )


def recompress_batch(
    batch: bytes | memoryview,
    header: BatchHeader,
    codec: int,
    records: bytes | None = None,
    log_append_time: int | None = None,
    level: int | None = None,
) -> bytes:
    """``batch`` (one whole batch, as ``iter_batches`` yields it) with its records stored with ``codec``,
    at ``level`` (the topic's ``compression.<codec>.level``; None: the codec's default).

    Every header field but the codec bits of attributes stays as it was (baseOffset, timestamps, producer
    id, epoch and sequence, recordsCount); the records are the same bytes, in ``codec``'s stream (0 =
    uncompressed); the CRC is computed again. The partitionLeaderEpoch becomes -1. ``records``: the
    batch's records section already decompressed (by the produce check), so it is not decompressed twice.
    ``log_append_time``: also stamp the batch LogAppendTime with that time (``stamp_log_append_time``).
    """
    if codec not in compression.CODEC_NAMES:
        raise ValueError(f"unknown compression codec {codec}")
    if records is None:
        expanded, start, end = _expand_batch(batch, 0, header)
        section: bytes | memoryview = memoryview(expanded)[start + RECORD_BATCH_OVERHEAD : end]
    else:
        section = records
    attributes = (header.attributes & ~COMPRESSION_MASK) | codec
    if log_append_time is not None:
        attributes |= LOG_APPEND_TIME
    covered = _CRC_HEADER.pack(
        attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp if log_append_time is None else log_append_time,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.records_count,
    )
    return _assemble_batch(header.base_offset, covered, section, level)


def stamp_log_append_time(batch: bytes | memoryview, header: BatchHeader, append_time: int) -> bytes:
    """A copy of ``batch`` (one whole batch) stamped LogAppendTime, as Kafka's broker stamps a batch
    appended to a LogAppendTime topic (``DefaultRecordBatch.setMaxTimestamp``): attributes bit 3 set,
    maxTimestamp = ``append_time``, the CRC computed again over attributes..end. Everything else is kept
    byte for byte: the records (compressed or not) with their own timestamps and deltas, baseTimestamp,
    the other attribute bits, the producer fields and the partitionLeaderEpoch."""
    return set_max_timestamp(batch, header, True, append_time)


def set_max_timestamp(
    batch: bytes | memoryview, header: BatchHeader, log_append_time: bool, max_timestamp: int
) -> bytes:
    """A copy of ``batch`` with the timestamp type bit (3) and maxTimestamp given and the CRC computed
    again, all else byte for byte: Kafka's ``DefaultRecordBatch.setMaxTimestamp``, which its broker
    applies to every batch it appends. On a CreateTime topic that corrects a producer's batch whose
    maxTimestamp is not its largest record timestamp, or which claims LogAppendTime itself."""
    view = memoryview(batch)
    attributes = header.attributes & ~LOG_APPEND_TIME
    if log_append_time:
        attributes |= LOG_APPEND_TIME
    stamped = _STAMPED.pack(attributes, header.last_offset_delta, header.base_timestamp, max_timestamp)
    rest = view[_STAMPED_END : header.size]
    crc = crc32c(rest, crc32c(stamped))
    return b"".join((view[: _CRC_START - _CRC_FIELD.size], _CRC_FIELD.pack(crc), stamped, rest))
