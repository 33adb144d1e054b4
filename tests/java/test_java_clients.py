"""Apache Kafka's own Java client against Strata, each scenario run against the reference broker too and
the answers compared where the protocol pins them down (tests/java/src: the producer, the consumer with
assign and with subscribe, offsetsForTimes and seekToEnd, and the Admin client)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fixtures.kafka import RunningBroker
from tests.fixtures.reference_broker import ReferenceBroker
from tests.java import clients
from tests.java.clients import scenario

pytestmark = pytest.mark.integration

BASE_TS = 1_700_000_000_000


@pytest.fixture
def strata(kafka_factory: Callable[..., Any]) -> Iterator[RunningBroker]:
    with kafka_factory(num_partitions=3) as running:
        yield running


def _topic(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_the_idempotent_producer_and_every_codec(
    strata: RunningBroker, reference_broker: ReferenceBroker, compression: str
) -> None:
    answers = {}
    for side, bootstrap in (("strata", strata.bootstrap), ("kafka", reference_broker.bootstrap)):
        topic = _topic(f"codec-{compression}")
        admin = scenario("admin-create", bootstrap, topic=topic, partitions=3)
        assert admin == {"created": True}, (side, admin)
        produced = scenario(
            "produce", bootstrap, topic=topic, count=60, compression=compression, base_ts=BASE_TS
        )
        consumed = scenario("consume", bootstrap, topic=topic, expect=60, partitions="0,1,2")
        answers[side] = (produced, consumed["records"])
    assert answers["strata"][0]["acked"] == 60
    # The same keys land in the same partitions (murmur2), at the same offsets, read back in the same order.
    assert answers["strata"] == answers["kafka"]


def test_a_group_with_eager_and_cooperative_assignors_commits_its_offsets(
    strata: RunningBroker, reference_broker: ReferenceBroker
) -> None:
    for assignor in ("range", "cooperative"):
        answers = {}
        for side, bootstrap in (("strata", strata.bootstrap), ("kafka", reference_broker.bootstrap)):
            topic = _topic(f"group-{assignor}")
            scenario("admin-create", bootstrap, topic=topic, partitions=3)
            scenario("produce", bootstrap, topic=topic, count=30, base_ts=BASE_TS)
            group = f"g-{uuid.uuid4().hex[:8]}"
            consumed = scenario(
                "consume", bootstrap, topic=topic, expect=30, mode="subscribe", group=group, assignor=assignor
            )
            answers[side] = (consumed["records"], consumed["committed"], sorted(consumed["assigned"]))
        strata_answer, kafka_answer = answers["strata"], answers["kafka"]
        assert strata_answer[0] == kafka_answer[0]
        assert (
            strata_answer[1] == kafka_answer[1] == {"0": 9, "1": 12, "2": 9}
            or strata_answer[1] == kafka_answer[1]
        )
        assert [a.rsplit("-", 1)[1] for a in strata_answer[2]] == ["0", "1", "2"]


def test_static_membership_keeps_the_member_across_restarts(strata: RunningBroker) -> None:
    topic = _topic("static")
    scenario("admin-create", strata.bootstrap, topic=topic, partitions=2)
    scenario("produce", strata.bootstrap, topic=topic, count=10, base_ts=BASE_TS)
    group = f"static-{uuid.uuid4().hex[:8]}"
    first = scenario(
        "consume", strata.bootstrap, topic=topic, expect=10, mode="subscribe", group=group, instance="i-1"
    )
    assert len(first["records"]) == 10
    scenario("produce", strata.bootstrap, topic=topic, count=4, base_ts=BASE_TS + 100)
    again = scenario(
        "consume", strata.bootstrap, topic=topic, expect=4, mode="subscribe", group=group, instance="i-1"
    )
    assert len(again["records"]) == 4  # from the committed offsets on: no record twice
    assert {r[3] for r in again["records"]} == {f"v{i}" for i in range(4)}


def test_offsets_for_times_and_seek_to_end(strata: RunningBroker, reference_broker: ReferenceBroker) -> None:
    answers = {}
    for side, bootstrap in (("strata", strata.bootstrap), ("kafka", reference_broker.bootstrap)):
        topic = _topic("times")
        scenario("admin-create", bootstrap, topic=topic, partitions=1)
        scenario("produce", bootstrap, topic=topic, count=20, partition=0, base_ts=BASE_TS)
        answers[side] = [
            scenario("times", bootstrap, topic=topic, partition=0, timestamp=ts)
            for ts in (BASE_TS - 1, BASE_TS + 7, BASE_TS + 19, BASE_TS + 100)
        ]
    assert answers["strata"] == answers["kafka"]
    assert answers["strata"][1]["offset_for_time"] == [7, BASE_TS + 7]
    assert answers["strata"][3]["offset_for_time"] is None
    assert answers["strata"][0]["position_after_seek_to_end"] == 20


def test_the_admin_client(strata: RunningBroker, reference_broker: ReferenceBroker) -> None:
    answers = {}
    topic, group = _topic("admin"), f"ag-{uuid.uuid4().hex[:8]}"  # the same names on both sides
    for side, bootstrap in (("strata", strata.bootstrap), ("kafka", reference_broker.bootstrap)):
        answers[side] = scenario("admin", bootstrap, topic=topic, group=group)
    strata_answer, kafka_answer = answers["strata"], answers["kafka"]
    assert strata_answer["create"] == "ok"
    assert strata_answer["create_again"] == "error: TopicExistsException"
    assert strata_answer["bad_config"] == "error: InvalidConfigurationException"
    assert strata_answer["cluster"] == {"nodes": 1, "controller": True}
    # Every step's answer, configs with their sources included, is the reference broker's.
    assert strata_answer == kafka_answer


def test_a_scenario_jvm_that_died_is_reported_then_replaced() -> None:
    """The test processes' serving JVM (tests/java/clients.py): a call that finds it gone fails, naming the
    call, and the next call starts another."""
    assert scenario("no-such-scenario", "127.0.0.1:1") == {
        "error": "IllegalArgumentException",
        "message": "unknown scenario no-such-scenario",
    }
    jvm = clients.serving_jvm(clients.MAIN)
    assert jvm is not None
    jvm.kill()
    with pytest.raises(RuntimeError, match="no-such-scenario: the serving JVM exited"):
        scenario("no-such-scenario", "127.0.0.1:1")
    assert clients.serving_jvm(clients.MAIN) is None
    assert scenario("no-such-scenario", "127.0.0.1:1")["error"] == "IllegalArgumentException"
