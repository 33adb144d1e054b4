"""The compiled RecordBatch v2 codec: aiokafka's Cython reader and writer under ``storage.records``. Sans-IO.

The byte layout, what the CRC covers and what is relative are documented once, at the top of
``storage/records/codec.py``. Callers import ``decode_records`` and ``encode_batch`` from the facade,
``storage/records/__init__.py``. (Compaction's scan is the C loop of ``storage/records/columns.py``.)

**Which library, and why.** aiokafka (aio-libs, Apache-2.0, released with a widely used Kafka client)
compiles its RecordBatch v2 codec with Cython and ships it in its wheels: ``DefaultRecordBatch`` reads a
batch record by record, ``DefaultRecordBatchBuilder`` writes one. It is the only compiled v2 codec among
the libraries Strata installs: kafka-python's is pure Python, and confluent-kafka does not expose
librdkafka's. It is imported from ``aiokafka.record._crecords``, not from ``aiokafka.record.default_records``,
which silently falls back to aiokafka's pure-Python classes when the extension is missing: the argument
below is about the compiled classes, and a missing extension must fail at import rather than make Strata
slow. ``_crecords`` is private to aiokafka, so ``pyproject.toml`` bounds aiokafka to the versions this
module was checked against (the module is unchanged since 0.11), and ``tests/unit/test_record_compiled.py``
compares it with the reference on every run.

**The reference.** The pure-Python codec stays: ``decode_records_reference`` (``decode.py``) and
``encode_batch_reference`` (``record_encode.py``). This module returns exactly what the reference returns
(the same bytes and records). Whatever it cannot
do exactly, it hands to the reference, which also raises every error: the same ``CodecError`` with the
same message for a malformed batch, the same ``ValueError`` for input that cannot be encoded.

**Encoding.** The builder writes Kafka's canonical form, as the reference does (shortest varints, record
attributes 0, a null key, value or header value as length -1), so its records are the reference's
bytes. Only the validation is done here, on whole lists of offsets and timestamps in C builtins (``min``,
``max``, list comparison), not record by record. An uncompressed batch is the builder's, header and CRC
included, with baseOffset patched (the builder writes 0; baseOffset is outside the CRC). A compressed
batch takes the builder's records, compressed by ``storage/records/compression.py`` (Strata's framings and
levels, not aiokafka's codecs), with the header and CRC (crc32c) written as the reference writes them.
Handed to the reference: a delete horizon (the builder always makes the first record's timestamp the
base), a first timestamp of -1 (the builder's marker for "no record yet"), and any input the reference
refuses (the builder checks neither offset order nor ranges).

**Decoding** (``decode_records``). The reader is more lenient than the
reference, so a batch is taken from it only when the reference would read it the same way:

- each batch's header is read and checked by the reference's ``read_header`` (once per batch, with the
  CRC), and a compressed batch is expanded by ``storage/records/compression.py`` (decompression bounded);
- the reader gets a copy of the records behind a header of its own with baseOffset, baseTimestamp and
  attributes 0, so it returns the raw offset and timestamp deltas, added here as Python ints (no int64
  wrap-around; LogAppendTime read as the reference reads it);
- the records' canonical sizes (the builder's ``size_in_bytes``) must add up to the records' bytes. The
  reader consumed exactly those bytes, and each field takes at least its canonical size, so every varint
  was the shortest one: the reference refuses some longer ones (over 5 bytes for an int32) and reads the
  record attributes as one byte where the reader reads a varint;
- a null key or value must be stored as length -1 (one byte, 0x01): the reader takes any negative length
  as null, the reference refuses the others. ``decode_records`` hands a batch with a null header value
  to the reference (its stored length is not checked here);
- offset deltas strictly increase up to lastOffsetDelta, and timestamp deltas stay within ±2^62 (so no
  10-byte varlong, whose bits past the 64th the reader drops and the reference refuses).

Any other batch, and any batch the reader refuses (``CorruptRecordException``, invalid utf-8 in a header
key, or a length so large that the reader's bounds check overflows and the copy fails with
``OverflowError`` or ``MemoryError``), is read again by the reference, which decides. Of well-formed
batches, from a Kafka client or from Strata, only those holding a null header value take that path.

**Memory safety.** The reader decodes a varint without a bounds check (it checks only the byte where a
field starts), so on garbage it may read up to 20 bytes past its buffer before failing. Its buffer is
therefore a slice of a copy followed by 64 zero bytes it is not told about.

**What stays in Python:** batch headers and their CRC (one ``struct`` unpack and one crc32c call a batch);
``check_framing`` (a walk over record lengths, no field parsed); ``filter_batch`` (survivors are copied as
bytes; a new delete horizon re-encodes with the reference) and ``recompress_batch`` (no record parsed); and
building each ``Record``. That last one is now most of a decode: a frozen dataclass's ``__init__`` sets every
field through ``object.__setattr__``, so records are made here with ``object.__new__`` and the slots' own
descriptors, at little more than half the cost: the same ``Record``, as the property tests check.
"""

from __future__ import annotations

import itertools
import operator
import struct
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from aiokafka.errors import CorruptRecordException
from aiokafka.record._crecords.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from storage.records import compression

# The codec's private structs and helpers, shared on purpose: one definition of the layout.
from storage.records.codec import (
    _BASE_OFFSET,
    _CRC_HEADER,
    _CRC_START,
    _HEADER,
    _INT32_MAX,
    _INT64_MAX,
    _INT64_MIN,
    COMPRESSION_MASK,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Header,
    Record,
    _expand_batch,
    read_header,
)
from storage.records.decode import decode_batch
from storage.records.encode import _assemble_batch, encode_batch_reference

__all__ = ["decode_records", "encode_batch"]

_Buffer = bytes | bytearray | memoryview
_Pairs = list[tuple[str, bytes | None]]  # a record's headers as aiokafka reads and writes them
# (offsetDelta, timestampDelta, key, value, headers) -> the record's canonical size, length varint included.
_Sizer = Callable[[int, int, bytes | None, bytes | None, _Pairs], int]

# The header the reader is given: baseOffset, baseTimestamp, maxTimestamp and attributes 0 (so it returns
# raw deltas and decompresses nothing); only recordsCount, the last field, changes.
_READER_HEADER = _HEADER.pack(0, 0, -1, MAGIC, 0, 0, 0, 0, 0, -1, -1, -1, 0)[:-4]
_COUNT = struct.Struct(">i")
# Zero bytes after the reader's buffer: it may read up to 20 bytes past the end on garbage.
_PADDING = bytes(64)
# The builder's batch_size (it stops accepting records past it): no limit here.
_NO_LIMIT = sys.maxsize
_NO_HEADERS: _Pairs = []
# Timestamp deltas of shorter than 10 bytes as varlongs (zigzag below 2^63).
_TIMESTAMP_DELTA_LIMIT = 1 << 62
_NULL_LENGTH = 0x01  # zigzag varint of -1
# The canonical size of a record's key, value and headers, from the key's length varint on.
_size_of = DefaultRecordBatchBuilder.size_of

# What the compiled reader raises on a batch it refuses; the reference then reads it and decides.
_READER_REFUSALS = (CorruptRecordException, UnicodeDecodeError, OverflowError, MemoryError)
# What the compiled builder and the bulk checks raise on input outside what they write exactly; the
# reference then encodes it or raises its own error.
_WRITER_REFUSALS = (TypeError, ValueError, OverflowError, AttributeError)

# Records are made without Record.__init__ (see the module doc): object.__new__, then each slot set by its
# own descriptor, which is what the frozen dataclass's __init__ reaches through object.__setattr__.
_new = object.__new__
_Setter = Callable[[Any, Any], None]
_slots: Mapping[str, Any] = vars(Record)
_set_offset: _Setter = _slots["offset"].__set__
_set_timestamp: _Setter = _slots["timestamp"].__set__
_set_key: _Setter = _slots["key"].__set__
_set_value: _Setter = _slots["value"].__set__
_set_headers: _Setter = _slots["headers"].__set__


# --- encoding --------------------------------------------------------------------------------------------


def encode_batch(
    records: Sequence[Record],
    base_offset: int = 0,
    *,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
    codec: int = compression.NONE,
    log_append_time: int | None = None,
    level: int | None = None,
) -> bytes:
    """Encode ``records`` as one RecordBatch v2, uncompressed unless ``codec`` names one (1-4), at
    ``level`` (Kafka's ``compression.<codec>.level``; None: the codec's default).

    Offsets must be >= ``base_offset`` and strictly increasing; gaps are allowed, because compaction output
    keeps the offsets its input had. Timestamps may go backwards (a negative ``timestampDelta``).
    ``delete_horizon_ms`` sets the delete-horizon flag and stores the horizon as baseTimestamp (KIP-534).
    ``last_offset_delta`` keeps a filtered batch's original span (it must cover the last record).
    ``log_append_time`` makes the batch LogAppendTime with that maxTimestamp; the records keep their own
    timestamps, as Kafka leaves them.
    Raises ``ValueError`` for input that cannot be encoded; ``CodecError`` is reserved for bytes read back.
    The same bytes as ``encode_batch_reference``, written by aiokafka's builder (see the module doc).
    """
    built = None
    if delete_horizon_ms is None and codec in compression.CODEC_NAMES and 0 <= base_offset <= _INT64_MAX:
        built = _write(records, base_offset)
    if built is not None and len(built) - LOG_OVERHEAD <= _INT32_MAX:
        _, span, base_timestamp, max_timestamp, _, _, _, count = _CRC_HEADER.unpack_from(built, _CRC_START)
        if last_offset_delta is None and codec == compression.NONE and log_append_time is None:
            # The builder's batch, header and CRC included, but for baseOffset (it writes 0; outside the CRC).
            _BASE_OFFSET.pack_into(built, 0, base_offset)
            return bytes(built)
        if last_offset_delta is None or span <= last_offset_delta <= _INT32_MAX:
            covered = _CRC_HEADER.pack(
                # Not transactional, not control, no delete horizon; CreateTime unless log_append_time.
                codec if log_append_time is None else codec | LOG_APPEND_TIME,
                span if last_offset_delta is None else last_offset_delta,
                base_timestamp,
                max_timestamp if log_append_time is None else log_append_time,
                -1,  # producerId
                -1,  # producerEpoch
                -1,  # baseSequence
                count,
            )
            # As bytes: cramjam's lz4 compressor takes no other buffer type.
            return _assemble_batch(
                base_offset, covered, bytes(memoryview(built)[RECORD_BATCH_OVERHEAD:]), level
            )
    return encode_batch_reference(
        records,
        base_offset,
        delete_horizon_ms=delete_horizon_ms,
        last_offset_delta=last_offset_delta,
        codec=codec,
        log_append_time=log_append_time,
        level=level,
    )


def _write(records: Sequence[Record], base_offset: int) -> bytearray | None:
    """The builder's uncompressed batch of ``records`` (baseOffset 0), or None if the reference must
    encode them: they break one of its rules, or the builder would not write its bytes."""
    try:
        if not records:
            return None
        offsets = [r.offset for r in records]
        timestamps = [r.timestamp for r in records]
        first, last, count = offsets[0], offsets[-1], len(offsets)
        first_timestamp, lowest, highest = timestamps[0], min(timestamps), max(timestamps)
        if (
            first_timestamp == -1
            or first < base_offset
            or last - base_offset > _INT32_MAX
            or lowest < _INT64_MIN
            or highest > _INT64_MAX
            or lowest - first_timestamp < _INT64_MIN
            or highest - first_timestamp > _INT64_MAX
        ):
            return None
        # Strictly increasing: the common dense case as one list comparison, else pairwise in C.
        if (last - first != count - 1 or offsets != list(range(first, last + 1))) and not all(
            map(operator.lt, offsets, itertools.islice(offsets, 1, None))
        ):
            return None
        builder = DefaultRecordBatchBuilder(MAGIC, compression.NONE, 0, -1, -1, -1, _NO_LIMIT)
        append = builder.append
        for record in records:
            headers = record.headers
            append(
                record.offset - base_offset,
                record.timestamp,
                record.key,
                record.value,
                [(h.key, h.value) for h in headers] if headers else _NO_HEADERS,
            )
    except _WRITER_REFUSALS:
        return None
    built: bytearray = builder.build()
    return built


# --- decoding --------------------------------------------------------------------------------------------


def decode_records(buf: _Buffer, *, offset_base: int = 0, verify_crc: bool = True) -> Iterator[Record]:
    """Decode every record of every batch in ``buf``, in order.

    A record's offset is ``offset_base + baseOffset + offsetDelta``: pass the chunk's absolute base offset
    from the metadata store as ``offset_base`` to read a Strata chunk whose batches are relative.
    Its timestamp is ``baseTimestamp + timestampDelta`` (``maxTimestamp`` for LogAppendTime batches).
    The same records and errors as ``decode_records_reference``, read by aiokafka's reader where it reads
    them exactly (see the module doc).
    """
    view = memoryview(buf)
    if view.format != "B":
        view = view.cast("B")
    pos = 0
    end = len(view)
    while pos < end:
        header = read_header(view, pos, verify_crc)
        batch = _read_batch(view, pos, header, offset_base)
        if batch is None:
            batch = decode_batch(bytes(view[pos : pos + header.size]), 0, header, offset_base)
        yield from batch
        pos += header.size


def _reader(data: bytes | memoryview, pos: int, header: BatchHeader) -> tuple[bytes, int, DefaultRecordBatch]:
    """The batch's records behind the reader's own header, then the padding; the end of the records in
    that buffer; and a reader over it (the padding left out)."""
    if header.attributes & COMPRESSION_MASK:
        expanded, start, end = _expand_batch(data, pos, header)
        records = memoryview(expanded)[start + RECORD_BATCH_OVERHEAD : end]
    else:
        records = memoryview(data)[pos + RECORD_BATCH_OVERHEAD : pos + header.size]
    padded = b"".join((_READER_HEADER, _COUNT.pack(header.records_count), records, _PADDING))
    end = len(padded) - len(_PADDING)
    # The compiled class takes any buffer (PyObject_GetBuffer); a slice keeps the padding readable but
    # outside the batch.
    return padded, end, DefaultRecordBatch(memoryview(padded)[:end])


def _sizer() -> _Sizer:
    """``size_in_bytes`` of a builder holding one record with timestamp 0: it then sizes a record whose
    timestampDelta is the timestamp it is given (a fresh builder sizes every delta as 0)."""
    builder = DefaultRecordBatchBuilder(MAGIC, compression.NONE, 0, -1, -1, -1, _NO_LIMIT)
    builder.append(0, 0, None, None, _NO_HEADERS)
    size_in_bytes: _Sizer = builder.size_in_bytes
    return size_in_bytes


def _read_batch(
    data: bytes | memoryview, pos: int, header: BatchHeader, offset_base: int
) -> list[Record] | None:
    """The records of the batch at ``pos`` read by the compiled reader, or None if the reference must."""
    padded, end, reader = _reader(data, pos, header)
    size_in_bytes = _sizer()
    first_offset = offset_base + header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.attributes & LOG_APPEND_TIME else None
    new, set_offset, set_timestamp, set_key, set_value, set_headers = (
        _new,
        _set_offset,
        _set_timestamp,
        _set_key,
        _set_value,
        _set_headers,
    )
    out: list[Record] = []
    append = out.append
    previous = -1
    at = RECORD_BATCH_OVERHEAD  # where the current record starts in ``padded``
    try:
        for r in reader:
            delta = r.offset
            if delta <= previous:
                return None
            previous = delta
            timestamp = r.timestamp
            if not -_TIMESTAMP_DELTA_LIMIT <= timestamp < _TIMESTAMP_DELTA_LIMIT:
                return None
            key = r.key
            value = r.value
            pairs = r.headers
            size = size_in_bytes(delta, timestamp, key, value, pairs)
            if (key is None or value is None) and not _nulls_are_minus_one(
                padded, at + size, key, value, pairs
            ):
                return None
            at += size
            record = new(Record)
            set_offset(record, first_offset + delta)
            set_timestamp(record, base_timestamp + timestamp if append_time is None else append_time)
            set_key(record, key)
            set_value(record, value)
            if pairs:
                headers = _headers(pairs)
                if headers is None:
                    return None
                set_headers(record, headers)
            else:
                set_headers(record, ())
            append(record)
    except _READER_REFUSALS:
        return None
    if at != end or previous > header.last_offset_delta:
        return None
    return out


def _nulls_are_minus_one(
    padded: bytes,
    record_end: int,
    key: bytes | None,
    value: bytes | None,
    pairs: _Pairs,
) -> bool:
    """Whether the record ending at ``record_end`` stores its null key and null value as length -1.

    Positions come from canonical sizes (the key's length varint starts where the key, value and headers
    begin); they are right when the batch's sizes add up, which is checked after the last record, and
    inside the record either way.
    """
    field = record_end - _size_of(key, value, pairs)
    if key is None:
        if padded[field] != _NULL_LENGTH:
            return False
        field += 1
    else:
        field += _size_of(key, None, _NO_HEADERS) - 2  # the key's length varint and bytes
    return value is not None or padded[field] == _NULL_LENGTH


def _headers(pairs: _Pairs) -> tuple[Header, ...] | None:
    """The record's headers, or None if one has a null value (whose stored length is not checked here)."""
    out = []
    for key, value in pairs:
        if value is None:
            return None
        out.append(Header(key, value))
    return tuple(out)
