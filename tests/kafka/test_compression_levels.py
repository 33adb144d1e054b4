"""``compression.{gzip,lz4,zstd}.level`` and ``max.decompressed.message.bytes`` over the Kafka door: a real
client's records re-compressed at the topic's level and read back, and the same requests sent to Kafka
4.4's own broker (tests/fixtures/reference_broker.py) for the same answers: DescribeConfigs' value, source
and type, the same compressed bytes stored at each level, and the same codes for batches the cap refuses.

Requests to both brokers go over raw frames (tests/differential/wire.py), which keep the fetched bytes.
"""

from __future__ import annotations

import json
import random
import struct
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from storage import records
from storage.records import compression
from tests.differential.base import T0, create_topic, produce
from tests.differential.runner import negotiate
from tests.differential.scenarios_admin import SET, describe, incremental
from tests.differential.scenarios_log import fetch
from tests.differential.wire import Side
from tests.fixtures.kafka import RunningBroker
from tests.fixtures.reference_broker import ReferenceBroker
from tests.kafka.compressed import stored_batches

pytestmark = pytest.mark.integration

LEVELS = ["compression.gzip.level", "compression.lz4.level", "compression.zstd.level"]
CAP = "max.decompressed.message.bytes"


def json_records(n: int, seed: int = 1) -> list[records.Record]:
    rng = random.Random(seed)
    return [
        records.Record(
            i,
            T0 + i,
            f"user-{rng.randrange(500)}".encode(),
            json.dumps({"event": rng.choice(["view", "click", "buy"]), "n": rng.randrange(10**6)}).encode(),
        )
        for i in range(n)
    ]


def stored_section(batch: bytes | memoryview) -> bytes:
    header = records.read_header(batch, 0, True)
    return bytes(memoryview(batch)[records.RECORD_BATCH_OVERHEAD : header.size])


def deflate_of(stream: bytes) -> bytes:
    """A gzip member's deflate stream, without the header and trailer (Java and zlib write their own)."""
    return stream[10:-8]


def lz4_blocks(frame: bytes) -> list[tuple[int, bytes]]:
    """An lz4 frame's blocks as (stored uncompressed?, bytes): what a level decides. The frame header and
    block checksums are the writer's own (Kafka writes none; cramjam writes block checksums)."""
    flags = frame[4]
    pos = 7 + (8 if flags & 0x08 else 0)
    out = []
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if word == 0:
            return out
        size = word & 0x7FFFFFFF
        out.append((word >> 31, frame[pos : pos + size]))
        pos += size + (4 if flags & 0x10 else 0)


@pytest.fixture
def sides(broker: RunningBroker, reference_broker: ReferenceBroker) -> Iterator[tuple[Side, Side]]:
    kafka, strata = Side("kafka", reference_broker.port), Side("strata", broker.port)
    negotiate(kafka, strata)
    try:
        yield kafka, strata
    finally:
        kafka.close()
        strata.close()


def stored_on(side: Side, topic: str) -> bytes:
    """The one batch of the topic's partition 0, as the broker serves it."""
    fetch(side, topic, 0, 0, max_bytes=1 << 24)
    (response,) = side.last_raw["responses"]
    (partition,) = response["partitions"]
    assert partition["error_code"] == 0
    data: bytes = partition["records"]
    return data


# --- a real client --------------------------------------------------------------------------------------


def test_a_confluent_producer_to_a_gzip_level_1_topic(broker: RunningBroker) -> None:
    """librdkafka sends lz4; the topic stores gzip at level 1, and a consumer reads the records back."""
    broker.runtime.metadata.create_topic(
        "gzip-1", 1, {"compression.type": "gzip", "compression.gzip.level": "1"}, 0
    )
    sent = [(r.key, r.value) for r in json_records(200)]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 50})
    failures: list[Any] = []
    for key, value in sent:
        producer.produce("gzip-1", key=key, value=value, partition=0, on_delivery=_failed_into(failures))
    assert producer.flush(30) == 0
    assert failures == []
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("gzip-1", 0, 0)])
    got: list[tuple[bytes | None, bytes | None]] = []
    try:
        while len(got) < len(sent):
            message = consumer.poll(10)
            assert message is not None, f"{len(got)} of {len(sent)} records read"
            assert message.error() is None, message.error()
            got.append((message.key(), message.value()))
    finally:
        consumer.close()
    assert got == sent
    batches = stored_batches(broker.runtime, "gzip-1", 0)
    assert batches
    for header, batch in batches:
        assert header.attributes & 0x07 == compression.GZIP
        stream = stored_section(batch)
        raw = compression.decompress(compression.GZIP, stream, 1 << 24)
        deflater = zlib.compressobj(1, zlib.DEFLATED, -zlib.MAX_WBITS)
        assert deflate_of(stream) == deflater.compress(raw) + deflater.flush()


def _failed_into(failures: list[Any]) -> Any:
    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    return report


# --- the same as Kafka's broker -------------------------------------------------------------------------


def test_describe_configs_match_kafkas(sides: tuple[Side, Side]) -> None:
    """(value, source, type) of the four configs, by default and set, and the codes of bad values."""
    t = f"cfg-{uuid.uuid4().hex[:8]}"
    answers: dict[str, list[Any]] = {}
    for side in sides:
        out = answers.setdefault(side.name, [])
        create_topic(side, f"{t}-default")
        create_topic(side, f"{t}-set", 1, {"compression.lz4.level": "1", CAP: "1000"})
        for name in (f"{t}-default", f"{t}-set"):
            (result,) = describe(side, name, [*LEVELS, CAP])["results"]
            out.append(
                {c["name"]: (c["value"], c["config_source"], c["config_type"]) for c in result["configs"]}
            )
        for name, value in [
            ("compression.gzip.level", "0"),
            ("compression.gzip.level", "-1"),
            ("compression.lz4.level", "18"),
            ("compression.zstd.level", "-131072"),
            ("compression.zstd.level", "23"),
            (CAP, "0"),
            (CAP, "2147483640"),
            (CAP, "1"),
        ]:
            (result,) = incremental(side, f"{t}-set", (name, SET, value))["responses"]
            out.append((name, value, result["error_code"]))
    assert answers["strata"] == answers["kafka"]
    assert answers["strata"][0] == {
        "compression.gzip.level": ("-1", 5, 3),
        "compression.lz4.level": ("9", 5, 3),
        "compression.zstd.level": ("3", 5, 3),
        CAP: ("2147483639", 5, 3),
    }


@pytest.mark.parametrize(
    ("codec", "level"),
    [("lz4", None), ("lz4", "1"), ("lz4", "3"), ("lz4", "10"), ("lz4", "17"), ("gzip", None), ("gzip", "1")],
)
def test_recompressed_batches_hold_what_kafka_stores(
    sides: tuple[Side, Side], codec: str, level: str | None
) -> None:
    """An uncompressed batch produced to a topic with ``compression.type`` and a level: the records
    section each broker stores is the same lz4 blocks, or the same deflate stream."""
    t = f"lvl-{codec}-{level}-{uuid.uuid4().hex[:8]}".replace("-None", "")
    configs = {"compression.type": codec} | ({} if level is None else {f"compression.{codec}.level": level})
    batch = records.encode_batch(json_records(3000))
    stored: dict[str, bytes] = {}
    for side in sides:
        create_topic(side, t, 1, configs)
        (response,) = produce(side, t, 0, batch)["responses"]
        assert response["partition_responses"][0]["error_code"] == 0
        stored[side.name] = stored_section(stored_on(side, t))
    if codec == "lz4":
        assert lz4_blocks(stored["strata"]) == lz4_blocks(stored["kafka"])
    else:
        assert deflate_of(stored["strata"]) == deflate_of(stored["kafka"])


def test_the_decompressed_cap_answers_as_kafka_does(sides: tuple[Side, Side]) -> None:
    """With max.decompressed.message.bytes=100: the same error code and record_errors for each batch."""

    def batch(values: list[int], codec: int) -> bytes:
        return records.encode_batch(
            [records.Record(i, T0 + i, None, b"v" * n) for i, n in enumerate(values)], codec=codec
        )

    cases = {
        "a body of 100 bytes, gzip": batch([93], compression.GZIP),
        "a body of 101 bytes, gzip": batch([94], compression.GZIP),
        "the second of three over, lz4": batch([10, 300, 10], compression.LZ4),
        "over, zstd": batch([500], compression.ZSTD),
        "over, snappy": batch([500], compression.SNAPPY),
        "ten under, 1,090 bytes in all, gzip": batch([50] * 10, compression.GZIP),
        "over, uncompressed": batch([5000], compression.NONE),
    }
    t = f"cap-{uuid.uuid4().hex[:8]}"
    answers: dict[str, dict[str, tuple[int, list[Any]]]] = {}
    for side in sides:
        create_topic(side, t, 1, {CAP: "100"})
        for case, data in cases.items():
            (response,) = produce(side, t, 0, data)["responses"]
            (partition,) = response["partition_responses"]
            answers.setdefault(side.name, {})[case] = (partition["error_code"], partition["record_errors"])
    assert answers["strata"] == answers["kafka"]
    refused = {case for case, (code, _) in answers["strata"].items() if code}
    assert refused == {
        "a body of 101 bytes, gzip",
        "the second of three over, lz4",
        "over, zstd",
        "over, snappy",
    }
    assert {answers["strata"][case][0] for case in refused} == {87}  # INVALID_RECORD
