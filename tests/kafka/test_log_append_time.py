"""``message.timestamp.type=LogAppendTime`` end to end, with real clients: confluent-kafka's delivery reports
and consumer, ListOffsets by time and max timestamp, HTTP produce and fetch, a config change on a live
topic, compaction, and the same produce on the reference Kafka broker.

Producers send a timestamp far in the past (``OLD``), outside the topics' one-hour CreateTime window: on a
LogAppendTime topic it is accepted and every reader gives the agent's time instead.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from broker import errors
from pipeline.decode import decode_file
from pipeline.options import ReadOptions
from pipeline.snapshot import take_snapshot
from planner.round import CompactionRound
from storage import records
from tests.fixtures.reference_broker import ReferenceBroker
from tests.fixtures.server import RunningServer
from tests.kafka.compressed import stored_batches
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration

OLD = 1_600_000_000_000  # 2020: outside the window below
LAT = {"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": "3600000"}
# (partition, offset) -> (timestamp type, timestamp)
Seen = dict[tuple[int, int], tuple[int, int]]


def now_ms() -> int:
    return int(time.time() * 1000)


def produce(bootstrap: str, topic: str, values: list[bytes | None], **conf: Any) -> Seen:
    """``values`` to partition 0 with key k<i> and timestamp OLD, one flush; the delivery reports."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all", **conf})
    reports: Seen = {}
    failures: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(err)
        else:
            reports[(msg.partition(), msg.offset())] = msg.timestamp()

    for i, value in enumerate(values):
        producer.produce(
            topic, key=f"k{i}".encode(), value=value, partition=0, timestamp=OLD, on_delivery=delivered
        )
    assert producer.flush(30) == 0
    assert failures == []
    return reports


def consume(bootstrap: str, topic: str, n: int) -> Seen:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    seen: Seen = {}
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while len(seen) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                seen[(msg.partition(), msg.offset())] = msg.timestamp()
    finally:
        consumer.close()
    assert len(seen) == n
    return seen


def over_http(srv: RunningServer, topic: str) -> Seen:
    return {(0, r["offset"]): (TIMESTAMP_LOG_APPEND_TIME, r["timestamp"]) for r in srv.read_all(topic, 0)}


def over_spark(srv: RunningServer, topic: str) -> Seen:
    """The rows Spark's executors decode (pipeline/decode.py, both of its decoders) for the topic's
    partition 0: Spark's timestampType is Kafka's (1 = LogAppendTime), its timestamp in microseconds."""
    rt = srv.runtime
    snapshot = take_snapshot(rt.metadata, ReadOptions(topics=(topic,)))
    seen: Seen = {}
    for key, tasks in snapshot.tasks.items():
        content = rt.store.get(key)
        for headers in (False, True):  # the C column loop, then the reference decoder
            rows = decode_file(content, tasks, include_headers=headers)
            micros = rows.column("timestamp").cast(pa.int64()).to_pylist()
            kinds = rows.column("timestampType").to_pylist()
            places = zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist(), strict=True)
            for place, us, kind in zip(places, micros, kinds, strict=True):
                seen[place] = (TIMESTAMP_LOG_APPEND_TIME if kind == 1 else TIMESTAMP_CREATE_TIME, us // 1000)
    return seen


def only_times(seen: Seen) -> set[int]:
    return {ts for _, ts in seen.values()}


def test_delivery_reports_consumers_http_and_list_offsets_give_the_append_time(
    server_factory: Callable[..., Any],
) -> None:
    with server_factory() as srv:
        srv.create_topic("lat", 1, **LAT)
        before = now_ms()
        first = produce(srv.kafka_bootstrap, "lat", [b"a", b"b", b"c"])
        time.sleep(0.05)  # the second batch gets a later append time
        second = produce(srv.kafka_bootstrap, "lat", [b"d", b"e"])
        after = now_ms()
        reports = {**first, **second}
        assert sorted(reports) == [(0, i) for i in range(5)]
        assert {kind for kind, _ in reports.values()} == {TIMESTAMP_LOG_APPEND_TIME}
        # One append time per batch, the broker's clock, not the producer's OLD.
        ((t1,), (t2,)) = only_times(first), only_times(second)
        assert before <= t1 < t2 <= after

        assert consume(srv.kafka_bootstrap, "lat", 5) == reports
        assert over_http(srv, "lat") == reports
        assert over_spark(srv, "lat") == reports

        consumer = Consumer({"bootstrap.servers": srv.kafka_bootstrap, "group.id": "unused"})
        try:
            found = [
                consumer.offsets_for_times([TopicPartition("lat", 0, ts)], timeout=10)[0].offset
                for ts in (OLD + 1, t1, t1 + 1, t2 + 1)
            ]
        finally:
            consumer.close()
        # By the records' producer timestamps (OLD) nothing would be at or after OLD + 1.
        assert found == [0, 0, 3, -1]  # -1: no record at or after that time
        admin = AdminClient({"bootstrap.servers": srv.kafka_bootstrap})
        answer = admin.list_offsets({TopicPartition("lat", 0): OffsetSpec.max_timestamp()})
        latest = next(iter(answer.values())).result(10)
        assert (latest.offset, latest.timestamp) == (3, t2)  # the first record with the largest time


def test_the_produce_answer_carries_the_stored_append_time(server_factory: Callable[..., Any]) -> None:
    T = ProduceRequest.TopicProduceData
    with server_factory() as srv:
        srv.create_topic("stamped", 1, **LAT)
        srv.create_topic("created", 1)
        batch = records.encode_batch([records.Record(0, OLD, b"k", b"v")])
        with Wire(int(srv.kafka_bootstrap.rsplit(":", 1)[1])) as wire:
            for correlation, version in enumerate((3, 5, 8, 9)):
                before = now_ms()
                request = ProduceRequest[version](
                    transactional_id=None,
                    acks=-1,
                    timeout_ms=10_000,
                    topic_data=[
                        T(name=name, partition_data=[T.PartitionProduceData(index=p, records=batch)])
                        for name, p in (("stamped", 0), ("created", 0), ("stamped", 7))
                    ],
                )
                answer = wire.call(request, ProduceResponse, correlation)
                stamped, created, missing = [t.partition_responses[0] for t in answer.responses]
                assert (stamped.error_code, stamped.base_offset) == (errors.NONE, correlation)
                assert before <= stamped.log_append_time_ms <= now_ms()
                assert (created.error_code, created.log_append_time_ms) == (errors.NONE, -1)
                assert missing.error_code == errors.UNKNOWN_TOPIC_OR_PARTITION
                assert missing.log_append_time_ms == -1
                stored = srv.fetch("stamped", 0, correlation).json()["records"][0]
                assert stored["timestamp"] == stamped.log_append_time_ms


def test_http_produce_gives_the_append_time_to_both_doors(server_factory: Callable[..., Any]) -> None:
    with server_factory() as srv:
        srv.create_topic("hlat", 1, **LAT)
        before = now_ms()
        sent = [{"key": "a", "value": "1", "timestamp": OLD}, {"key": "b", "value": "2"}]
        response = srv.produce("hlat", sent)
        assert response.status_code == 200, response.text
        after = now_ms()
        fetched = over_http(srv, "hlat")
        (append_time,) = only_times(fetched)
        assert before <= append_time <= after
        # Kafka's consumers read the stored batch: LogAppendTime, the same time.
        assert consume(srv.kafka_bootstrap, "hlat", 2) == fetched
        # A CreateTime topic with the same window refuses OLD.
        srv.create_topic("hcreate", 1, **{"message.timestamp.before.max.ms": "3600000"})
        assert srv.produce("hcreate", sent).json()["error_code"] == 42208


def test_changing_the_type_changes_only_later_batches(server_factory: Callable[..., Any]) -> None:
    with server_factory() as srv:
        srv.create_topic("switch", 1)
        admin = AdminClient({"bootstrap.servers": srv.kafka_bootstrap})

        def set_type(value: str) -> None:
            change = ConfigResource(
                ConfigResource.Type.TOPIC,
                "switch",
                incremental_configs=[
                    ConfigEntry("message.timestamp.type", value, incremental_operation=AlterConfigOpType.SET)
                ],
            )
            admin.incremental_alter_configs([change])[change].result(10)
            described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "switch")])
            assert next(iter(described.values())).result(10)["message.timestamp.type"].value == value

        produce(srv.kafka_bootstrap, "switch", [b"created"])
        set_type("LogAppendTime")
        before = now_ms()
        produce(srv.kafka_bootstrap, "switch", [b"appended"])
        set_type("CreateTime")
        produce(srv.kafka_bootstrap, "switch", [b"created again"])
        seen = consume(srv.kafka_bootstrap, "switch", 3)
        assert seen[(0, 0)] == (TIMESTAMP_CREATE_TIME, OLD)
        assert seen[(0, 1)][0] == TIMESTAMP_LOG_APPEND_TIME
        assert seen[(0, 1)][1] >= before
        assert seen[(0, 2)] == (TIMESTAMP_CREATE_TIME, OLD)
        assert [r["timestamp"] for r in srv.read_all("switch", 0)] == [OLD, seen[(0, 1)][1], OLD]


def test_recompressed_and_compacted_batches_keep_the_append_time(server_factory: Callable[..., Any]) -> None:
    with server_factory() as srv:
        configs = {**LAT, "cleanup.policy": "compact", "compression.type": "zstd"}
        srv.create_topic("clat", 1, **configs)
        first = produce(srv.kafka_bootstrap, "clat", [b"first"] * 6, **{"compression.type": "lz4"})
        time.sleep(0.05)
        # k0 and k1 again (k1 deleted): the first batch loses them, the second keeps a tombstone.
        second = produce(srv.kafka_bootstrap, "clat", [b"second", None], **{"compression.type": "lz4"})
        (t1,), (t2,) = only_times(first), only_times(second)
        stored = stored_batches(srv.runtime, "clat", 0)
        assert [(h.attributes & 0x0F, h.append_time) for h, _ in stored] == [(0x0C, t1), (0x0C, t2)]

        rt = srv.runtime
        compactor = CompactionRound(rt.store, rt.metadata, rt.clock, random.Random(7), owner="test-worker")
        for _ in range(10):
            if not compactor.run_once("clat", True).jobs:
                break
        else:
            raise AssertionError("compaction did not settle")

        after = stored_batches(rt, "clat", 0)
        # The first batch filtered (k0, k1 gone), the second re-encoded with its tombstone's delete horizon:
        # both still zstd and LogAppendTime, with their own append times.
        assert [h.records_count for h, _ in after] == [4, 2]
        assert [(h.attributes & 0x0F, h.append_time) for h, _ in after] == [(0x0C, t1), (0x0C, t2)]
        assert after[1][0].delete_horizon_ms is not None
        expected = {(0, o): (TIMESTAMP_LOG_APPEND_TIME, t1) for o in range(2, 6)}
        expected |= {(0, 6): (TIMESTAMP_LOG_APPEND_TIME, t2), (0, 7): (TIMESTAMP_LOG_APPEND_TIME, t2)}
        assert over_http(srv, "clat") == expected
        assert over_spark(srv, "clat") == expected
        assert consume(srv.kafka_bootstrap, "clat", 6) == expected
        chunks = rt.metadata.find_chunks("clat", 0, 0, 100)
        assert (min(c.min_timestamp for c in chunks), max(c.max_timestamp for c in chunks)) == (t1, t2)


def _scenario(bootstrap: str, timestamp_type: str) -> dict[str, Any]:
    """Create a topic with ``timestamp_type``, produce three records with timestamp OLD, consume them:
    the timestamp types the delivery reports and the consumer see, and whether the times are OLD."""
    topic = f"lat-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(
        topic, num_partitions=1, replication_factor=1, config={"message.timestamp.type": timestamp_type}
    )
    admin.create_topics([new])[topic].result(30)
    reports = produce(bootstrap, topic, [b"x", b"y", b"z"])
    consumed = consume(bootstrap, topic, 3)
    return {
        "delivered": sorted({kind for kind, _ in reports.values()}),
        "consumed": sorted({kind for kind, _ in consumed.values()}),
        "producer's time": only_times(reports) == {OLD} and only_times(consumed) == {OLD},
        "same times both ways": reports == consumed,
    }


def test_the_reference_broker_gives_the_same_timestamp_types(
    server_factory: Callable[..., Any], reference_broker: ReferenceBroker
) -> None:
    with server_factory() as srv:
        for timestamp_type in ("LogAppendTime", "CreateTime"):
            on_strata = _scenario(srv.kafka_bootstrap, timestamp_type)
            on_kafka = _scenario(reference_broker.bootstrap, timestamp_type)
            assert on_strata == on_kafka, timestamp_type
            expected = (
                TIMESTAMP_LOG_APPEND_TIME if timestamp_type == "LogAppendTime" else TIMESTAMP_CREATE_TIME
            )
            assert on_strata["delivered"] == on_strata["consumed"] == [expected]
