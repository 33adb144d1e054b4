"""The pure-Python reference decoder of RecordBatch v2 records: the authority the compiled codec
(``storage/records/compiled.py``) and the C scans are tested against, with the same records and errors.

The byte layout is drawn in ``storage/records/codec.py``. Every read stays inside its batch: a length or
varint that runs past it, a count that disagrees with the records, or bytes left over is ``CodecError``.
``decode_batch`` and the reference encoder's ``encode_batch_reference`` are the product's two functions
over 80 lines, on purpose: each is one loop that walks a record's fields in layout order, every read
bounded by its batch, so the layout and its checks read top to bottom in one place.
"""

from __future__ import annotations

from collections.abc import Iterator

from storage.errors import CodecError
from storage.records.codec import (
    _MIN_RECORD_SIZE,
    COMPRESSION_MASK,
    LOG_APPEND_TIME,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Header,
    Record,
    _as_bytes,
    _expand_batch,
    _varint_tail,
    read_header,
)


def decode_headers(data: bytes, pos: int, end: int, count: int) -> tuple[tuple[Header, ...], int]:
    if count < 0 or count * 2 > end - pos:
        raise CodecError(f"record declares an impossible header count {count}")
    headers: list[Header] = []
    for _ in range(count):
        b = data[pos]
        pos += 1
        n, pos = (b, pos) if b < 0x80 else _varint_tail(data, pos, b, 32)
        key_len = (n >> 1) ^ -(n & 1)
        if key_len < 0 or pos + key_len > end:
            raise CodecError(f"record header key length {key_len} is invalid")
        try:
            key = data[pos : pos + key_len].decode("utf-8")
        except UnicodeDecodeError:
            raise CodecError("record header key is not valid utf-8") from None
        pos += key_len
        b = data[pos]
        pos += 1
        n, pos = (b, pos) if b < 0x80 else _varint_tail(data, pos, b, 32)
        value_len = (n >> 1) ^ -(n & 1)
        if value_len < 0:
            if value_len != -1:
                raise CodecError(f"record header value length {value_len} is invalid")
            headers.append(Header(key, None))
            continue
        if pos + value_len > end:
            raise CodecError(f"record header value length {value_len} runs past the record")
        headers.append(Header(key, data[pos : pos + value_len]))
        pos += value_len
    return tuple(headers), pos


def decode_batch(data: bytes, pos: int, header: BatchHeader, offset_base: int) -> list[Record]:
    """Decode the records of the batch whose header is at ``pos``; every read stays inside the batch."""
    if header.attributes & COMPRESSION_MASK:
        data, pos, end = _expand_batch(data, pos, header)
    else:  # inline: no call per uncompressed batch
        end = pos + header.size
    pos += RECORD_BATCH_OVERHEAD
    first_offset = offset_base + header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.attributes & LOG_APPEND_TIME
    last_delta = header.last_offset_delta
    previous_delta = -1
    out: list[Record] = []
    append = out.append
    tail = _varint_tail
    no_headers: tuple[Header, ...] = ()
    try:
        for _ in range(header.records_count):
            if pos >= end:
                raise CodecError("record batch holds fewer records than its recordsCount")
            b = data[pos]
            pos += 1
            n, pos = (b, pos) if b < 0x80 else tail(data, pos, b, 32)
            record_end = pos + ((n >> 1) ^ -(n & 1))
            if record_end > end or record_end - pos < _MIN_RECORD_SIZE - 1:
                raise CodecError("record length runs past its batch or is too small")
            pos += 1  # record attributes: unused by Kafka, ignored on read
            b = data[pos]
            pos += 1
            n, pos = (b, pos) if b < 0x80 else tail(data, pos, b, 64)
            timestamp_delta = (n >> 1) ^ -(n & 1)
            b = data[pos]
            pos += 1
            n, pos = (b, pos) if b < 0x80 else tail(data, pos, b, 32)
            offset_delta = (n >> 1) ^ -(n & 1)
            if offset_delta <= previous_delta or offset_delta > last_delta:
                raise CodecError(f"offset delta {offset_delta} is out of order or past lastOffsetDelta")
            previous_delta = offset_delta
            b = data[pos]
            pos += 1
            n, pos = (b, pos) if b < 0x80 else tail(data, pos, b, 32)
            length = (n >> 1) ^ -(n & 1)
            key: bytes | None
            if length >= 0:
                if pos + length > record_end:
                    raise CodecError("record key runs past its record")
                key = data[pos : pos + length]
                pos += length
            elif length == -1:
                key = None
            else:
                raise CodecError(f"record key length {length} is invalid")
            b = data[pos]
            pos += 1
            n, pos = (b, pos) if b < 0x80 else tail(data, pos, b, 32)
            length = (n >> 1) ^ -(n & 1)
            value: bytes | None
            if length >= 0:
                if pos + length > record_end:
                    raise CodecError("record value runs past its record")
                value = data[pos : pos + length]
                pos += length
            elif length == -1:
                value = None
            else:
                raise CodecError(f"record value length {length} is invalid")
            b = data[pos]
            pos += 1
            if b == 0:
                headers = no_headers
            else:
                n, pos = (b, pos) if b < 0x80 else tail(data, pos, b, 32)
                headers, pos = decode_headers(data, pos, record_end, (n >> 1) ^ -(n & 1))
            if pos != record_end:
                raise CodecError("record length does not match its fields")
            append(
                Record(
                    first_offset + offset_delta,
                    header.max_timestamp if log_append_time else base_timestamp + timestamp_delta,
                    key,
                    value,
                    headers,
                )
            )
    except IndexError:
        # Only reachable when a field runs past the end of the whole buffer; overruns inside the buffer
        # are caught by the per-record length checks above.
        raise CodecError("record runs past the end of the buffer") from None
    if pos != end:
        raise CodecError("record batch has bytes left after its recordsCount records")
    return out


def decode_records_reference(
    buf: bytes | bytearray | memoryview, *, offset_base: int = 0, verify_crc: bool = True
) -> Iterator[Record]:
    """The pure-Python reference of ``storage.records.decode_records`` (compiled, ``record_compiled.py``):
    every record of every batch in ``buf``, in order.

    A record's offset is ``offset_base + baseOffset + offsetDelta``: pass the chunk's absolute base offset
    from the metadata store as ``offset_base`` to read a Strata chunk whose batches are relative.
    Its timestamp is ``baseTimestamp + timestampDelta`` (``maxTimestamp`` for LogAppendTime batches).
    """
    data = _as_bytes(buf)
    pos = 0
    end = len(data)
    while pos < end:
        header = read_header(data, pos, verify_crc)
        yield from decode_batch(data, pos, header, offset_base)
        pos += header.size
