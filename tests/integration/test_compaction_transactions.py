"""Compaction of a compacted topic written by Kafka transactions, on SQLite and PostgreSQL: an aborted
value never shadows a committed one and is dropped, an open transaction's values are never cleaned, and
once committed they clean as any others (planner/txn_filter.py)."""

from __future__ import annotations

import random

import httpx
import pytest
from confluent_kafka import Producer

from planner.round import CompactionRound
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
