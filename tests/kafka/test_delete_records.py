"""DeleteRecords (Kafka key 21) and the HTTP door's DELETE .../records: one rule set, Kafka's.

Records are produced in one request each time, so a deletion offset falls inside a stored chunk: readers
on both doors must still start at the new log start, never before it.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import UnknownTopicOrPartitionError

pytestmark = pytest.mark.integration


def _produce(srv: Any, topic: str, n: int, first: int = 0) -> None:
    records = [{"key": f"k{i}", "value": f"v{i}", "partition": 0} for i in range(first, first + n)]
    response = srv.client.post(f"/v1/topics/{topic}/records", json={"records": records})
    assert response.status_code == 200, response.text


def _consume_from_beginning(bootstrap: str, topic: str, n: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        offsets: list[int] = []
        deadline = time.time() + 30
        while len(offsets) < n and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                offsets.append(msg.offset())
        return offsets
    finally:
        consumer.close()


def test_confluent_delete_records_moves_the_log_start_inside_a_chunk(
    server_factory: Callable[..., Any],
) -> None:
    with server_factory() as srv:
        srv.create_topic("dr")
        _produce(srv, "dr", 10)  # offsets 0-9, one chunk
        admin = AdminClient({"bootstrap.servers": srv.kafka_bootstrap})

        deleted = admin.delete_records([TopicPartition("dr", 0, 4)])
        assert next(iter(deleted.values())).result(10).low_watermark == 4
        earliest = admin.list_offsets({TopicPartition("dr", 0): OffsetSpec.earliest()})
        assert next(iter(earliest.values())).result(10).offset == 4
        # Both doors start at the new log start, though offsets 0-3 share the chunk with 4-9.
        assert _consume_from_beginning(srv.kafka_bootstrap, "dr", 6) == [4, 5, 6, 7, 8, 9]
        fetched = srv.client.get("/v1/topics/dr/partitions/0/records", params={"offset": 4, "max_wait_ms": 0})
        assert [r["offset"] for r in fetched.json()["records"]] == [4, 5, 6, 7, 8, 9]
        below = srv.client.get("/v1/topics/dr/partitions/0/records", params={"offset": 3, "max_wait_ms": 0})
        assert below.status_code == 416
        assert below.json()["error_code"] == 41601

        # An offset at or below the log start changes nothing; the log start never moves back.
        again = admin.delete_records([TopicPartition("dr", 0, 2)])
        assert next(iter(again.values())).result(10).low_watermark == 4
        # OFFSET_END (-1): everything up to the high watermark.
        everything = admin.delete_records([TopicPartition("dr", 0, OFFSET_END)])
        assert next(iter(everything.values())).result(10).low_watermark == 10
        offsets = srv.client.get("/v1/topics/dr/partitions/0/offsets").json()
        assert offsets == {"log_start_offset": 10, "high_watermark": 10, "last_stable_offset": 10}
        _produce(srv, "dr", 2, first=10)
        assert _consume_from_beginning(srv.kafka_bootstrap, "dr", 2) == [10, 11]


def test_confluent_delete_records_refusals_change_nothing(server_factory: Callable[..., Any]) -> None:
    with server_factory() as srv:
        srv.create_topic("dr2")
        srv.create_topic("compacted", **{"cleanup.policy": "compact"})
        _produce(srv, "dr2", 3)
        _produce(srv, "compacted", 3)
        admin = AdminClient({"bootstrap.servers": srv.kafka_bootstrap})
        cases = {
            TopicPartition("dr2", 0, 4): "OFFSET_OUT_OF_RANGE",  # past the high watermark (3)
            TopicPartition("compacted", 0, 1): "POLICY_VIOLATION",
        }
        for tp, error in cases.items():
            future = next(iter(admin.delete_records([tp]).values()))
            with pytest.raises(KafkaException, match=error):
                future.result(10)
        for topic in ("dr2", "compacted"):
            offsets = srv.client.get(f"/v1/topics/{topic}/partitions/0/offsets").json()
            assert offsets == {"log_start_offset": 0, "high_watermark": 3, "last_stable_offset": 3}


def test_kafka_python_delete_records(server_factory: Callable[..., Any]) -> None:
    with server_factory() as srv:
        srv.create_topic("kpdr", partitions=2)
        _produce(srv, "kpdr", 5)
        admin = KafkaAdminClient(bootstrap_servers=srv.kafka_bootstrap)
        try:
            result = admin.delete_records({KpTopicPartition("kpdr", 0): 3})
            # Sent to the agent without a leader lookup, which would fail in the client first.
            with pytest.raises(UnknownTopicOrPartitionError):
                admin.delete_records({KpTopicPartition("missing", 0): 1}, partition_leader_id=0)
        finally:
            admin.close()
        (answer,) = result.values()
        assert answer["low_watermark"] == 3
        assert srv.client.get("/v1/topics/kpdr/partitions/0/offsets").json()["log_start_offset"] == 3
        assert srv.client.get("/v1/topics/kpdr/partitions/1/offsets").json()["log_start_offset"] == 0


def test_http_delete_records(server_factory: Callable[..., Any]) -> None:
    with server_factory() as srv:
        srv.create_topic("hdr")
        srv.create_topic("hcompact", **{"cleanup.policy": "compact"})
        _produce(srv, "hdr", 6)
        url = "/v1/topics/hdr/partitions/0/records"
        response = srv.client.delete(url, params={"before_offset": 2})
        assert response.status_code == 200, response.text
        assert response.json() == {"log_start_offset": 2, "high_watermark": 6, "last_stable_offset": 6}
        fetched = srv.client.get(url, params={"offset": 2, "max_wait_ms": 0, "encoding": "base64"})
        assert [base64.b64decode(r["value"]) for r in fetched.json()["records"]] == [
            b"v2",
            b"v3",
            b"v4",
            b"v5",
        ]
        refusals = [
            (url, {"before_offset": 7}, 416, 41601),
            ("/v1/topics/hcompact/partitions/0/records", {"before_offset": 0}, 409, 40910),
            ("/v1/topics/nope/partitions/0/records", {"before_offset": 0}, 404, 40401),
            ("/v1/topics/hdr/partitions/3/records", {"before_offset": 0}, 404, 40402),
        ]
        for path, params, status, code in refusals:
            refused = srv.client.delete(path, params=params)
            assert (refused.status_code, refused.json()["error_code"]) == (status, code), refused.text
        invalid = srv.client.delete(url, params={"before_offset": -1})  # a bad query parameter
        assert (invalid.status_code, invalid.json()["error_code"]) == (400, 40001), invalid.text
        assert srv.client.get("/v1/topics/hdr/partitions/0/offsets").json() == {
            "log_start_offset": 2,
            "high_watermark": 6,
            "last_stable_offset": 6,
        }
