"""One log, two front doors: what one door writes, the other reads byte for byte, on the same agent."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

TS = 1_700_000_123_456


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


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


def test_http_produce_kafka_fetch(server_factory: Callable[..., Any]) -> None:
    with server_factory() as srv:
        srv.create_topic("h2k")
        records = [
            {
                "key": _b64(b"\x00key\xff"),
                "value": _b64(b"\x01value\xfe"),
                "timestamp": TS,
                "headers": [{"name": "h1", "value": _b64(b"\x02")}, {"name": "h2", "value": None}],
            },
            {"key": None, "value": _b64(b"no key"), "timestamp": TS + 1},
            {"key": _b64(b"gone"), "value": None, "timestamp": TS + 2},  # a tombstone
        ]
        response = srv.client.post("/v1/topics/h2k/records", json={"records": records, "encoding": "base64"})
        assert response.status_code == 200, response.text
        got = _consume(srv.kafka_bootstrap, "h2k", 3)
        assert [(m.offset(), m.key(), m.value(), m.timestamp()[1]) for m in got] == [
            (0, b"\x00key\xff", b"\x01value\xfe", TS),
            (1, None, b"no key", TS + 1),
            (2, b"gone", None, TS + 2),
        ]
        assert got[0].headers() == [("h1", b"\x02"), ("h2", None)]


def test_kafka_produce_http_fetch_and_one_topic_namespace(server_factory: Callable[..., Any]) -> None:
    with server_factory() as srv:
        admin = AdminClient({"bootstrap.servers": srv.kafka_bootstrap})
        admin.create_topics([NewTopic("k2h", num_partitions=1, replication_factor=1)])["k2h"].result(10)
        assert "k2h" in srv.client.get("/v1/topics").json()["topics"]  # created over Kafka, seen over HTTP
        producer = Producer({"bootstrap.servers": srv.kafka_bootstrap})
        producer.produce(
            "k2h", key=b"\x00k", value=b"\xffv", headers=[("a", b"\x01"), ("b", None)], timestamp=TS
        )
        producer.produce("k2h", key=None, value=b"plain", timestamp=TS + 5)
        assert producer.flush(30) == 0
        body = srv.fetch("k2h", 0, 0, encoding="base64").json()
        assert [
            (r["offset"], r["key"], r["value"], r["timestamp"], r["headers"]) for r in body["records"]
        ] == [
            (
                0,
                _b64(b"\x00k"),
                _b64(b"\xffv"),
                TS,
                [{"name": "a", "value": _b64(b"\x01")}, {"name": "b", "value": None}],
            ),
            (1, None, _b64(b"plain"), TS + 5, []),
        ]
        # A topic created over HTTP is produced to over Kafka, and deleted over Kafka.
        srv.create_topic("shared", partitions=2)
        assert admin.list_topics(timeout=10).topics["shared"].partitions.keys() == {0, 1}
        admin.delete_topics(["shared"])["shared"].result(10)
        assert srv.client.get("/v1/topics/shared").status_code == 404


def test_partitions_grown_over_http_are_seen_over_kafka(server_factory: Callable[..., Any]) -> None:
    with server_factory() as srv:
        srv.create_topic("g", partitions=1)
        response = srv.client.post("/v1/topics/g/partitions", json={"partitions": 3})
        assert response.status_code == 200, response.text
        assert [p["partition"] for p in response.json()["partitions"]] == [0, 1, 2]
        shrink = srv.client.post("/v1/topics/g/partitions", json={"partitions": 2})
        assert (shrink.status_code, shrink.json()["error_code"]) == (422, 42209)
        admin = AdminClient({"bootstrap.servers": srv.kafka_bootstrap})
        assert set(admin.list_topics(timeout=10).topics["g"].partitions) == {0, 1, 2}


def test_http_sets_a_groups_offsets_only_while_it_has_no_members(server_factory: Callable[..., Any]) -> None:
    """PUT /v1/groups/{g}/offsets is a reset from outside the group: refused (409, 40909) while a Kafka
    member is in the group, whose own commits would race it, and accepted once it has left; the offsets
    it sets are where the next member starts."""
    with server_factory(
        kafka_port=0, group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000
    ) as srv:
        srv.create_topic("reset", partitions=1)
        srv.produce("reset", [{"value": f"v{i}"} for i in range(10)])
        conf = {
            "bootstrap.servers": srv.kafka_bootstrap,
            "group.id": "resettable",
            "auto.offset.reset": "earliest",
        }
        consumer = Consumer({**conf, "enable.auto.commit": False, "session.timeout.ms": 6000})
        body = {"offsets": [{"topic": "reset", "partition": 0, "offset": 7}]}
        try:
            consumer.subscribe(["reset"])
            deadline = time.time() + 30
            first = None
            while first is None and time.time() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    first = msg
            assert first is not None
            refused = srv.client.put("/v1/groups/resettable/offsets", json=body)
            assert refused.status_code == 409
            assert refused.json()["error_code"] == 40909
            assert srv.client.get("/v1/groups/resettable/offsets").json()["offsets"] == []
        finally:
            consumer.close()  # LeaveGroup: the group is empty now
        assert srv.client.put("/v1/groups/resettable/offsets", json=body).status_code == 200
        again = Consumer({**conf, "enable.auto.commit": False})
        try:
            again.subscribe(["reset"])
            deadline = time.time() + 30
            msg = None
            while time.time() < deadline:
                msg = again.poll(0.2)
                if msg is not None and msg.error() is None:
                    break
            assert msg is not None
            assert msg.offset() == 7
        finally:
            again.close()
