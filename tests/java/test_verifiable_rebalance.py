"""A consumer group rebalancing under load, with Kafka's verifiable producer and consumer: while the
producer sends at a steady rate, a second member joins the group and later the first leaves it, with the
eager (range) and the cooperative-sticky assignor. Every acknowledged record is read by one member or
the other, each member reads each of its partitions in offset order, and the offsets the members commit
end at each partition's end."""

from __future__ import annotations

import signal
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.kafka import RunningBroker
from tests.java import kafka
from tests.java.verifiable import acked_events, events, tool, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 6
MESSAGES = 4000
THROUGHPUT = 400
ASSIGNORS = {
    "eager": "org.apache.kafka.clients.consumer.RangeAssignor",
    "cooperative": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}


@pytest.fixture
def strata(kafka_factory: Callable[..., Any]) -> Iterator[RunningBroker]:
    with kafka_factory(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000) as running:
        yield running


def _consumer(out: Path, bootstrap: str, topic: str, group: str, assignor: str) -> Any:
    return tool(
        kafka.VERIFIABLE_CONSUMER,
        out,
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--group-id",
        group,
        "--verbose",
        "--reset-policy",
        "earliest",
        "--session-timeout",
        "6000",
        "--assignment-strategy",
        ASSIGNORS[assignor],
    )


@pytest.mark.parametrize("assignor", sorted(ASSIGNORS))
def test_members_join_and_leave_while_records_arrive(
    strata: RunningBroker, tmp_path: Path, assignor: str
) -> None:
    topic, group = f"rebalance-{assignor}", f"rebalance-{assignor}"
    admin = AdminClient({"bootstrap.servers": strata.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(10)
    produced, first_out, second_out = tmp_path / "p.jsonl", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    args = ("--bootstrap-server", strata.bootstrap, "--topic", topic)
    limits = ("--max-messages", str(MESSAGES), "--throughput", str(THROUGHPUT))
    with (
        _consumer(first_out, strata.bootstrap, topic, group, assignor) as first,
        tool(kafka.VERIFIABLE_PRODUCER, produced, *args, *limits) as producer,
    ):
        acked_at_least = lambda n: lambda: len(acked_events(produced)) >= n  # noqa: E731
        wait_for(acked_at_least(MESSAGES // 4), 60, "a quarter acked", producer)
        with _consumer(second_out, strata.bootstrap, topic, group, assignor) as second:
            wait_for(lambda: _assigned(second_out), 30, "the second member's partitions", second)
            wait_for(acked_at_least(MESSAGES // 2), 60, "half acked", producer)
            first.send_signal(signal.SIGTERM)  # leaves the group: its partitions move to the second
            first.wait(60)
            # The rebalance that hands the first's partitions over may end after the last record is read
            # (the first may have read them all), so wait for it rather than stop the second before it.
            wait_for(lambda: _owned(second_out) == set(range(PARTITIONS)), 60, "the hand-over", second)
            producer.wait(120)
            acked = acked_events(produced)
            wanted = {(e["partition"], e["offset"]) for e in acked}
            wait_for(lambda: wanted <= _read(first_out) | _read(second_out), 60, "every acked record read")
            wait_for(
                lambda: _committed_end((first_out, second_out), acked), 30, "the commits to reach the end"
            )
            second.send_signal(signal.SIGTERM)
            second.wait(60)

    assert len(acked) == MESSAGES
    # The second member got some partitions when it joined, and every partition once the first left.
    first_share, *later = [a for a in _assignments(second_out) if a]
    assert 0 < len(first_share) < PARTITIONS
    assert {p["partition"] for a in (first_share, *later) for p in a} == set(range(PARTITIONS))
    for out in (first_out, second_out):
        by_partition: dict[int, list[int]] = defaultdict(list)
        for e in events(out):
            if e["name"] == "record_data":
                by_partition[e["partition"]].append(e["offset"])
        for partition, offsets in by_partition.items():
            firsts = list(dict.fromkeys(offsets))
            assert firsts == sorted(firsts), f"{out.name}: partition {partition} read out of order"


def _read(out: Path) -> set[tuple[int, int]]:
    return {(e["partition"], e["offset"]) for e in events(out) if e["name"] == "record_data"}


def _assignments(out: Path) -> list[Any]:
    return [e["partitions"] for e in events(out) if e["name"] == "partitions_assigned"]


def _owned(out: Path) -> set[int]:
    """The partitions a member owns now, from its assigned and revoked events in order."""
    owned: set[int] = set()
    for e in events(out):
        if e["name"] == "partitions_assigned":
            owned |= {p["partition"] for p in e["partitions"]}
        elif e["name"] == "partitions_revoked":
            owned -= {p["partition"] for p in e["partitions"]}
    return owned


def _assigned(out: Path) -> bool:
    return any(_assignments(out))


def _committed_end(outs: tuple[Path, ...], acked: list[dict[str, Any]]) -> bool:
    """Whether the members' commits, the latest per partition, reached each partition's end (its last
    acked offset + 1). A member commits only what it read, so a partition may end with the first's."""
    end: dict[int, int] = defaultdict(int)
    for e in acked:
        end[e["partition"]] = max(end[e["partition"]], e["offset"] + 1)
    commits = sorted(
        (e["timestamp"], o["partition"], o["offset"])
        for out in outs
        for e in events(out)
        if e["name"] == "offsets_committed" and e.get("success")
        for o in e["offsets"]
    )
    committed = {partition: offset for _, partition, offset in commits}
    return all(committed.get(p) == n for p, n in end.items())
