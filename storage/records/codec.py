"""Kafka RecordBatch v2 (magic 2) codec: bytes in, bytes out, no IO.

Strata stores records exactly as Kafka lays them out on disk, so any decoder of Kafka's log format can read
a chunk. All integers are big-endian; ``varint`` and
``varlong`` are Kafka's zigzag base-128 varints (at most 5 and 10 bytes).

Batch layout (``RECORD_BATCH_OVERHEAD`` = 61 bytes of header, then the records)::

    offset  size  field
    ------  ----  ------------------------------------------------------------------
         0     8  baseOffset            int64   \\  LOG_OVERHEAD (12 bytes): not counted by
         8     4  batchLength           int32   /  batchLength, not covered by the CRC
        12     4  partitionLeaderEpoch  int32   not covered by the CRC (Strata writes -1)
        16     1  magic                 int8    always 2
        17     4  crc                   uint32  CRC-32C (Castagnoli) of bytes 21 .. end of batch
        21     2  attributes            int16   \\
        23     4  lastOffsetDelta       int32   |
        27     8  baseTimestamp         int64   |
        35     8  maxTimestamp          int64   |  covered by the CRC
        43     8  producerId            int64   |
        51     2  producerEpoch         int16   |
        53     4  baseSequence          int32   |
        57     4  recordsCount          int32   |
        61     .  records               [Record] /

    attributes: bits 0-2 compression (0 = none), bit 3 timestamp type (0 = CreateTime,
    1 = LogAppendTime), bit 4 transactional, bit 5 control batch, bit 6 delete horizon set
    (KIP-534: baseTimestamp then holds the tombstones' delete horizon, and record timestamps stay
    baseTimestamp + timestampDelta), bits 7-15 unused.
    batchLength counts the bytes after itself: total batch size = 12 + batchLength.

Record layout (repeated recordsCount times, uncompressed)::

    length          varint   bytes of the record after this field
    attributes      int8     unused, written as 0
    timestampDelta  varlong  timestamp - baseTimestamp (may be negative)
    offsetDelta     varint   offset - baseOffset
    keyLength       varint   -1 = null key
    key             bytes
    valueLength     varint   -1 = null value = tombstone
    value           bytes
    headerCount     varint
    headers         [headerKeyLength varint, headerKey utf-8,
                     headerValueLength varint (-1 = null), headerValue bytes]

What the CRC covers, and why baseOffset can be patched: the CRC covers ``attributes`` through the end of the
batch. ``baseOffset``, ``batchLength``, ``partitionLeaderEpoch`` and ``magic`` precede it and are not covered.
Kafka relies on that to assign offsets on the broker without recomputing the CRC, and so does Strata: an
ingestion file is written before its offsets exist, so its batches carry base offsets relative to their chunk
(the first batch of a chunk starts at 0). The metadata store holds each chunk's absolute base offset, and a
reader either passes it as ``offset_base`` to :func:`decode_records` or patches each batch in place with
:func:`set_base_offset` before serving Kafka-format bytes; the CRC stays valid either way.

Compressed batches (attributes bits 0-2: 1 gzip, 2 snappy, 3 lz4, 4 zstd; 5-7 are refused)::

    offset  size  field
         0    61  the batch header above, unchanged: batchLength and the CRC cover the bytes as stored
        61     .  records   the codec's stream (``storage/records/compression.py``) of the same Record layout,
                            recordsCount records, concatenated exactly as in an uncompressed batch

Only the records section is compressed, and it holds exactly the bytes an uncompressed batch would carry
at offset 61, so every decoder here first turns a compressed batch into that *expanded* form (the 61 header
bytes, then the decompressed records) and then runs the same loop as for an uncompressed batch: the
uncompressed hot path gains no per-record work. Positions inside a batch (``RecordSpan.start``/``end``) are
positions in the expanded form. Decompression is bounded by ``compression.output_limit`` of the
compressed size (a bomb is a ``CodecError``); recordsCount is checked against the decompressed size.

Strata itself writes non-transactional, non-control batches with no producer id (-1), no sequence (-1)
and no leader epoch (-1), uncompressed unless asked for a codec, with CreateTime timestamps, or on a
``message.timestamp.type=LogAppendTime`` topic with bit 3 set and the agent's time as maxTimestamp;
Kafka producers' batches are stored as they came, compressed or not, except that a LogAppendTime topic
stamps them the same way (bit 3, maxTimestamp, a new CRC: ``stamp_log_append_time``). Control batches are
rejected with :class:`~storage.errors.CodecError`; LogAppendTime batches are read as Kafka reads them
(every record takes ``maxTimestamp``; the records' own timestamps, which Kafka leaves as the producer
wrote them, are not read).

Every malformed input (truncation, a bad magic or CRC, a length pointing past the end, a record count that
does not match the bytes, invalid utf-8 in a header key, trailing bytes too short to be a batch, an unknown
codec, a compressed stream that is corrupt or decompresses past its bound) raises
:class:`~storage.errors.CodecError` and nothing else.

Compaction reads and rewrites batches with the same layout in ``storage/records/scan.py`` (keys and record
spans without values, survivors copied byte for byte). ``storage.records`` is the one import for both.

The record loop here (``decode_records_reference``) is the pure-Python reference. The hot paths decode
with the compiled codec of ``storage/records/compiled.py`` (aiokafka's Cython reader, chosen and argued
there), which uses this module's header checks and returns exactly what the reference returns, errors
included; it hands the reference any batch it cannot read exactly.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from crc32c import crc32c

from storage.errors import CodecError
from storage.records import compression

__all__ = [
    "DELETE_HORIZON_FLAG",
    "LOG_OVERHEAD",
    "MAGIC",
    "RECORD_BATCH_OVERHEAD",
    "BatchArgs",
    "BatchHeader",
    "Header",
    "Record",
    "batch_for_c",
    "batches_for_c",
    "check_framing",
    "count_records",
    "expand_records",
    "iter_batches",
    "read_header",
    "verify_crc",
]

MAGIC = 2
LOG_OVERHEAD = 12
RECORD_BATCH_OVERHEAD = 61

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_START = 21  # first byte covered by the CRC (attributes)
_CRC_FIELD = struct.Struct(">I")
_BASE_OFFSET = struct.Struct(">q")
# The CRC-covered part of the header, from attributes to recordsCount.
_CRC_HEADER = struct.Struct(">hiqqqhii")
_PREFIX = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic

# The batch's attributes (int16): bits 0-2 the compression codec, bit 3 the timestamp type (LogAppendTime),
# bit 4 transactional, bit 5 control (a COMMIT or ABORT marker), bit 6 a delete horizon is set (KIP-534).
COMPRESSION_MASK = 0x07
LOG_APPEND_TIME = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20
DELETE_HORIZON_FLAG = 0x40

# The smallest possible record: seven one-byte fields (length, attributes, timestampDelta, offsetDelta,
# keyLength, valueLength, headerCount). Bounds recordsCount before any record is read.
_MIN_RECORD_SIZE = 7

_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

_Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class Header:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One record. ``value is None`` is a tombstone; ``offset`` is absolute once decoded with its base."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


class BatchHeader(NamedTuple):
    """The 61-byte batch header, plus ``size``: the whole batch in bytes, including the 12-byte prefix.

    A NamedTuple, not a frozen dataclass: one is made per batch on every produce and read path, and a
    tuple of 14 fields is several times cheaper to build (measured on the Kafka produce path).
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    size: int

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the batch's tombstones may be removed, if a compaction already kept them once."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG else None

    @property
    def append_time(self) -> int | None:
        """Every record's timestamp when the batch's are LogAppendTime (its maxTimestamp), else None."""
        return self.max_timestamp if self.attributes & LOG_APPEND_TIME else None


# --- decoding --------------------------------------------------------------------------------------------


def _as_bytes(buf: _Buffer) -> bytes:
    # Indexing and slicing ``bytes`` is the fastest pure-Python path; one copy of a bytearray or memoryview
    # costs far less than decoding its records.
    return buf if isinstance(buf, bytes) else bytes(buf)


def read_header(data: bytes | memoryview, pos: int, verify_crc: bool) -> BatchHeader:
    """The header of the batch at ``pos``, checked (framing, counts, and the CRC if ``verify_crc``);
    ``CodecError`` otherwise. ``header.size`` is where the next batch starts, relative to ``pos``."""
    remaining = len(data) - pos
    if remaining < RECORD_BATCH_OVERHEAD:
        raise CodecError(
            f"{remaining} trailing bytes at position {pos} are shorter than a record batch header"
        )
    (
        base_offset,
        batch_length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    ) = _HEADER.unpack_from(data, pos)
    if magic != MAGIC:
        raise CodecError(f"record batch at position {pos} has magic {magic}, expected 2")
    size = LOG_OVERHEAD + batch_length
    if size < RECORD_BATCH_OVERHEAD:
        raise CodecError(f"record batch at position {pos} declares length {batch_length}, below the minimum")
    if size > remaining:
        raise CodecError(
            f"record batch at position {pos} declares {size} bytes but only {remaining} remain (truncated)"
        )
    if verify_crc and crc32c(memoryview(data)[pos + _CRC_START : pos + size]) != crc:
        raise CodecError(f"record batch at position {pos} fails its CRC-32C check")
    codec = attributes & COMPRESSION_MASK
    records_room = size - RECORD_BATCH_OVERHEAD
    if codec:
        if codec not in compression.CODEC_NAMES:
            raise CodecError(f"record batch at position {pos} uses unknown compression codec {codec}")
        # The most the records may take once decompressed; checked exactly when they are decompressed.
        records_room = compression.output_limit(records_room)
    if attributes & CONTROL:
        raise CodecError(f"record batch at position {pos} is a control batch, which Strata does not support")
    if records_count < 0 or records_count * _MIN_RECORD_SIZE > records_room:
        raise CodecError(
            f"record batch at position {pos} declares an impossible record count {records_count}"
        )
    if last_offset_delta < 0 or (records_count and last_offset_delta < records_count - 1):
        raise CodecError(
            f"record batch at position {pos} has lastOffsetDelta {last_offset_delta} "
            f"for {records_count} records"
        )
    return BatchHeader(
        base_offset,
        batch_length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
        size,
    )


def verify_crc(data: bytes | memoryview, pos: int, header: BatchHeader) -> None:
    """``CodecError`` unless the CRC-32C of the batch at ``pos`` (its header read without the check)
    matches its bytes."""
    if crc32c(memoryview(data)[pos + _CRC_START : pos + header.size]) != header.crc:
        raise CodecError(f"record batch at position {pos} fails its CRC-32C check")


def iter_batches(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Yield each batch's header and a zero-copy view of the whole batch (prefix included).

    Records are not decoded. ``buf`` must be a whole number of batches; a short tail raises ``CodecError``.
    """
    view = memoryview(buf)
    if view.format != "B":
        view = view.cast("B")
    pos = 0
    end = len(view)
    while pos < end:
        header = read_header(view, pos, verify_crc)
        yield header, view[pos : pos + header.size]
        pos += header.size


def count_records(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True) -> int:
    """Sum the recordsCount of every batch in ``buf`` without decoding any record."""
    return sum(header.records_count for header, _ in iter_batches(buf, verify_crc=verify_crc))


def _varint_tail(data: bytes, pos: int, first: int, max_bits: int) -> tuple[int, int]:
    """Finish a multi-byte varint whose first byte (>= 0x80) was ``first``; return (unsigned value, pos)."""
    value = first & 0x7F
    shift = 7
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift >= max_bits:
            raise CodecError(f"varint longer than {max_bits} bits")
    if value >> max_bits:
        raise CodecError(f"varint overflows {max_bits} bits")
    return value, pos


def _expand_batch(data: bytes | memoryview, pos: int, header: BatchHeader) -> tuple[bytes, int, int]:
    """The batch at ``pos`` in its expanded form: (buffer, position of its header, end of its records).

    An uncompressed batch is its own expanded form (``data`` is returned as is, no copy). A compressed one
    becomes its 61 header bytes followed by its decompressed records, in a new buffer starting at 0.
    """
    codec = header.attributes & COMPRESSION_MASK
    if not codec:
        return _as_bytes(data), pos, pos + header.size
    stored = memoryview(data)[pos + RECORD_BATCH_OVERHEAD : pos + header.size]
    records = compression.decompress(codec, stored, compression.output_limit(len(stored)))
    if header.records_count * _MIN_RECORD_SIZE > len(records):
        raise CodecError(
            f"compressed record batch declares {header.records_count} records "
            f"but holds only {len(records)} bytes of records"
        )
    header_bytes = bytes(memoryview(data)[pos : pos + RECORD_BATCH_OVERHEAD])
    return header_bytes + records, 0, RECORD_BATCH_OVERHEAD + len(records)


def expand_records(batch: bytes | memoryview, header: BatchHeader) -> tuple[bytes | memoryview, int, int]:
    """One whole batch's records, decompressed if need be: (buffer, first record's position, end).

    For readers of records outside this module (compaction's column scan, HTTP's JSON rendering). An
    uncompressed batch is returned as given (no copy); decompression is bounded as everywhere
    (``CodecError`` past the bound or on a corrupt stream).
    """
    if not header.attributes & COMPRESSION_MASK:
        return batch, RECORD_BATCH_OVERHEAD, header.size
    data, pos, end = _expand_batch(batch, 0, header)
    return data, pos + RECORD_BATCH_OVERHEAD, end


BatchArgs = tuple[bytes | memoryview, int, int, int, int, int, int | None, int]


def batches_for_c(data: bytes | memoryview, offset_base: int) -> Iterator[tuple[BatchHeader, BatchArgs]]:
    """Each batch of ``data`` (CRCs checked) with what the C record loops take first: its records'
    buffer, their start and end (``expand_records``), recordsCount, the first offset (``offset_base`` +
    baseOffset), baseTimestamp, the LogAppendTime timestamp or None, and lastOffsetDelta.

    Those loops (``storage/_recordcols.c``, ``api/_recordjson.c``) count in 64 bits: a batch whose first
    offset does not fit is a ``CodecError`` here, as a corrupt one is.
    """
    for header, batch in iter_batches(data, verify_crc=True):
        yield header, _args_for_c(header, batch, offset_base)


def batch_for_c(data: bytes | memoryview, pos: int, offset_base: int) -> tuple[BatchHeader, BatchArgs]:
    """``batches_for_c``'s answer for the one batch at ``pos`` of ``data`` (``header.size`` bytes)."""
    view = memoryview(data)
    header = read_header(view, pos, True)
    return header, _args_for_c(header, view[pos : pos + header.size], offset_base)


def _args_for_c(header: BatchHeader, batch: memoryview, offset_base: int) -> BatchArgs:
    first_offset = offset_base + header.base_offset
    if not 0 <= first_offset <= _INT64_MAX:
        raise CodecError(f"record batch offsets start at {first_offset}, outside 64 bits")
    buf, pos, end = expand_records(batch, header)
    return (
        buf,
        pos,
        end,
        header.records_count,
        first_offset,
        header.base_timestamp,
        header.append_time,
        header.last_offset_delta,
    )


def check_framing(batch: bytes | memoryview, header: BatchHeader) -> None:
    """Check that ``batch`` (one whole batch) holds exactly recordsCount length-delimited records.

    Decompresses a compressed batch (bounded, see the layout doc) and walks the records' length varints
    without parsing their fields: a few times cheaper than decoding, for the produce path. ``CodecError``
    if the stream is corrupt, too large, or does not split into recordsCount records.
    """
    data, pos, end = _expand_batch(batch, 0, header)
    pos += RECORD_BATCH_OVERHEAD
    tail = _varint_tail
    try:
        for _ in range(header.records_count):
            b = data[pos]
            pos += 1
            n, pos = (b, pos) if b < 0x80 else tail(data, pos, b, 32)
            length = (n >> 1) ^ -(n & 1)
            if length < _MIN_RECORD_SIZE - 1:
                raise CodecError(f"record length {length} is too small")
            pos += length
            if pos > end:
                raise CodecError("record length runs past its batch")
    except IndexError:
        raise CodecError("record runs past the end of its batch") from None
    if pos != end:
        raise CodecError("record batch has bytes left after its recordsCount records")
