"""The produce path's fast check (storage/_recordcheck.c ``plain_batches``, taken by ``check_batches`` for
batches stored exactly as sent) against its careful path: for any bytes and any topic config, the same
batches or the same refusal. And ``has_compressed`` against the header walk it replaced."""

from __future__ import annotations

import struct
from typing import Any

from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.batches import BatchRejected, check_batches, has_compressed
from storage._recordcheck import plain_batches
from storage.errors import StrataError
from storage.records.codec import RECORD_BATCH_OVERHEAD
from storage.topic_config import TopicConfig
from tests.examples import examples
from tests.unit.test_records import zz

NOW = 1_700_000_000_000


def _record(delta: int, ts_delta: int, key: bytes | None, value: bytes) -> bytes:
    key_part = zz(-1) if key is None else zz(len(key)) + key
    body = b"\x00" + zz(ts_delta) + zz(delta) + key_part + zz(len(value)) + value + zz(0)
    return zz(len(body)) + body


def _batch(
    records: bytes,
    *,
    count: int,
    last_offset_delta: int,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    producer: tuple[int, int, int],
    crc_ok: bool = True,
) -> bytes:
    producer_id, epoch, sequence = producer
    covered = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            epoch,
            sequence,
            count,
        )
        + records
    )
    crc = crc32c(covered) if crc_ok else crc32c(covered) ^ 1
    return struct.pack(">qiibI", 0, 9 + len(covered), -1, 2, crc) + covered


FAULTS = (
    "count",  # recordsCount one more than the records
    "delta",  # lastOffsetDelta not count - 1
    "max_timestamp",  # maxTimestamp not the largest record timestamp
    "crc",
    "epoch",  # a producer id with epoch -1
    "sequence",  # a producer id with sequence -1
    "transactional without producer",
)


@st.composite
def producer_batches(draw: st.DrawFn) -> bytes:
    """A batch as a producer would send it: idempotent or not, transactional or not, sometimes with the
    LogAppendTime, control or a codec bit set, and half the time with one of ``FAULTS``."""
    n = draw(st.integers(1, 4))
    base = draw(st.sampled_from([NOW, NOW, NOW - 10, NOW + 10, 0, NOW - 10**9]))
    ts_deltas = draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
    keys = draw(st.lists(st.sampled_from([None, b"", b"k", b"key"]), min_size=n, max_size=n))
    records = b"".join(_record(i, ts_deltas[i], keys[i], b"v" * i) for i in range(n))
    producer = draw(st.sampled_from([(-1, -1, -1), (7, 0, 0), (7, 2, 41), (-5, 0, 0)]))
    attributes = draw(st.sampled_from([0, 0, 0, 0, 0, 0x10, 0x08, 0x20, 0x01, 0x03]))
    if attributes & 0x10 and producer[0] < 0:
        producer = (9, 0, 0)
    fault = draw(st.sampled_from((None,) * len(FAULTS) + FAULTS))
    count = n + 1 if fault == "count" else n
    delta = n if fault == "delta" else count - 1
    largest = base + max(ts_deltas) + (1 if fault == "max_timestamp" else 0)
    if fault == "epoch":
        producer = (7, -1, 3)
    elif fault == "sequence":
        producer = (7, 0, -1)
    elif fault == "transactional without producer":
        producer, attributes = (-1, -1, -1), attributes | 0x10
    return _batch(
        records,
        count=count,
        last_offset_delta=delta,
        attributes=attributes,
        base_timestamp=base,
        max_timestamp=largest,
        producer=producer,
        crc_ok=fault != "crc",
    )


@st.composite
def partition_bytes(draw: st.DrawFn) -> bytes:
    """One to three batches, sometimes cut short, sometimes with a byte changed (its CRC then kept or
    made again)."""
    data = bytearray(b"".join(draw(st.lists(producer_batches(), min_size=1, max_size=3))))
    # Hypothesis favours 0, so the rarer cases are the other numbers.
    if draw(st.integers(0, 9)) == 5:
        data = data[: draw(st.integers(1, len(data) - 1))]
    if draw(st.integers(0, 9)) == 5:
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
        if draw(st.booleans()) and len(data) >= RECORD_BATCH_OVERHEAD:
            data[17:21] = struct.pack(">I", crc32c(bytes(data[21:])))
    return bytes(data)


configs = st.builds(
    lambda compacted, max_bytes, before, after: TopicConfig.from_overrides(
        {
            "cleanup.policy": "compact" if compacted else "delete",
            "max.message.bytes": str(max_bytes),
            "message.timestamp.before.max.ms": str(before),
            "message.timestamp.after.max.ms": str(after),
        }
    ),
    st.booleans(),
    st.sampled_from([1_048_588, 1_048_588, 1_048_588, 100, 150]),
    st.sampled_from([9_223_372_036_854_775_807, 9_223_372_036_854_775_807, 1000, 20]),
    st.sampled_from([9_223_372_036_854_775_807, 3_600_000, 3_600_000, 20]),
)


def _no_schema(*_: Any) -> None:
    """A schema check that passes everything: with one, ``check_batches`` takes its careful path."""


def _outcome(data: bytes, config: TopicConfig, careful: bool) -> Any:
    try:
        batches = check_batches("t", 3, memoryview(data), config, NOW, True, _no_schema if careful else None)
    except BatchRejected as exc:
        return ("rejected", exc.code, exc.message, exc.record_errors)
    except StrataError as exc:
        return (type(exc).__name__, exc.message)
    return [
        (
            b.topic,
            b.partition,
            bytes(b.data),
            b.record_count,
            b.min_timestamp,
            b.max_timestamp,
            b.producer_id,
            b.producer_epoch,
            b.base_sequence,
            b.transactional,
        )
        for b in batches
    ]


@given(partition_bytes(), configs)
@settings(max_examples=examples(600), deadline=None)
def test_the_fast_check_gives_what_the_careful_one_gives(data: bytes, config: TopicConfig) -> None:
    assert _outcome(data, config, careful=False) == _outcome(data, config, careful=True)


@given(st.binary(max_size=200), configs)
@settings(max_examples=examples(300), deadline=None)
def test_random_bytes_get_what_the_careful_check_gives(data: bytes, config: TopicConfig) -> None:
    assert _outcome(data, config, careful=False) == _outcome(data, config, careful=True)


def _fields(*fields: Any) -> tuple[Any, ...]:
    return fields


def test_a_well_behaved_producers_batches_take_the_fast_path_as_views() -> None:
    records = _record(0, 0, b"k", b"v") + _record(1, 5, b"k", b"w")
    one = _batch(
        records,
        count=2,
        last_offset_delta=1,
        attributes=0x10,
        base_timestamp=NOW,
        max_timestamp=NOW + 5,
        producer=(7, 1, 9),
    )
    data = memoryview(one + one)
    config = TopicConfig.from_overrides({})
    assert plain_batches(data, False, 1_048_588, 0, 2**62, _fields, "t", 5) == [
        ("t", 5, one, 2, NOW, NOW + 5, 7, 1, 9, True),
        ("t", 5, one, 2, NOW, NOW + 5, 7, 1, 9, True),
    ]
    first, second = check_batches("t", 0, data, config, NOW)
    assert first.data.obj is data.obj  # not copied
    assert second.data.obj is data.obj
    assert (second.record_count, second.producer_id, second.transactional) == (2, 7, True)
    # What the fast path leaves to the careful one: no batch, a timestamp outside the window, too large.
    assert plain_batches(memoryview(b""), False, 1_048_588, 0, 2**62, _fields, "t", 5) is None
    assert plain_batches(data, False, 1_048_588, NOW + 1, 2**62, _fields, "t", 5) is None
    assert plain_batches(data, False, len(one) - 1, 0, 2**62, _fields, "t", 5) is None
    many = memoryview(one * 20)  # more batches than the C code keeps on its stack
    made = plain_batches(many, False, 1_048_588, 0, 2**62, _fields, "t", 5)
    assert made == [("t", 5, one, 2, NOW, NOW + 5, 7, 1, 9, True)] * 20


def _codecs_walk(data: bytes) -> bool:
    """The header walk ``has_compressed`` replaced: each whole header's codec, stepping by its length."""
    pos, found = 0, set()
    while pos + RECORD_BATCH_OVERHEAD <= len(data):
        found.add(struct.unpack_from(">h", data, pos + 21)[0] & 0x07)
        (length,) = struct.unpack_from(">i", data, pos + 8)
        if length <= 0:
            break
        pos += 12 + length
    return bool(found - {0})


@given(st.one_of(partition_bytes(), st.binary(max_size=200)))
@settings(max_examples=examples(300), deadline=None)
def test_has_compressed_reads_the_headers_as_the_walk_did(data: bytes) -> None:
    assert has_compressed(data) == _codecs_walk(data)
