"""A batch whose CRC is right but whose records are garbage is refused over the Kafka door, with Kafka's
INVALID_RECORD and the record's index (Produce v8's record_errors), and nothing of it is stored: the
partition stays readable over both doors, and a Kafka consumer reads on past it to the good records."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from crc32c import crc32c
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from broker import errors
from storage import records
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration

NOW = int(time.time() * 1000)


def _garbage_batch(count: int) -> bytes:
    """An uncompressed RecordBatch v2 with a valid CRC-32C over records that do not parse."""
    body = bytes((i * 37 + 11) % 256 for i in range(300))
    covered = struct.pack(">hiqqqhii", 0, count - 1, NOW, NOW, -1, -1, -1, count) + body
    return struct.pack(">qiibI", 0, 9 + len(covered), -1, 2, crc32c(covered)) + covered


def _produce(topic: str, batch: bytes, version: int) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    return ProduceRequest[version](
        transactional_id=None,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=batch)])],
    )


def _consume(bootstrap: str, topic: str, n: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[Any] = []
        deadline = time.time() + 30
        while len(out) < n and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                out.append(msg)
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("version", [7, 8, 9])
def test_a_valid_crc_over_garbage_is_refused_and_the_partition_stays_readable(
    server_factory: Callable[..., Any], version: int
) -> None:
    with server_factory() as srv:
        srv.create_topic("plain")
        good = records.encode_batch([records.Record(0, NOW, b"k", b"before")])
        with Wire(int(srv.kafka_bootstrap.rsplit(":", 1)[1])) as wire:
            first = wire.call(_produce("plain", good, version), ProduceResponse, 1)
            refused = wire.call(_produce("plain", _garbage_batch(3), version), ProduceResponse, 2)
        (answer,) = first.responses[0].partition_responses
        assert (answer.error_code, answer.base_offset) == (errors.NONE, 0)
        (partition,) = refused.responses[0].partition_responses
        assert partition.error_code == errors.INVALID_RECORD
        if version >= 8:
            assert "malformed" in partition.error_message
            assert [e.batch_index for e in partition.record_errors] == [0]
        producer = Producer({"bootstrap.servers": srv.kafka_bootstrap})
        producer.produce("plain", key=b"k", value=b"after", timestamp=NOW + 1)
        assert producer.flush(30) == 0
        body = srv.fetch("plain", 0, 0).json()
        assert [(r["offset"], r["value"]) for r in body["records"]] == [(0, "before"), (1, "after")]
        got = _consume(srv.kafka_bootstrap, "plain", 2)
        assert [(m.offset(), m.value()) for m in got] == [(0, b"before"), (1, b"after")]
