"""RequestEncoder: the record rules that need a topic's config, the same for every front door."""

from __future__ import annotations

import random
from typing import Any

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents import _encode
from agents.buffer import ProduceRequest
from agents.encode import MAX_TIMESTAMP_MS, ProduceRecord, RequestEncoder
from agents.offsets import order_pairs
from storage import records
from storage.errors import InvalidPayload, InvalidTimestamp, RecordTooLarge, StrataError, UnknownPartition
from storage.metadata.rows import TopicInfo
from storage.partitioner import partition_for_key
from storage.topic_config import HOUR_MS, TopicConfig
from tests.examples import examples

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
    assert order_pairs(req.order) == [(0, 0), (1, 0), (0, 1)]
    decoded = list(records.decode_records(req.batches[0].data))
    assert [(r.offset, r.value, r.timestamp) for r in decoded] == [(0, b"a", NOW), (1, b"c", NOW)]


def test_a_requests_batches_share_one_buffer() -> None:
    """One allocation per request, whichever encoder made it (agents/encode.py, ``_contiguous``): a buffer
    over glibc's mmap threshold goes back to the system when its flush frees it, where a batch each left the
    heap fragmented."""
    items = [{"key": f"k{i}", "value": "v" * 100} for i in range(64)]
    encoder = RequestEncoder(random.Random(1))
    config = TopicConfig.from_overrides({})
    fast = encoder.encode_text(INFO, config, items, NOW)
    assert fast is not None
    slow = encoder.encode(INFO, config, _as_records(items), NOW)
    for req in (fast, slow):
        assert len(req.batches) == 4
        views = [b.data for b in req.batches if isinstance(b.data, memoryview)]
        assert len(views) == len(req.batches)
        assert len({id(v.obj) for v in views}) == 1
        assert sum(len(v) for v in views) == len(views[0].obj)
        for b in req.batches:
            assert [r.key for r in records.decode_records(b.data)] == [
                f"k{i}".encode() for i in range(64) if partition_for_key(f"k{i}".encode(), 4) == b.partition
            ]


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


# --- encode_text: the C loop against encode -----------------------------------------------------------

_text = st.none() | st.text(max_size=12) | st.sampled_from(["", "ü✓𝄞", '"\\\n', "x" * 300])
_item = st.fixed_dictionaries(
    {},
    optional={
        "key": _text,
        "value": _text,
        "headers": st.lists(
            st.fixed_dictionaries({"name": st.text(max_size=5)}, optional={"value": _text}), max_size=3
        ),
        "partition": st.none() | st.integers(-1, 5),
        "timestamp": st.none()
        | st.sampled_from(
            [0, NOW, NOW - 2 * HOUR_MS, NOW + 2 * HOUR_MS, MAX_TIMESTAMP_MS, MAX_TIMESTAMP_MS + 1]
        )
        | st.integers(0, 2**40),
    },
)
_configs = st.sampled_from(
    [
        {},
        {"cleanup.policy": "compact"},
        {"max.message.bytes": "400"},
        {"message.timestamp.before.max.ms": str(HOUR_MS), "message.timestamp.after.max.ms": str(HOUR_MS)},
        {"compression.type": "lz4"},
        {"compression.type": "gzip"},
    ]
)


def _as_records(items: list[dict[str, Any]]) -> list[ProduceRecord]:
    def raw(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    return [
        ProduceRecord(
            raw(i.get("key")),
            raw(i.get("value")),
            tuple(records.Header(h["name"], raw(h.get("value"))) for h in i.get("headers", [])),
            i.get("partition"),
            i.get("timestamp"),
        )
        for i in items
    ]


def _shape(req: ProduceRequest) -> object:
    return (
        req.topic,
        [(b.partition, bytes(b.data), b.record_count, b.min_timestamp, b.max_timestamp) for b in req.batches],
        req.order,
    )


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_item, min_size=1, max_size=12), _configs, st.integers(0, 2**20))
def test_encode_text_is_encode(items: list[dict[str, Any]], overrides: dict[str, str], seed: int) -> None:
    """The same batches (byte for byte), order and round-robin positions, request after request; declined
    exactly where encode refuses."""
    config = TopicConfig.from_overrides(overrides)
    fast, slow = RequestEncoder(random.Random(seed)), RequestEncoder(random.Random(seed))
    for request in (items, [{"value": "x"}, {"value": "y"}]):  # the second: null keys continue the same
        try:
            expected: object = _shape(slow.encode(INFO, config, _as_records(request), NOW))
        except StrataError:
            expected = None
        got = fast.encode_text(INFO, config, request, NOW)
        if expected is None:
            assert got is None
            # What the route does next: the same encoder encodes the records the slow way.
            with pytest.raises(StrataError):
                fast.encode(INFO, config, _as_records(request), NOW)
        else:
            assert got is not None
            assert _shape(got) == expected


def test_encode_text_declines_what_it_does_not_handle() -> None:
    config = TopicConfig.from_overrides({})
    encoder = RequestEncoder(random.Random(1))
    assert encoder.encode_text(INFO, config, [{"value": "\ud800"}], NOW) is None  # no UTF-8 form
    assert encoder.encode_text(INFO, config, [{"value": b"x"}], NOW) is None  # not text
    assert encoder.encode_text(INFO, config, [{"partition": 2**70}], NOW) is None


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=300), st.booleans())
def test_the_c_crc32c_is_the_packages(data: bytes, portable: bool) -> None:
    """assemble_batches' CRC-32C (storage/_crc32c.h), the instruction's and the table's, against crc32c."""
    assert _encode.crc32c(data, portable) == crc32c.crc32c(data)
