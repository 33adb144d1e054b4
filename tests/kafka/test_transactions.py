"""Transactions over the Kafka door with confluent-kafka (librdkafka): commit, abort, markers as offsets,
both isolation levels, offsets sent to the transaction, fencing and the timeout bound; and the HTTP door's
reads of a transactional topic at both isolation levels."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.fixtures.kafka import RunningBroker
from tests.fixtures.server import local_settings, run_server

pytestmark = pytest.mark.integration


def producer(bootstrap: str, txn_id: str, **extra: object) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})


def consume_all(
    bootstrap: str, topic: str, isolation: str, partitions: int = 1
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record a consumer at ``isolation`` reads up to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, int, bytes]] = []
    at_end: set[int] = set()
    try:
        while len(at_end) < partitions:
            msg = consumer.poll(10)
            assert msg is not None, f"no end of partition reached; read {got}"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            got.append((msg.partition(), msg.offset(), msg.value()))
    finally:
        consumer.close()
    return got


def test_commit_and_abort_with_both_isolation_levels(broker: RunningBroker) -> None:
    topic = "txn-basic"
    p = producer(broker.bootstrap, "tx-basic")
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"c%d" % i, partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, value=b"a%d" % i, partition=0)
    p.flush(30)  # stored, then aborted (librdkafka's abort drops what it has not sent yet)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"last", partition=0)
    p.commit_transaction(30)
    committed = consume_all(broker.bootstrap, topic, "read_committed")
    # Offsets: 3 records, a COMMIT marker (3), 2 aborted (4, 5), an ABORT marker (6), 1 record, a marker.
    assert committed == [(0, 0, b"c0"), (0, 1, b"c1"), (0, 2, b"c2"), (0, 7, b"last")]
    uncommitted = consume_all(broker.bootstrap, topic, "read_uncommitted")
    assert [v for _, _, v in uncommitted] == [b"c0", b"c1", b"c2", b"a0", b"a1", b"last"]
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "wm", "isolation.level": "read_committed"}
    )
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 9)
    finally:
        consumer.close()


def test_an_open_transaction_holds_read_committed_consumers_at_its_start(broker: RunningBroker) -> None:
    topic = "txn-open"
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"before", partition=0)
    plain.flush(30)
    p = producer(broker.bootstrap, "tx-open")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"open", partition=0)
    p.flush(30)
    plain.produce(topic, value=b"after", partition=0)
    plain.flush(30)
    assert [v for _, _, v in consume_all(broker.bootstrap, topic, "read_committed")] == [b"before"]
    assert [v for _, _, v in consume_all(broker.bootstrap, topic, "read_uncommitted")] == [
        b"before",
        b"open",
        b"after",
    ]
    p.commit_transaction(30)
    assert [v for _, _, v in consume_all(broker.bootstrap, topic, "read_committed")] == [
        b"before",
        b"open",
        b"after",
    ]


def test_offsets_sent_to_the_transaction_commit_with_it(broker: RunningBroker) -> None:
    source, sink = "txn-src", "txn-sink"
    seed = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        seed.produce(source, value=b"%d" % i, partition=0)
    seed.flush(30)
    group = "copier"
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([source])
    p = producer(broker.bootstrap, "tx-copier")
    p.init_transactions(30)
    copied = 0
    p.begin_transaction()
    while copied < 10:
        msg = consumer.poll(10)
        assert msg is not None
        assert msg.error() is None, msg.error()
        p.produce(sink, value=msg.value(), partition=0)
        copied += 1
    p.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
    )
    p.commit_transaction(30)
    committed = consumer.committed([TopicPartition(source, 0)], timeout=10)
    consumer.close()
    assert committed[0].offset == 10
    assert [v for _, _, v in consume_all(broker.bootstrap, sink, "read_committed")] == [
        b"%d" % i for i in range(10)
    ]


def test_a_new_incarnation_fences_the_old_one(broker: RunningBroker) -> None:
    topic = "txn-fence"
    old = producer(broker.bootstrap, "tx-fence")
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(topic, value=b"zombie", partition=0)
    old.flush(30)
    new = producer(broker.bootstrap, "tx-fence")
    new.init_transactions(30)
    with pytest.raises(KafkaException) as fenced:
        old.commit_transaction(30)
    assert fenced.value.args[0].fatal(), fenced.value.args[0]
    new.begin_transaction()
    new.produce(topic, value=b"new", partition=0)
    new.commit_transaction(30)
    assert [v for _, _, v in consume_all(broker.bootstrap, topic, "read_committed")] == [b"new"]


def test_a_timeout_above_the_maximum_is_refused(broker: RunningBroker) -> None:
    p = producer(broker.bootstrap, "tx-timeout", **{"transaction.timeout.ms": 2147483647})
    with pytest.raises(KafkaException) as refused:
        p.init_transactions(30)
    assert refused.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def read_all(url: str) -> list[tuple[int, str]]:
    """(offset, value) of every record an HTTP reader gets following ``next_offset`` until it stops."""
    got: list[tuple[int, str]] = []
    offset = 0
    for _ in range(50):
        answer = httpx.get(f"{url}&offset={offset}").json()
        got.extend((r["offset"], r["value"]) for r in answer["records"])
        if answer["next_offset"] == offset:
            return got
        offset = answer["next_offset"]
    raise AssertionError(f"the reader kept moving: {got}")


def test_http_reads_committed_records_by_default(tmp_path: Path) -> None:
    topic = "txn-http"
    with run_server(local_settings(tmp_path)) as srv:
        p = producer(srv.kafka_bootstrap, "tx-http")
        p.init_transactions(30)
        for values, commit in (([b"c0", b"c1"], True), ([b"a0"], False), ([b"c2"], True)):
            p.begin_transaction()
            for v in values:
                p.produce(topic, value=v, partition=0)
            p.flush(30)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
        p.begin_transaction()
        p.produce(topic, value=b"open", partition=0)
        p.flush(30)
        url = f"{srv.url}/v1/topics/{topic}/partitions/0/records?max_wait_ms=0"
        # c0 c1 (0, 1), COMMIT (2), a0 (3), ABORT (4), c2 (5), COMMIT (6), open (7): the LSO is 7.
        assert read_all(url) == [(0, "c0"), (1, "c1"), (5, "c2")]
        committed = httpx.get(url).json()
        assert (committed["next_offset"], committed["last_stable_offset"], committed["high_watermark"]) == (
            6,
            7,
            8,
        )
        # The marker at 6 is a hole: the next read moves past it to the LSO, and no further while the
        # transaction is open.
        past_marker = httpx.get(f"{url}&offset=6").json()
        assert (past_marker["records"], past_marker["next_offset"]) == ([], 7)
        assert httpx.get(f"{url}&offset=7").json()["records"] == []
        everything = read_all(f"{url}&isolation=read_uncommitted")
        assert [v for _, v in everything] == ["c0", "c1", "a0", "c2", "open"]
        p.commit_transaction(30)
        after = httpx.get(f"{url}&offset=7").json()
        assert [(r["offset"], r["value"]) for r in after["records"]] == [(7, "open")]
        tail = httpx.get(f"{url}&offset={after['next_offset']}").json()
        assert (tail["records"], tail["next_offset"]) == ([], 9)  # past the last marker: never stalls on one
        offsets = httpx.get(f"{srv.url}/v1/topics/{topic}/partitions/0/offsets").json()
        assert offsets == {"log_start_offset": 0, "high_watermark": 9, "last_stable_offset": 9}


def test_operators_list_and_abort_a_transaction_over_http(tmp_path: Path) -> None:
    topic = "txn-ops"
    with run_server(local_settings(tmp_path)) as srv:
        p = producer(srv.kafka_bootstrap, "tx-ops")
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, value=b"held", partition=0)
        p.flush(30)
        listed = httpx.get(f"{srv.url}/v1/transactions", params={"state": "Ongoing"}).json()["transactions"]
        [txn] = [t for t in listed if t["transactional_id"] == "tx-ops"]
        assert (txn["state"], txn["hanging"], txn["partitions"]) == (
            "Ongoing",
            False,
            [{"topic": topic, "partition": 0, "first_offset": 0}],
        )
        offsets = f"{srv.url}/v1/topics/{topic}/partitions/0/offsets"
        assert httpx.get(offsets).json()["last_stable_offset"] == 0
        aborted = httpx.post(f"{srv.url}/v1/transactions/tx-ops/abort")
        assert aborted.status_code == 200, aborted.text
        assert (aborted.json()["state"], aborted.json()["producer_epoch"]) == ("CompleteAbort", 1)
        # The marker moved the LSO past the aborted record; the fenced producer cannot commit.
        assert httpx.get(offsets).json() == {
            "log_start_offset": 0,
            "high_watermark": 2,
            "last_stable_offset": 2,
        }
        with pytest.raises(KafkaException) as fenced:
            p.commit_transaction(30)
        assert fenced.value.args[0].fatal() or not fenced.value.args[0].retriable(), fenced.value.args[0]
        again = httpx.post(f"{srv.url}/v1/transactions/tx-ops/abort")
        assert (again.status_code, again.json()["error_code"]) == (422, 42217)
        missing = httpx.post(f"{srv.url}/v1/transactions/nobody/abort")
        assert (missing.status_code, missing.json()["error_code"]) == (404, 40407)
