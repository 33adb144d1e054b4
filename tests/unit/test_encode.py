"""RequestEncoder: the record rules that need a topic's config, the same for every front door."""

from __future__ import annotations

import random

import pytest

from agents.buffer import ProduceRequest
from agents.encode import MAX_TIMESTAMP_MS, ProduceRecord, RequestEncoder
from storage import records
from storage.errors import InvalidPayload, InvalidTimestamp, RecordTooLarge, UnknownPartition
from storage.metadata.base import TopicInfo
from storage.partitioner import partition_for_key
from storage.topic_config import HOUR_MS, TopicConfig

NOW = 1_700_000_000_000
INFO = TopicInfo("t", 4, {}, 0)


def encode(recs: list[ProduceRecord], **overrides: str) -> ProduceRequest:
    config = TopicConfig.from_overrides(overrides)
    return RequestEncoder(random.Random(1)).encode(INFO, config, recs, NOW)


def test_one_batch_per_partition_and_order_per_record() -> None:
    recs = [ProduceRecord(b"k1", b"a"), ProduceRecord(None, b"b", partition=3), ProduceRecord(b"k1", b"c")]
    req = encode(recs)
    p = partition_for_key(b"k1", 4)
    assert [(b.partition, b.record_count) for b in req.batches] == [(p, 2), (3, 1)]
    assert req.order == [(0, 0), (1, 0), (0, 1)]
    decoded = list(records.decode_records(req.batches[0].data))
    assert [(r.offset, r.value, r.timestamp) for r in decoded] == [(0, b"a", NOW), (1, b"c", NOW)]


def test_null_keys_go_round_robin() -> None:
    req = encode([ProduceRecord(None, b"v") for _ in range(8)])
    assert sorted(b.partition for b in req.batches) == [0, 1, 2, 3]
    assert all(b.record_count == 2 for b in req.batches)


def test_rules_that_need_the_config() -> None:
    with pytest.raises(UnknownPartition):
        encode([ProduceRecord(None, b"v", partition=4)])
    with pytest.raises(InvalidPayload):
        encode([ProduceRecord(None, b"v")], **{"cleanup.policy": "compact"})
    with pytest.raises(RecordTooLarge):
        encode([ProduceRecord(b"k", b"v" * 200)], **{"max.message.bytes": "100"})


@pytest.mark.parametrize(
    ("timestamp", "overrides", "ok"),
    [
        (0, {}, True),  # any age by default (before.max.ms = Long.MAX)
        (NOW + HOUR_MS, {}, True),  # up to an hour ahead by default (Kafka 4.0)
        (NOW + HOUR_MS + 1, {}, False),
        (MAX_TIMESTAMP_MS + 1, {"message.timestamp.after.max.ms": str(2**63 - 1)}, False),
        (-1, {}, False),
        (NOW - 1000, {"message.timestamp.before.max.ms": "1000"}, True),
        (NOW - 1001, {"message.timestamp.before.max.ms": "1000"}, False),
        (MAX_TIMESTAMP_MS, {"message.timestamp.after.max.ms": str(2**63 - 1)}, True),
    ],
)
def test_timestamps(timestamp: int, overrides: dict[str, str], ok: bool) -> None:
    recs = [ProduceRecord(b"k", b"v", timestamp=timestamp)]
    if ok:
        assert (
            next(iter(records.decode_records(encode(recs, **overrides).batches[0].data))).timestamp
            == timestamp
        )
    else:
        with pytest.raises(InvalidTimestamp):
            encode(recs, **overrides)
