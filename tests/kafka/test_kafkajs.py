"""kafkajs 2.2.4 (Node) against a real agent over TCP: tests/kafka/js/roundtrip.mjs, then a second client.

The script creates topics, produces with acks -1 (keys, headers, a null key, one batch compressed with
the codec under test), lists offsets (latest, earliest, by timestamp), reads every partition back with
kafkajs's own Fetch decoding, and deletes a topic. This test checks its JSON report, then reads the same
records with confluent-kafka (librdkafka), so what kafkajs wrote is also what another client sees.
`make test` installs tests/kafka/js/node_modules (npm ci); without node or kafkajs this test fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.fixtures.kafka import RunningBroker

pytestmark = pytest.mark.integration
JS_DIR = Path(__file__).parent / "js"
KEYED = 30  # roundtrip.mjs: k0..k29 with headers idx/origin, then a null key, then 3 records of the codec


def run_roundtrip(broker: RunningBroker, topic: str, codec: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is not installed (Node 20: see the Makefile's kafkajs step)"
    assert (JS_DIR / "node_modules" / "kafkajs" / "package.json").is_file(), (
        "kafkajs is not installed: run `make kafkajs` (npm ci in tests/kafka/js)"
    )
    env = {**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"}
    done = subprocess.run(
        [node, "roundtrip.mjs", broker.bootstrap, topic, codec],
        cwd=JS_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"roundtrip.mjs exited {done.returncode}:\n{done.stderr}"
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def expected_records(codec: str) -> list[tuple[str | None, str, dict[str, str]]]:
    keyed = [(f"k{i}", f"v{i}", {"idx": str(i), "origin": "kafkajs"}) for i in range(KEYED)]
    coded: list[tuple[str | None, str, dict[str, str]]] = [
        (f"{codec}{i}", f"{codec}-{i}", {}) for i in (1, 2, 3)
    ]
    return [*keyed, (None, "null-key", {"kind": "null-key"}), *coded]


def check_report(report: dict[str, Any], topic: str, codec: str, started_ms: int) -> None:
    assert report["created"] is True
    assert report["createdAgain"] is False  # TOPIC_ALREADY_EXISTS, which kafkajs reports as false
    assert {topic, f"{topic}-gone"} <= set(report["topicsAfterCreate"])
    assert report["partitionIds"] == [0, 1, 2]
    assert all(s["errorCode"] == 0 for s in report["sent"])

    records = report["records"]
    got = sorted(
        ((r["key"], r["value"], r["headers"]) for r in records),
        key=lambda r: (r[0] is None, r[0] or "", r[1]),
    )
    want = sorted(expected_records(codec), key=lambda r: (r[0] is None, r[0] or "", r[1]))
    assert got == want
    by_value = {r["value"]: r for r in records}
    assert by_value["null-key"]["partition"] == 0
    assert [by_value[f"{codec}-{i}"]["partition"] for i in (1, 2, 3)] == [1, 1, 1]
    # Offsets in each partition are dense from 0.
    for p in (0, 1, 2):
        offsets = sorted(r["offset"] for r in records if r["partition"] == p)
        assert offsets == list(range(len(offsets)))
    assert all(r["timestamp"] >= started_ms - 1000 for r in records)

    counts = {p: sum(1 for r in records if r["partition"] == p) for p in (0, 1, 2)}
    assert {o["partition"]: (o["low"], o["high"]) for o in report["offsets"]} == {
        p: (0, n) for p, n in counts.items()
    }
    # Every record is newer than the timestamp taken before the first send: the earliest offset is 0
    # (for an empty partition Kafka answers -1, which kafkajs replaces with the high watermark, also 0).
    assert {o["partition"]: o["offset"] for o in report["offsetsAtBefore"]} == {p: 0 for p in counts}
    assert {o["partition"]: o["offset"] for o in report["offsetsInFuture"]} == counts
    assert report["trimmedOffsets"] == [{"partition": 0, "low": 3, "high": 5}]  # DeleteRecords
    assert topic in report["topicsAfterDelete"]
    assert f"{topic}-gone" not in report["topicsAfterDelete"]


def read_back_with_librdkafka(
    broker: RunningBroker, topic: str, n: int
) -> list[tuple[str | None, str, dict[str, str]]]:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    got: list[tuple[str | None, str, dict[str, str]]] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        deadline = time.time() + 30
        while len(got) < n and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            key, value = msg.key(), msg.value()
            assert isinstance(value, bytes)
            headers: dict[str, str] = {}
            pairs = msg.headers() or []
            assert isinstance(pairs, list)  # the consumer returns a list of (name, value) pairs
            for name, raw in pairs:
                assert isinstance(raw, bytes)
                headers[name] = raw.decode()
            got.append((key.decode() if isinstance(key, bytes) else None, value.decode(), headers))
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_kafkajs_admin_produce_offsets_fetch(broker: RunningBroker, codec: str) -> None:
    topic = f"kjs-{codec}"
    started_ms = int(time.time() * 1000)
    report = run_roundtrip(broker, topic, codec)
    check_report(report, topic, codec, started_ms)

    want = expected_records(codec)
    got = read_back_with_librdkafka(broker, topic, len(want))
    order = lambda r: (r[0] is None, r[0] or "", r[1])  # noqa: E731
    assert sorted(got, key=order) == sorted(want, key=order)


def test_kafkajs_with_lanes(kafka_factory: Any) -> None:
    """Several broker ids on one agent (STRATA_KAFKA_LANES): kafkajs keys brokers by host:port, so each
    lane needs its own port or it silently sends only one lane's partitions (seen with one shared port)."""
    with kafka_factory(kafka_lanes=4) as broker:
        started_ms = int(time.time() * 1000)
        report = run_roundtrip(broker, "kjs-lanes", "none")
        check_report(report, "kjs-lanes", "none", started_ms)


def test_kafkajs_consumer_group_reads_commits_and_leaves(kafka_factory: Any) -> None:
    """tests/kafka/js/group.mjs: kafkajs's own group protocol (its Consumer always joins a group)."""
    node = shutil.which("node")
    assert node is not None, "node is not installed (Node 20: see the Makefile's kafkajs step)"
    with kafka_factory(group_initial_rebalance_delay_ms=100, group_min_session_timeout_ms=1000) as broker:
        done = subprocess.run(
            [node, "group.mjs", broker.bootstrap, "kjs-group", "kjs-g", "90"],
            cwd=JS_DIR,
            env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"group.mjs exited {done.returncode}:\n{done.stderr}"
        report = json.loads(done.stdout)
        assert report["seen"] == 90
        assert report["joined"] == "kjs-g"
        assert report["committed"] == 90  # every record, across the 3 partitions
        assert report["state"] == "Empty"  # it left
        assert sum(o.offset for o in broker.runtime.metadata.group_offsets("kjs-g")) == 90
