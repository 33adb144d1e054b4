"""Turning front-door records into a ``ProduceRequest``: validate, partition, encode.

Used by front doors whose clients send individual records (HTTP, the demo). Kafka clients send batches that
are already partitioned and encoded, and skip this module. The rules that need the topic's configuration
live here, so every front door applies them identically:
- ``max.message.bytes`` per record (with Kafka's per-record framing overhead);
- a compacted topic needs a key on every record;
- timestamps: within what every consumer can represent (``MAX_TIMESTAMP_MS``: Python's ``datetime`` and
  Spark's microsecond ``TimestampType`` both stop near there), and, on a CreateTime topic, within Kafka's
  ``message.timestamp.before.max.ms`` / ``message.timestamp.after.max.ms`` of the agent's clock;
- ``compression.type``: batches are written in the topic's codec (uncompressed for ``producer``), at its
  ``compression.<codec>.level``;
- ``message.timestamp.type=LogAppendTime``: each batch is written with attributes bit 3 set and the
  agent's time as maxTimestamp, which every reader gives each of its records; a record's own timestamp (the
  one given, or the agent's time) is written as Kafka leaves a producer's, and is not checked against the
  window, as Kafka checks it for CreateTime only;
- an explicit partition must exist; otherwise a key picks the partition with Kafka's murmur2 partitioner,
  and a null key goes round robin.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents._encode import assemble_batches, encode_records
from agents.buffer import PartitionBatch, ProduceRequest
from agents.offsets import order_of
from storage import records
from storage.errors import InvalidPayload, InvalidTimestamp, RecordTooLarge, UnknownPartition
from storage.metadata.rows import TopicInfo
from storage.partitioner import partition_for_key
from storage.topic_config import LONG_MAX, TopicConfig

# Per-record framing overhead counted against max.message.bytes (Kafka counts the batch framing too).
RECORD_OVERHEAD = 70
# 9999-12-31T23:59:59.999Z: the last millisecond Python's datetime (and so PySpark's collect) can hold.
# Spark's TimestampType (microseconds in a long) ends near 9.2e15 ms; a record past that made every Spark
# read covering it fail with OverflowError.
MAX_TIMESTAMP_MS = 253_402_300_799_999


@dataclass(frozen=True, slots=True)
class ProduceRecord:
    key: bytes | None
    value: bytes | None
    headers: tuple[records.Header, ...] = ()
    partition: int | None = None
    timestamp: int | None = None


def check_timestamp(index: int, ts: int, now_ms: int, config: TopicConfig) -> None:
    """Kafka's CreateTime checks (LogValidator.validateTimestamp), plus the representable range. A
    LogAppendTime topic checks the range only: Kafka skips the window there, since the append time, not
    the record's, is what readers see."""
    if not 0 <= ts <= MAX_TIMESTAMP_MS:
        raise InvalidTimestamp(
            f"record {index} has timestamp {ts}; timestamps must be between 0 and {MAX_TIMESTAMP_MS} "
            "(9999-12-31T23:59:59.999Z)"
        )
    if config.log_append_time:
        return
    if now_ms - ts > config.message_timestamp_before_max_ms:
        raise InvalidTimestamp(
            f"record {index} has timestamp {ts}, more than message.timestamp.before.max.ms="
            f"{config.message_timestamp_before_max_ms} before the agent's time {now_ms}"
        )
    if ts - now_ms > config.message_timestamp_after_max_ms:
        raise InvalidTimestamp(
            f"record {index} has timestamp {ts}, more than message.timestamp.after.max.ms="
            f"{config.message_timestamp_after_max_ms} after the agent's time {now_ms}"
        )


class RequestEncoder:
    """Validates, partitions and encodes records into one RecordBatch per partition they touch.

    Holds the round-robin position per topic for null keys; one encoder per agent.
    """

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._round_robin: dict[str, int] = {}

    def encode(
        self, info: TopicInfo, config: TopicConfig, recs: Sequence[ProduceRecord], now_ms: int
    ) -> ProduceRequest:
        by_partition: dict[int, list[records.Record]] = {}
        order: list[tuple[int, int]] = []  # (partition, index within its batch), in request order
        for i, rec in enumerate(recs):
            size = RECORD_OVERHEAD + len(rec.key or b"") + len(rec.value or b"")
            size += sum(len(h.key) + len(h.value or b"") for h in rec.headers)
            if size > config.max_message_bytes:
                raise RecordTooLarge(
                    f"record {i} is {size} bytes, more than max.message.bytes={config.max_message_bytes}"
                )
            if rec.key is None and config.compacted:
                raise InvalidPayload(f"record {i} has no key; topic {info.name!r} is compacted")
            ts = now_ms
            if rec.timestamp is not None:
                check_timestamp(i, rec.timestamp, now_ms, config)
                ts = rec.timestamp
            partition = self.partition(info, rec)
            batch = by_partition.setdefault(partition, [])
            order.append((partition, len(batch)))
            batch.append(records.Record(len(batch), ts, rec.key, rec.value, rec.headers))
        batches: list[PartitionBatch] = []
        batch_index: dict[int, int] = {}
        append_time = now_ms if config.log_append_time else None
        # compression.type "producer" (None) stores what this producer sends: uncompressed.
        codec = config.compression_codec or 0
        level = config.compression_level(codec)
        for partition, batch_records in by_partition.items():
            batch_index[partition] = len(batches)
            timestamps = [r.timestamp for r in batch_records]
            batches.append(
                PartitionBatch(
                    info.name,
                    partition,
                    records.encode_batch(
                        batch_records, codec=codec, log_append_time=append_time, level=level
                    ),
                    len(batch_records),
                    # The chunk index's times: what readers see, the append time on a LogAppendTime topic.
                    min(timestamps) if append_time is None else append_time,
                    max(timestamps) if append_time is None else append_time,
                )
            )
        return ProduceRequest(
            info.name, _contiguous(batches), order_of((batch_index[p], j) for p, j in order)
        )

    def encode_text(
        self, info: TopicInfo, config: TopicConfig, items: list[Any], now_ms: int
    ) -> ProduceRequest | None:
        """``encode`` for records given as text: dicts with optional "key" and "value" (str or None, sent as
        their UTF-8 bytes), "headers" (a list of {"name", "value"}), "partition" and "timestamp", as the
        HTTP door parses them. One C loop (``agents/_encode.c``) applies ``encode``'s rules and writes the
        same batches; None when any record breaks a rule or needs more than that loop handles, and the
        caller then encodes through ``encode``, which says why."""
        if info.name not in self._round_robin:
            # The start ``partition`` would draw for the topic's first null key, drawn once either way.
            self._round_robin[info.name] = self.rng.randrange(info.partitions)
        start = self._round_robin[info.name]
        append_time = now_ms if config.log_append_time else None
        # A LogAppendTime topic has no window: bounds no timestamp can pass keep the loop's range check
        # only (0..MAX_TIMESTAMP_MS, so its subtractions from now_ms cannot overflow).
        before_max = config.message_timestamp_before_max_ms if append_time is None else LONG_MAX
        after_max = config.message_timestamp_after_max_ms if append_time is None else LONG_MAX
        encoded = encode_records(
            items,
            info.partitions,
            config.compacted,
            config.max_message_bytes,
            now_ms,
            before_max,
            after_max,
            MAX_TIMESTAMP_MS,
            start,
        )
        if encoded is None:
            return None
        parts, pairs, null_keys = encoded
        self._round_robin[info.name] = start + null_keys
        codec = config.compression_codec or 0
        level = config.compression_level(codec)
        # ``pairs`` is already an order (agents/offsets.py): no Python object per record.
        if not codec and append_time is None:
            # Whole batches written in C, side by side in one buffer as _contiguous would leave them.
            joined = memoryview(assemble_batches(parts))
            batches = []
            position = 0
            for partition, section, count, _first, lowest, highest in parts:
                end = position + records.RECORD_BATCH_OVERHEAD + len(section)
                batches.append(
                    PartitionBatch(info.name, partition, joined[position:end], count, lowest, highest)
                )
                position = end
            return ProduceRequest(info.name, batches, pairs)
        # The C loop writes CreateTime headers only (assemble_batches), so a LogAppendTime topic's batches
        # take their headers here, from the same record sections.
        batches = [
            PartitionBatch(
                info.name,
                partition,
                records.batch_of_records(section, count, first, highest, codec, append_time, level),
                count,
                lowest if append_time is None else append_time,
                highest if append_time is None else append_time,
            )
            for partition, section, count, first, lowest, highest in parts
        ]
        return ProduceRequest(info.name, _contiguous(batches), pairs)

    def partition(self, info: TopicInfo, rec: ProduceRecord) -> int:
        if rec.partition is not None:
            if not 0 <= rec.partition < info.partitions:
                raise UnknownPartition(
                    f"partition {rec.partition} does not exist: topic {info.name!r} has "
                    f"partitions 0..{info.partitions - 1}"
                )
            return rec.partition
        if rec.key is not None:
            return partition_for_key(rec.key, info.partitions)
        # Null keys are spread round-robin, as Kafka's clients did before sticky partitioning.
        n = self._round_robin.get(info.name, self.rng.randrange(info.partitions))
        self._round_robin[info.name] = n + 1
        return n % info.partitions


def _contiguous(batches: list[PartitionBatch]) -> list[PartitionBatch]:
    """``batches`` moved into one buffer, each a view of its part.

    A request waits in the produce buffer until its flush joins every request's batches into the file
    (agents/layout.py), and only then are its batches freed. As one allocation per request, that memory
    goes back to the system when it is freed (glibc maps a block over its 128 KiB threshold on its own:
    strata/server.py). As one allocation per batch (a request of 1,000 records over 32 partitions makes 32 of
    about 33 KiB), it came from the heap, whose pages a flush's worth of freed batches left resident and
    fragmented: the HTTP overload benchmark on S3 peaked higher (docs/benchmarks.md).
    """
    if len(batches) < 2:
        return batches
    joined = memoryview(b"".join([batch.data for batch in batches]))
    position = 0
    for batch in batches:
        size = len(batch.data)
        batch.data = joined[position : position + size]
        position += size
    return batches
