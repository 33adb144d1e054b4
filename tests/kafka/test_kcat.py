"""kcat (Debian's 1.7.1 on its own librdkafka 2.0.2) against a real agent over TCP.

Debian's librdkafka 2.0.2 misreads an ApiVersions v3 response with more than one tagged field (fixed
upstream in PR #4278), so these tests also hold Strata to answering without them. `make test` installs
kcat; without it these tests fail.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.kafka import RunningBroker

pytestmark = pytest.mark.integration
FORMAT = "%p|%o|%K|%k|%s|%h|%T\\n"  # partition|offset|key length (-1: null)|key|value|headers|timestamp


def kcat(broker: RunningBroker, *args: str, stdin: str | None = None) -> str:
    exe = shutil.which("kcat")
    assert exe is not None, "kcat is not installed (the Makefile's kcat step: apt-get install kcat)"
    done = subprocess.run(
        [exe, "-b", broker.bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # A failed batch repeats one line per record: show each distinct line once.
    errors = "\n".join(dict.fromkeys(done.stderr.splitlines()))
    assert done.returncode == 0, f"kcat {' '.join(args)} exited {done.returncode}:\n{errors}"
    return done.stdout


def create_topic(broker: RunningBroker, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)]
    ).values():
        future.result(10)


def consume_all(broker: RunningBroker, topic: str) -> list[list[str]]:
    out = kcat(broker, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", FORMAT)
    return [line.split("|") for line in out.splitlines()]


def test_kcat_metadata_produce_consume_query(broker: RunningBroker) -> None:
    create_topic(broker, "kc", 2)
    meta = json.loads(kcat(broker, "-L", "-J"))
    # The agent's lanes (default 8): broker id i on a port of its own, lane 0 the bootstrap port.
    lanes = broker.runtime.settings.kafka_lanes
    names = {b["id"]: b["name"] for b in meta["brokers"]}
    assert sorted(names) == list(range(lanes))
    assert names[0] == broker.bootstrap
    assert len(set(names.values())) == lanes
    assert meta["controllerid"] == 0
    (kc,) = (t for t in meta["topics"] if t["topic"] == "kc")
    assert [p["partition"] for p in kc["partitions"]] == [0, 1]
    assert all(0 <= p["leader"] < lanes and "error" not in p for p in kc["partitions"])

    before = int(time.time() * 1000)
    # -K: splits key from value; -Z sends an empty key as null; -H adds a header to every record.
    kcat(broker, "-P", "-t", "kc", "-p", "0", "-K:", "-Z", "-H", "origin=kcat", stdin="a:1\nb:2\n:nokey\n")
    kcat(broker, "-P", "-t", "kc", "-p", "1", "-K:", stdin="c:3\n")

    rows = consume_all(broker, "kc")
    got = sorted((p, o, klen, k, v, h) for p, o, klen, k, v, h, _ in rows)
    assert got == [
        ("0", "0", "1", "a", "1", "origin=kcat"),
        ("0", "1", "1", "b", "2", "origin=kcat"),
        ("0", "2", "-1", "", "nokey", "origin=kcat"),
        ("1", "0", "1", "c", "3", ""),
    ]
    assert all(int(ts) >= before - 1000 for *_, ts in rows)

    # -Q: offsets by timestamp, and the logical -1 (latest) and -2 (earliest).
    assert kcat(broker, "-Q", "-t", f"kc:0:{before}").split() == ["kc", "[0]", "offset", "0"]
    future = int(time.time() * 1000) + 3_600_000
    assert kcat(broker, "-Q", "-t", f"kc:0:{future}").split() == ["kc", "[0]", "offset", "-1"]
    assert kcat(broker, "-Q", "-t", "kc:0:-1").split() == ["kc", "[0]", "offset", "3"]
    assert kcat(broker, "-Q", "-t", "kc:1:-1").split() == ["kc", "[1]", "offset", "1"]
    assert kcat(broker, "-Q", "-t", "kc:0:-2").split() == ["kc", "[0]", "offset", "0"]


def test_kcat_auto_creates_topic_on_produce(broker: RunningBroker) -> None:
    kcat(broker, "-P", "-t", "kc-auto", "-K:", stdin="k:v\n")
    assert [r[:5] for r in consume_all(broker, "kc-auto")] == [["0", "0", "1", "k", "v"]]


def produce_and_read_50(broker: RunningBroker, topic: str, *producer_args: str) -> None:
    """50 records in one batch (linger), with repetitive values so that every codec shrinks the batch:
    librdkafka sends a batch uncompressed when compressing would not make it smaller."""
    create_topic(broker, topic, 1)
    values = [f"{i}-" + topic * 40 for i in range(50)]
    lines = "".join(f"k{i}:{v}\n" for i, v in enumerate(values))
    kcat(broker, "-P", "-t", topic, "-K:", "-X", "linger.ms=200", *producer_args, stdin=lines)
    rows = consume_all(broker, topic)
    assert [(o, k, v) for _, o, _, k, v, *_ in rows] == [(str(i), f"k{i}", v) for i, v in enumerate(values)]


def test_kcat_zstd_produce(broker: RunningBroker) -> None:
    # zstd only: librdkafka 2.0.2 compresses gzip and snappy only if the broker offers Produce v0 and lz4
    # only if it offers FindCoordinator (rdkafka_msgset_writer.c, compr_req); Strata offers Produce v3+,
    # like Kafka 4.0, so those batches go out uncompressed (upstream changed the check in later releases).
    # zstd needs Produce v7, which Strata offers.
    produce_and_read_50(broker, "kc-zstd", "-z", "zstd")


def test_kcat_idempotent_produce(broker: RunningBroker) -> None:
    # librdkafka refuses to start an idempotent producer unless the broker offers InitProducerId.
    produce_and_read_50(broker, "kc-idem", "-X", "enable.idempotence=true")
