"""Kafka transactions through confluent-kafka (librdkafka 2.16) against Strata and the reference Kafka broker.

Each test runs against both (the ``target`` fixture): the reference shows the test is right, Strata must give
the same answers. librdkafka drives transaction version 1: FindCoordinator(key type 1), InitProducerId v4,
AddPartitionsToTxn v0, AddOffsetsToTxn v0, TxnOffsetCommit v3, EndTxn v1; its consumers are read_committed
by default, fetch with the aborted-transactions list, ask ListOffsets at their isolation level and fetch
committed offsets with require_stable.

What the tests pin down: commit and abort across topics and partitions, one offset per marker, what each
isolation level returns (never a control record), the last stable offset while a transaction is open, the
consume-transform-produce loop with ``send_offsets_to_transaction`` (one transaction aborted and replayed),
fencing by a second producer with the same transactional id, a transaction timeout above the broker's
maximum, and empty transactions.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from tests.fixtures.targets import Target, unique
from tests.kafka.transactions import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Seen,
    committed,
    consumer,
    create_topics,
    produce_plain,
    read_all,
    settled_watermarks,
    values,
    watermarks,
)

pytestmark = pytest.mark.integration
TXN_TIMEOUT_S = 30.0  # the first InitProducerId on a fresh Kafka waits for its transaction log


def transactional(bootstrap: str, txn_id: str, **extra: object) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})


class Deliveries:
    """Where librdkafka says each record went: (topic, partition, offset, value)."""

    def __init__(self) -> None:
        self.done: list[tuple[str, int, int, bytes]] = []
        self.failed: list[KafkaError] = []

    def __call__(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self.failed.append(err)
            return
        self.done.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))  # type: ignore[attr-defined]

    def offsets(self, topic: str, partition: int) -> list[int]:
        return sorted(o for t, p, o, _ in self.done if (t, p) == (topic, partition))


def fatal_error(excinfo: pytest.ExceptionInfo[KafkaException]) -> KafkaError:
    err = excinfo.value.args[0]
    assert isinstance(err, KafkaError)
    return err


def test_commit_and_abort_across_topics_and_partitions(target: Target) -> None:
    orders, audit = unique("tx-orders"), unique("tx-audit")
    create_topics(target.bootstrap, {orders: 3, audit: 1})
    producer = transactional(target.bootstrap, unique("tx-id"))
    sent = Deliveries()
    producer.init_transactions(TXN_TIMEOUT_S)

    producer.begin_transaction()
    committed_records = [(orders, 0, b"o0-%d" % i) for i in range(5)]
    committed_records += [(orders, 1, b"o1-%d" % i) for i in range(3)]
    committed_records += [(audit, 0, b"a0-%d" % i) for i in range(2)]
    for topic, partition, value in committed_records:
        producer.produce(topic, value=value, partition=partition, on_delivery=sent)
    producer.commit_transaction(TXN_TIMEOUT_S)
    # Each partition the transaction wrote to holds its records, then one offset for the commit marker.
    for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
        for topic, partition, high in (
            (orders, 0, 5 + 1),
            (orders, 1, 3 + 1),
            (orders, 2, 0),
            (audit, 0, 2 + 1),
        ):
            want = (0, high)
            assert settled_watermarks(target, topic, partition, isolation, want) == want

    producer.begin_transaction()
    aborted_records = [(orders, 0, b"x0-0"), (orders, 0, b"x0-1"), (orders, 2, b"x2-0")]
    for topic, partition, value in aborted_records:
        producer.produce(topic, value=value, partition=partition, on_delivery=sent)
    assert producer.flush(30) == 0  # abort_transaction would purge what is still queued: write it first
    producer.abort_transaction(TXN_TIMEOUT_S)
    assert sent.failed == []
    assert sent.offsets(orders, 0) == [0, 1, 2, 3, 4, 6, 7]  # offset 5 is the commit marker
    assert sent.offsets(orders, 2) == [0]

    # read_committed returns exactly the committed records, at offsets 0.. in each partition.
    expected = sorted(
        Seen(p, i, v)
        for p in (0, 1)
        for i, v in enumerate(v for t, q, v in committed_records if (t, q) == (orders, p))
    )
    assert read_all(target.bootstrap, orders, 3, READ_COMMITTED) == expected
    assert values(read_all(target.bootstrap, audit, 1, READ_COMMITTED)) == [b"a0-0", b"a0-1"]
    # read_uncommitted returns the aborted records too, at their offsets, and never a marker.
    uncommitted = read_all(target.bootstrap, orders, 3, READ_UNCOMMITTED)
    assert [(s.partition, s.offset) for s in uncommitted] == [
        *((0, o) for o in (0, 1, 2, 3, 4, 6, 7)),
        *((1, o) for o in (0, 1, 2)),
        (2, 0),
    ]
    assert values(uncommitted) == sorted(v for t, _, v in committed_records + aborted_records if t == orders)
    # The abort marker takes an offset as well.
    want = (0, 7 + 1 + 1)
    assert settled_watermarks(target, orders, 0, READ_COMMITTED, want) == want
    want = (0, 1 + 1)
    assert settled_watermarks(target, orders, 2, READ_UNCOMMITTED, want) == want


def test_read_committed_stops_at_an_open_transaction(target: Target) -> None:
    topic = unique("tx-open")
    create_topics(target.bootstrap, {topic: 1})
    producer = transactional(target.bootstrap, unique("tx-id"))
    producer.init_transactions(TXN_TIMEOUT_S)
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, value=b"done-%d" % i, partition=0)
    producer.commit_transaction(TXN_TIMEOUT_S)  # offsets 0, 1 and the marker at 2

    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"open-%d" % i, partition=0)
    assert producer.flush(30) == 0  # offsets 3..5, in a transaction still open
    # librdkafka asks ListOffsets at the consumer's isolation level: read_committed gets the last stable
    # offset (the open transaction's first offset), read_uncommitted the high watermark.
    assert watermarks(target.bootstrap, topic, 0, READ_COMMITTED) == (0, 3)
    assert watermarks(target.bootstrap, topic, 0, READ_UNCOMMITTED) == (0, 6)
    assert read_all(target.bootstrap, topic, 1, READ_COMMITTED) == [
        Seen(0, 0, b"done-0"),
        Seen(0, 1, b"done-1"),
    ]
    assert [s.offset for s in read_all(target.bootstrap, topic, 1, READ_UNCOMMITTED)] == [0, 1, 3, 4, 5]

    producer.commit_transaction(TXN_TIMEOUT_S)
    assert watermarks(target.bootstrap, topic, 0, READ_COMMITTED) == (0, 7)
    assert [s.offset for s in read_all(target.bootstrap, topic, 1, READ_COMMITTED)] == [0, 1, 3, 4, 5]


def test_consume_transform_produce_commits_what_it_copied(target: Target) -> None:
    """The copy loop of librdkafka's 0103 consumer_producer_txn test: a group consumer reads the input, each
    transaction writes the copies and the consumer's positions (send_offsets_to_transaction with its group
    metadata, so TxnOffsetCommit carries the generation and member id); the second transaction is aborted
    and the consumer rewinds to the last committed positions, as an application does."""
    source, sink, group = unique("tx-in"), unique("tx-out"), unique("tx-group")
    create_topics(target.bootstrap, {source: 3, sink: 3})
    inputs = [(p, b"in-%d-%d" % (p, i)) for p in range(3) for i in range(10)]
    produce_plain(target.bootstrap, source, inputs)

    reader = consumer(target.bootstrap, READ_COMMITTED, group=group, **{"enable.partition.eof": False})
    producer = transactional(target.bootstrap, unique("tx-id"))
    producer.init_transactions(TXN_TIMEOUT_S)
    positions = {p: 0 for p in range(3)}  # what the last committed transaction consumed up to
    copied, transactions, aborted = 0, 0, 0
    try:
        reader.subscribe([source])
        while copied < len(inputs):
            assert transactions < 30, f"copied {copied} of {len(inputs)} in {transactions} transactions"
            batch = reader.consume(num_messages=7, timeout=1.0)
            if not batch:
                continue
            transactions += 1
            producer.begin_transaction()
            for msg in batch:
                assert msg.error() is None, msg.error()
                partition = msg.partition()
                assert partition is not None
                producer.produce(sink, value=msg.value(), partition=partition)
            ends = reader.position(reader.assignment())
            producer.send_offsets_to_transaction(ends, reader.consumer_group_metadata(), TXN_TIMEOUT_S)
            if transactions == 2:
                assert producer.flush(30) == 0
                producer.abort_transaction(TXN_TIMEOUT_S)
                aborted = len(batch)
                for partition, offset in positions.items():
                    reader.seek(TopicPartition(source, partition, offset))
                continue
            producer.commit_transaction(TXN_TIMEOUT_S)
            copied += len(batch)
            positions.update({tp.partition: tp.offset for tp in ends if tp.offset >= 0})
    finally:
        reader.close()

    assert aborted > 0
    assert positions == {0: 10, 1: 10, 2: 10}
    assert committed(target.bootstrap, group, source, 3) == {0: 10, 1: 10, 2: 10}
    on_committed = read_all(target.bootstrap, sink, 3, READ_COMMITTED)
    assert values(on_committed) == sorted(v for _, v in inputs)  # every input once, nothing aborted
    assert all(s.value.startswith(b"in-%d-" % s.partition) for s in on_committed)
    on_uncommitted = read_all(target.bootstrap, sink, 3, READ_UNCOMMITTED)
    assert len(on_uncommitted) == len(inputs) + aborted
    assert set(values(on_uncommitted)) == set(values(on_committed))


def test_a_second_producer_with_the_same_id_fences_the_first(target: Target) -> None:
    topic, txn_id = unique("tx-fence"), unique("tx-id")
    create_topics(target.bootstrap, {topic: 1})
    zombie = transactional(target.bootstrap, txn_id)
    zombie.init_transactions(TXN_TIMEOUT_S)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    assert zombie.flush(30) == 0

    # The new instance's InitProducerId bumps the epoch and aborts the open transaction (Kafka answers
    # CONCURRENT_TRANSACTIONS until the abort is complete, and librdkafka retries).
    fresh = transactional(target.bootstrap, txn_id)
    fresh.init_transactions(TXN_TIMEOUT_S)
    with pytest.raises(KafkaException) as excinfo:
        zombie.commit_transaction(TXN_TIMEOUT_S)
    err = fatal_error(excinfo)
    assert err.code() == KafkaError._FENCED, err
    assert err.fatal()

    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh", partition=0)
    fresh.commit_transaction(TXN_TIMEOUT_S)
    assert values(read_all(target.bootstrap, topic, 1, READ_COMMITTED)) == [b"fresh"]
    # The zombie's record is in the log, aborted by the fencing: offset 0, its abort marker at 1.
    assert read_all(target.bootstrap, topic, 1, READ_UNCOMMITTED) == [
        Seen(0, 0, b"zombie"),
        Seen(0, 2, b"fresh"),
    ]


def test_a_transaction_timeout_above_the_brokers_maximum_is_refused(target: Target) -> None:
    # transaction.max.timeout.ms is 900000 by default; librdkafka sends the client's timeout as is.
    producer = transactional(target.bootstrap, unique("tx-id"), **{"transaction.timeout.ms": 2147483647})
    with pytest.raises(KafkaException) as excinfo:
        producer.init_transactions(TXN_TIMEOUT_S)
    err = fatal_error(excinfo)
    assert err.code() == KafkaError.INVALID_TRANSACTION_TIMEOUT, err
    assert err.fatal()


@pytest.mark.parametrize("with_offsets", [False, True], ids=["nothing", "offsets"])
@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_empty_transactions(target: Target, commit: bool, with_offsets: bool) -> None:
    """librdkafka 0103 empty_txn: a transaction that writes nothing (or only offsets) ends cleanly, leaves
    no marker in the data partitions, and the producer's next transaction works."""
    topic, group = unique("tx-empty"), unique("tx-group")
    create_topics(target.bootstrap, {topic: 1})
    produce_plain(target.bootstrap, topic, [(0, b"plain-%d" % i) for i in range(10)])
    producer = transactional(target.bootstrap, unique("tx-id"))
    producer.init_transactions(TXN_TIMEOUT_S)
    producer.begin_transaction()
    if with_offsets:
        member = consumer(target.bootstrap, READ_COMMITTED, group=group)
        try:
            metadata = member.consumer_group_metadata()
        finally:
            member.close()
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 10)], metadata, TXN_TIMEOUT_S)
    if commit:
        producer.commit_transaction(TXN_TIMEOUT_S)
    else:
        producer.abort_transaction(TXN_TIMEOUT_S)

    assert committed(target.bootstrap, group, topic, 1) == ({0: 10} if commit and with_offsets else {})
    for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
        assert watermarks(target.bootstrap, topic, 0, isolation) == (0, 10)

    producer.begin_transaction()
    producer.produce(topic, value=b"after", partition=0)
    producer.commit_transaction(TXN_TIMEOUT_S)
    assert settled_watermarks(target, topic, 0, READ_COMMITTED, (0, 12)) == (0, 12)
    assert read_all(target.bootstrap, topic, 1, READ_COMMITTED)[-1] == Seen(0, 10, b"after")
