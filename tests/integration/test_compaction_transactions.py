"""Compaction of a compacted topic written by Kafka transactions, on SQLite and PostgreSQL: an aborted
value never shadows a committed one and is dropped, an open transaction's values are never cleaned, and
once committed they clean as any others (planner/txn_filter.py)."""

from __future__ import annotations

import random

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from planner.round import CompactionRound
from storage.clock import SkewedClock
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration


def records(srv: RunningServer, topic: str, isolation: str) -> list[tuple[int, str, str]]:
    """(offset, key, value) of every record an HTTP reader at ``isolation`` gets."""
    got: list[tuple[int, str, str]] = []
    offset = 0
    while True:
        answer = httpx.get(
            f"{srv.url}/v1/topics/{topic}/partitions/0/records",
            params={"offset": offset, "max_wait_ms": 0, "isolation": isolation},
        ).json()
        got.extend((r["offset"], r["key"], r["value"]) for r in answer["records"])
        if answer["next_offset"] == offset:
            return got
        offset = answer["next_offset"]


def transaction(p: Producer, topic: str, values: dict[str, str], end: str) -> None:
    p.begin_transaction()
    for key, value in values.items():
        p.produce(topic, key=key, value=value, partition=0)
    p.flush(30)
    if end == "commit":
        p.commit_transaction(30)
    elif end == "abort":
        p.abort_transaction(30)


def test_clean_jobs_drop_aborted_values_and_stop_at_the_open_transaction(srv: RunningServer) -> None:
    topic = "txn-compacted"
    srv.create_topic(topic, partitions=1, **{"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": srv.kafka_bootstrap, "transactional.id": "compacting"})
    p.init_transactions(30)
    transaction(p, topic, {"a": "a1", "b": "b1"}, "commit")  # 0, 1; marker 2
    transaction(p, topic, {"a": "a-aborted"}, "abort")  # 3; marker 4
    transaction(p, topic, {"b": "b2"}, "commit")  # 5; marker 6
    transaction(p, topic, {"a": "a-open", "b": "b-open"}, "open")  # 7, 8: the LSO is 7
    compactor = CompactionRound(
        srv.runtime.store, srv.runtime.metadata, srv.runtime.clock, random.Random(7), owner="test-worker"
    )
    for _ in range(3):
        compactor.run_once(topic, True)
    # a1 survives: the aborted a and the open a must not shadow it. b1 goes: b2 is committed.
    assert records(srv, topic, "read_committed") == [(0, "a", "a1"), (5, "b", "b2")]
    # The aborted value is gone for every reader; the open transaction's values are untouched.
    assert records(srv, topic, "read_uncommitted") == [
        (0, "a", "a1"),
        (5, "b", "b2"),
        (7, "a", "a-open"),
        (8, "b", "b-open"),
    ]
    p.commit_transaction(30)
    for _ in range(3):
        compactor.run_once(topic, True)
    assert records(srv, topic, "read_committed") == [(7, "a", "a-open"), (8, "b", "b-open")]


def markers(srv: RunningServer, topic: str) -> dict[int, int | None]:
    """Offset -> delete horizon of the partition's markers."""
    return {m.offset: m.delete_horizon_ms for m in srv.runtime.metadata.txn_markers(topic, 0, 0, 1 << 62)}


def test_empty_markers_get_a_horizon_and_go_after_it(srv: RunningServer) -> None:
    topic = "txn-markers-swept"
    day = 86_400_000
    srv.create_topic(topic, partitions=1, **{"cleanup.policy": "compact", "delete.retention.ms": str(day)})
    p = Producer({"bootstrap.servers": srv.kafka_bootstrap, "transactional.id": "sweeping"})
    p.init_transactions(30)
    transaction(p, topic, {"a": "a1", "b": "b1"}, "commit")  # 0, 1; marker 2
    transaction(p, topic, {"a": "a-aborted"}, "abort")  # 3; marker 4
    transaction(p, topic, {"b": "b2"}, "commit")  # 5; marker 6
    transaction(p, topic, {"c": "c1"}, "commit")  # 7; marker 8: the log's last data and marker
    clock = SkewedClock()
    compactor = CompactionRound(
        srv.runtime.store, srv.runtime.metadata, clock, random.Random(7), owner="test-worker"
    )
    for _ in range(3):
        compactor.run_once(topic, True)
    # The aborted transaction has no record left: its marker gets its horizon. a1 keeps marker 2, b2
    # keeps 6. Marker 8 is past the clean's end (the last data record), as the log's last one always is.
    found = markers(srv, topic)
    assert {offset: h is not None for offset, h in found.items()} == {2: False, 4: True, 6: False, 8: False}
    horizon = found[4]
    assert horizon is not None
    assert clock.now_ms() + day - 60_000 <= horizon <= clock.now_ms() + day
    transaction(p, topic, {"a": "a2", "b": "b3"}, "commit")  # 9, 10; marker 11
    for _ in range(3):
        compactor.run_once(topic, True)
    # a1 and b2 are written again: markers 2 and 6 are empty now; 4 is not past its horizon yet.
    found = markers(srv, topic)
    assert {offset: h is not None for offset, h in found.items()} == {
        2: True,
        4: True,
        6: True,
        8: False,
        11: False,
    }
    assert found[4] == horizon
    clock.advance(day / 1000 + 60)
    transaction(p, topic, {"d": "d1"}, "commit")  # 12; marker 13: dirty data, so the partition is cleaned
    for _ in range(3):
        compactor.run_once(topic, True)
    assert markers(srv, topic).keys() == {8, 11, 13}
    assert srv.runtime.metadata.aborted_txns(topic, 0, 0, 1 << 62) == []
    # A read_committed Kafka consumer still reads to the end, past the holes the markers left.
    consumer = Consumer(
        {
            "bootstrap.servers": srv.kafka_bootstrap,
            "group.id": "sweep-reader",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[int, bytes | None]] = []
        while True:
            message = consumer.poll(10)
            assert message is not None, f"no end of partition after {got}"
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF
                break
            got.append((message.offset(), message.value()))
        assert got == [(7, b"c1"), (9, b"a2"), (10, b"b3"), (12, b"d1")]
        assert consumer.position([TopicPartition(topic, 0)])[0].offset == 14
    finally:
        consumer.close()
