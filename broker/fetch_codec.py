"""Fetch (key 1, versions 4-12): the response encoder, written by hand.

Why by hand: in a Kafka catch-up read (bench/kafka_bench.py, fetch phase, local) the agent copied every
byte it served three times: the batches into a patched buffer, that into kafka-python's encode buffer, and
that buffer into the response bytes; with the generic encoding around them, a third of the agent's
profile samples. Here the answer is joined once, straight from the stored batches (views into the agent's
cache), with each batch's absolute base offset as a piece of its own in front of the rest of the batch:
the CRC does not cover the base offset, so nothing else changes. Only this hot path of Fetch is written
by hand; tests/unit/test_fetch_codec.py checks it byte for byte against kafka-python's FetchResponse at
every version.

Response, after the frame size (integers big-endian; "count" is int32, or from v12 an unsigned varint of
count + 1; strings as in broker/wire.py)::

    correlation_id     int32
    [v12: header tagged fields]
    throttle_time_ms   int32
    error_code         int16 (v7+)
    session_id         int32 (v7+)
    responses          count
      topic            string
      partitions       count
        partition_index     int32
        error_code          int16
        high_watermark      int64
        last_stable_offset  int64
        log_start_offset    int64 (v5+)
        aborted_transactions  nullable count (null for read_uncommitted), each:
          producer_id       int64
          first_offset      int64
          [v12: tagged fields]
        preferred_read_replica int32 (v11+): -1
        records             count of bytes, then the batches
        [v12: tagged fields: none (no diverging epoch, leader or snapshot to report)]
      [v12: tagged fields]
    [v12: tagged fields]

The last stable offset is the partition's (broker/handlers/fetch.py); the aborted transactions are
those of a read_committed answer's range (agents/txn_fetch.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from broker import wire

FLEXIBLE_FROM = 12
BASE_OFFSET_BYTES = 8  # a RecordBatch starts with its int64 base offset


@dataclass(slots=True)
class FetchedPartition:
    index: int
    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    # (stored batch, absolute base offset): the batch as stored, its first 8 bytes replaced on the wire.
    batches: Sequence[tuple[memoryview, int]] = field(default_factory=list)
    last_stable_offset: int = -1
    # (producer id, first offset) of each aborted transaction; None (null) for read_uncommitted.
    aborted: Sequence[tuple[int, int]] | None = None

    @property
    def size(self) -> int:
        return sum(len(batch) for batch, _ in self.batches)


def encode_response(
    correlation_id: int, version: int, topics: Sequence[tuple[str, Sequence[FetchedPartition]]]
) -> bytes:
    """The whole response frame, size included, joined once."""
    flexible = version >= FLEXIBLE_FROM
    tags = wire.NO_TAGS if flexible else b""
    null = b"\x00" if flexible else wire.I32.pack(-1)  # aborted_transactions of read_uncommitted
    parts: list[bytes | memoryview] = [b"", wire.I32.pack(correlation_id), tags, wire.I32.pack(0)]
    append = parts.append
    if version >= 7:
        append(b"\x00\x00\x00\x00\x00\x00")  # error_code 0, session_id 0: no fetch sessions
    append(wire.count(len(topics), flexible))
    for name, partitions in topics:
        append(wire.string(name, flexible))
        append(wire.count(len(partitions), flexible))
        for p in partitions:
            append(wire.I32.pack(p.index))
            append(wire.I16.pack(p.error_code))
            append(wire.I64.pack(p.high_watermark))
            append(wire.I64.pack(p.last_stable_offset))
            if version >= 5:
                append(wire.I64.pack(p.log_start_offset))
            if p.aborted is None:
                append(null)
            else:
                append(wire.count(len(p.aborted), flexible))
                for producer_id, first_offset in p.aborted:
                    append(wire.I64.pack(producer_id))
                    append(wire.I64.pack(first_offset))
                    append(tags)
            if version >= 11:
                append(wire.I32.pack(-1))  # preferred_read_replica: none
            append(wire.count(p.size, flexible))
            for batch, base in p.batches:
                append(wire.I64.pack(base))
                append(batch[BASE_OFFSET_BYTES:])
            append(tags)
        append(tags)
    append(tags)
    size = sum(len(part) for part in parts)
    parts[0] = wire.I32.pack(size)
    return b"".join(parts)
