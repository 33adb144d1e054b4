"""A producer's batch checked record by record before it is stored, as Kafka's broker checks it.

Kafka's LogValidator walks every record of every batch a client appends; a batch that passes only its CRC
could still hold records no reader can decode, and a stored one would then stop every reader of its
partition at that offset. So before a batch is stored, ``check_batch`` walks all its records (decompressed
once, within ``compression.output_limit``, when the batch is compressed) with the C loop of
``storage/_recordcheck.c``, which releases the GIL while it reads:

- every record parses by the reference decoder's rules (storage/records/decode.py): lengths and varints
  inside the record and the batch, offset deltas exactly 0..n-1, key and value lengths -1 or inside the
  record, header names UTF-8, each record ending at its length, no bytes after the last one;
- on a compacted topic, every record has a key;
- in a compressed batch, no record's body (the bytes after its length varint) is larger than the topic's
  ``max.decompressed.message.bytes``, as Kafka 4.4 bounds each record it reads from a decompressing
  stream (``DefaultRecord.readFrom``). Kafka does not bound the records of an uncompressed batch, nor the
  batch's decompressed total: the bound on that is ``compression.output_limit``, the same for every
  topic, which keeps a batch's memory in check.

The header's maxTimestamp and timestamp type are not the producer's to get right: as Kafka's broker
(``LogValidator`` calls ``setMaxTimestamp`` on every batch it appends), the caller writes them again when
they differ from what the records say and the topic's ``message.timestamp.type`` (``Checked`` gives the
largest record timestamp; ``records.set_max_timestamp`` rewrites the header).

A failure is ``InvalidRecord`` (Kafka's INVALID_RECORD), naming the record's index in its batch where one
record is at fault; a stream that does not decompress, or would pass the bound, is ``CodecError`` (Kafka's
CORRUPT_MESSAGE). The batch's framing (magic, CRC, lastOffsetDelta = count - 1) is checked by the caller
first (``read_header``).

``check_stored`` is the same walk for a batch already stored, on the Kafka door's fetch path, which serves
batches without decoding them: an uncompressed batch whose records do not parse (stored by a version that
checked less, or damaged with its CRC intact) is ``CodecError`` there, so the consumer gets an error, not
bytes its client would skip in silence. Compressed batches are not walked at fetch: that would cost a
decompression per read, and their record framing was checked at produce by every version.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage._recordcheck import check_records
from storage.errors import CodecError, InvalidRecord
from storage.records import compression
from storage.records.codec import (
    COMPRESSION_MASK,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    _varint_tail,
)

# check_records' verdicts (storage/_recordcheck.c).
_OK, _MALFORMED, _TRAILING, _NO_KEY, _MAX_TIMESTAMP = range(5)


@dataclass(frozen=True, slots=True)
class Checked:
    """What a valid batch's records say: their smallest and largest timestamps, and, for a compressed
    batch, its records section decompressed (so that re-compressing it does not decompress it again)."""

    min_timestamp: int
    max_timestamp: int
    records: bytes | None


def check_batch(
    batch: bytes | memoryview, header: BatchHeader, compacted: bool, max_record_bytes: int | None = None
) -> Checked:
    """Check every record of ``batch`` (one whole batch, its header read by ``read_header``).
    ``max_record_bytes``: the topic's ``max.decompressed.message.bytes`` (None: no cap)."""
    codec = header.attributes & COMPRESSION_MASK
    expanded: bytes | None = None
    if codec:
        stored = memoryview(batch)[RECORD_BATCH_OVERHEAD : header.size]
        expanded = compression.decompress(codec, stored, compression.output_limit(len(stored)))
        data: bytes | memoryview = expanded
        start, end = 0, len(expanded)
    else:
        data, start, end = batch, RECORD_BATCH_OVERHEAD, header.size
    verdict, index, smallest, largest = check_records(
        data,
        start,
        end,
        header.records_count,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        compacted,
    )
    # A wrong maxTimestamp is found only after every record passed: the caller corrects the header.
    if verdict not in (_OK, _MAX_TIMESTAMP):
        raise _refusal(verdict, index, header)
    # A record's body is shorter than the records section holding it, so only a section larger than the
    # cap can hold a record over it: the walk runs only then (never at Kafka's default cap of 2 GiB).
    if expanded is not None and max_record_bytes is not None and len(expanded) > max_record_bytes:
        _check_record_sizes(expanded, header.records_count, max_record_bytes)
    return Checked(smallest, largest, expanded)


def _check_record_sizes(records: bytes, count: int, cap: int) -> None:
    """``InvalidRecord`` for the first of ``count`` records whose body is over ``cap`` bytes. The records
    parsed (``check_records``), so every length varint is canonical and inside the section. Kafka refuses
    the batch with INVALID_RECORD and names no record (no ``record_errors``), and so does this."""
    pos = 0
    for index in range(count):
        first = records[pos]
        pos += 1
        n, pos = (first, pos) if first < 0x80 else _varint_tail(records, pos, first, 32)
        length = (n >> 1) ^ -(n & 1)
        if length > cap:
            raise InvalidRecord(
                f"record {index} is {length} bytes decompressed, more than max.decompressed.message.bytes"
                f"={cap}",
                None,
            )
        pos += length


def _refusal(verdict: int, index: int, header: BatchHeader) -> InvalidRecord:
    if verdict == _NO_KEY:
        return InvalidRecord(f"record {index} has no key; the topic is compacted", index)
    if verdict == _MALFORMED:
        return InvalidRecord(
            f"record {index} of {header.records_count} is malformed: a length, varint, offset delta or header"
            " runs outside the record or its batch, or its offset delta is out of order",
            index,
        )
    assert verdict == _TRAILING, verdict
    return InvalidRecord(
        f"the batch has bytes after its {header.records_count} records (recordsCount is wrong)", None
    )


def check_stored(batch: bytes | memoryview, header: BatchHeader, deep: bool = False) -> None:
    """``CodecError`` if the stored ``batch`` holds records no reader can decode. A compressed batch is
    walked only when ``deep`` (a scrub), after one bounded decompression."""
    codec = header.attributes & COMPRESSION_MASK
    if codec and not deep:
        return
    if codec:
        stored = memoryview(batch)[RECORD_BATCH_OVERHEAD : header.size]
        data: bytes | memoryview = compression.decompress(
            codec, stored, compression.output_limit(len(stored))
        )
        start, end = 0, len(data)
    else:
        data, start, end = batch, RECORD_BATCH_OVERHEAD, header.size
    verdict, index, _, _ = check_records(
        data,
        start,
        end,
        header.records_count,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        False,
    )
    if verdict in (_MALFORMED, _TRAILING):
        raise CodecError(_refusal(verdict, index, header).message)
