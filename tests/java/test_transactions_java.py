"""Kafka's own Java clients and tools with transactions, against Strata and the reference Kafka broker.

* Clients.java ``txn-produce`` (Transactions.java): Kafka's transactional producer commits one transaction
  and aborts one; Kafka's consumer reads at both isolation levels (``consume isolation=...``).
* ``org.apache.kafka.tools.TransactionalMessageCopier``, the copier of Kafka's own system test
  (tests/kafkatest/tests/core/transactions_test.py): one per input partition, with random aborts and
  ``sendOffsetsToTransaction`` with the consumer's group metadata; then ``ConsoleConsumer`` with
  ``--isolation-level read_committed`` and librdkafka must each find every input record exactly once.
* ``kafka-transactions`` (TransactionsCommand): ``list``, ``describe`` (ListTransactions and
  DescribeTransactions) and ``describe-producers`` (DescribeProducers) while a transaction is open.
* Kafka Streams' word count (StreamsCount.java) with processing.guarantee=exactly_once_v2.

Kafka's Java client 4.4 uses transaction version 2 where the broker finalizes it (Kafka 4.4 does, Strata
would have to advertise it) and version 1 otherwise.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.fixtures.targets import Target, unique
from tests.java import clients, kafka
from tests.java.clients import scenario
from tests.kafka.transactions import (
    READ_COMMITTED,
    committed,
    create_topics,
    produce_plain,
    read_all,
    values,
)

pytestmark = pytest.mark.integration
COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
LINES = 300


def test_java_transactional_producer_and_isolation_levels(target: Target) -> None:
    topic = unique("java-tx")
    create_topics(target.bootstrap, {topic: 2})
    sent = scenario(
        "txn-produce", target.bootstrap, topic=topic, txn_id=unique("java-id"), committed=5, aborted=3
    )
    assert "error" not in sent, sent
    # Partition 0: c0, c2, c4 at 0..2, the commit marker at 3, x0..x2 at 4..6; partition 1: c1, c3.
    assert sent["committed"] == [["c0", 0, 0], ["c1", 1, 0], ["c2", 0, 1], ["c3", 1, 1], ["c4", 0, 2]]
    assert sent["aborted"] == [["x0", 0, 4], ["x1", 0, 5], ["x2", 0, 6]]

    # One more than there is, so the consumer keeps polling for its timeout: nothing aborted may come.
    on_committed = scenario(
        "consume",
        target.bootstrap,
        topic=topic,
        expect=6,
        partitions="0,1",
        isolation="read_committed",
        timeout_ms=3000,
    )
    assert on_committed["records"] == [
        [0, 0, "null", "c0"],
        [0, 1, "null", "c2"],
        [0, 2, "null", "c4"],
        [1, 0, "null", "c1"],
        [1, 1, "null", "c3"],
    ]
    on_uncommitted = scenario(
        "consume", target.bootstrap, topic=topic, expect=8, partitions="0,1", isolation="read_uncommitted"
    )
    assert [r[:2] for r in on_uncommitted["records"]] == [
        [0, 0],
        [0, 1],
        [0, 2],
        [0, 4],
        [0, 5],
        [0, 6],
        [1, 0],
        [1, 1],
    ]


def test_transactional_message_copier_copies_every_record_once(target: Target) -> None:
    source, sink, group, tag = (
        unique("copier-in"),
        unique("copier-out"),
        unique("copier-group"),
        unique("copier"),
    )
    create_topics(target.bootstrap, {source: 2, sink: 3})
    inputs = [(p, b"in-%d-%d" % (p, i)) for p in (0, 1) for i in range(200)]
    produce_plain(target.bootstrap, source, inputs)
    copiers = [
        subprocess.Popen(
            kafka.command(
                COPIER,
                *(
                    "--broker-list",
                    target.bootstrap,
                    "--input-topic",
                    source,
                    "--input-partition",
                    str(partition),
                ),
                *(
                    "--output-topic",
                    sink,
                    "--transactional-id",
                    f"{tag}-{partition}",
                    "--consumer-group",
                    group,
                ),
                *("--transaction-size", "30", "--enable-random-aborts", "--use-group-metadata"),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for partition in (0, 1)
    ]
    try:
        for copier in copiers:
            out, err = copier.communicate(timeout=90)
            assert copier.returncode == 0, (
                f"the copier exited {copier.returncode}:\n{out[-2000:]}\n{err[-2000:]}"
            )
            assert '"stage":"ShutdownComplete"' in out, out[-2000:]
            assert '"remaining":0' in out.splitlines()[-1], out[-2000:]
    finally:
        for copier in copiers:
            if copier.poll() is None:
                copier.kill()
                copier.wait(10)

    expected = sorted(v.decode() for _, v in inputs)
    read = kafka.run(
        CONSOLE_CONSUMER,
        *("--bootstrap-server", target.bootstrap, "--topic", sink, "--from-beginning"),
        *(
            "--isolation-level",
            "read_committed",
            "--max-messages",
            str(len(inputs) + 1),
            "--timeout-ms",
            "5000",
        ),
    )
    assert sorted(read.stdout.split()) == expected, read.stderr[-2000:]
    assert [v.decode() for v in values(read_all(target.bootstrap, sink, 3, READ_COMMITTED))] == expected
    assert committed(target.bootstrap, group, source, 2) == {0: 200, 1: 200}


def table(text: str) -> list[dict[str, str]]:
    """kafka-transactions' tab-separated output: one dict per row, keyed by the header's columns."""
    lines = [line.split("\t") for line in text.splitlines() if line.strip()]
    header = [cell.strip() for cell in lines[0]]
    rows = [dict(zip(header, (cell.strip() for cell in row), strict=False)) for row in lines[1:]]
    return [{k: v for k, v in row.items() if k} for row in rows]  # each line ends with a tab


def transactions_tool(target: Target, *args: str) -> subprocess.CompletedProcess[str]:
    return clients.tool(kafka.TRANSACTIONS, "--bootstrap-server", target.bootstrap, *args)


def open_transaction(target: Target, topic: str, txn_id: str) -> Any:
    """A librdkafka producer in the middle of a transaction that wrote one record to partition 1."""
    producer = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=1)
    assert producer.flush(30) == 0
    return producer


def test_kafka_transactions_tool_lists_and_describes(target: Target) -> None:
    topic, txn_id = unique("tool-tx"), unique("tool-id")
    create_topics(target.bootstrap, {topic: 2})
    producer = open_transaction(target, topic, txn_id)

    described = transactions_tool(target, "describe", "--transactional-id", txn_id)
    assert described.returncode == 0, described.stderr
    [row] = table(described.stdout)
    assert row["TransactionalId"] == txn_id
    assert row["ProducerEpoch"] == "0"
    assert row["TransactionState"] == "Ongoing"
    assert row["TransactionTimeoutMs"] == "60000"
    assert row["TopicPartitions"] == f"{topic}-1"
    listed = transactions_tool(target, "list")
    assert listed.returncode == 0, listed.stderr
    mine = [r for r in table(listed.stdout) if r["TransactionalId"] == txn_id]
    assert mine == [
        {
            "TransactionalId": txn_id,
            "Coordinator": row["CoordinatorId"],
            "ProducerId": row["ProducerId"],
            "TransactionState": "Ongoing",
        }
    ]

    producer.commit_transaction(30)
    after = transactions_tool(target, "describe", "--transactional-id", txn_id)
    assert after.returncode == 0, after.stderr
    [row] = table(after.stdout)
    assert (row["TransactionState"], row["TopicPartitions"]) == ("CompleteCommit", "")
    unknown = transactions_tool(target, "describe", "--transactional-id", unique("never-seen"))
    assert unknown.returncode == 1
    assert "could not be found" in unknown.stderr  # TRANSACTIONAL_ID_NOT_FOUND


def test_kafka_transactions_tool_describes_producers(target: Target) -> None:
    topic, txn_id = unique("tool-tx"), unique("tool-id")
    create_topics(target.bootstrap, {topic: 2})
    producer = open_transaction(target, topic, txn_id)
    described = transactions_tool(target, "describe-producers", "--topic", topic, "--partition", "1")
    assert described.returncode == 0, described.stderr
    [row] = table(described.stdout)
    assert (row["ProducerEpoch"], row["LastSequence"], row["CurrentTransactionStartOffset"]) == (
        "0",
        "0",
        "0",
    )
    producer.commit_transaction(30)
    described = transactions_tool(target, "describe-producers", "--topic", topic, "--partition", "1")
    [row] = table(described.stdout)
    assert row["CurrentTransactionStartOffset"] == "None"  # no open transaction


def test_streams_word_count_exactly_once(target: Target) -> None:
    app = unique("wordcount-eos")
    answer = scenario(
        "streams", target.bootstrap, timeout=180, app=app, count=LINES, guarantee="exactly_once_v2"
    )
    assert answer.get("failures") == [], answer
    assert answer["state"] == "RUNNING"
    counts = answer["counts"]
    # Read committed: every input line counted once, each word's counts 1..n with nothing repeated.
    assert sum(len(c) for c in counts.values()) == LINES
    assert all(c == list(range(1, len(c) + 1)) for c in counts.values()), counts
    assert set(answer["internal_topics"]) == {"by-word-repartition", "word-counts-changelog"}
