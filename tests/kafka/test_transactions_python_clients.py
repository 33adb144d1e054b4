"""Kafka transactions through kafka-python 3.0 and aiokafka 0.14, against Strata and the reference broker.

kafka-python sends InitProducerId up to v4 and AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
TxnOffsetCommit up to v3 (the highest both sides know); aiokafka sends all of them at v0 (and so gets
INVALID_PRODUCER_EPOCH, not PRODUCER_FENCED, when fenced). Both consumers default to read_uncommitted and are
told read_committed here where it matters. Each client's own consumer reads its own writes; librdkafka
checks the committed group offsets and the output of the copy loops.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import OffsetAndMetadata as AioOffsetAndMetadata
from aiokafka.structs import TopicPartition as AioTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.structs import OffsetAndMetadata

from tests.fixtures.targets import Target, unique
from tests.kafka.transactions import READ_COMMITTED, committed, create_topics, produce_plain, read_all, values

pytestmark = pytest.mark.integration
READ_TIMEOUT_S = 30.0

# What each test writes to a topic of 2 partitions: a committed transaction to both, then an aborted one to
# partition 0. Partition 0: c0-0..c0-3 at 0..3, the commit marker at 4, x0-0..x0-2 at 5..7, the abort marker
# at 8. Partition 1: c1-0, c1-1, the commit marker at 2.
COMMITTED = [(0, b"c0-%d" % i) for i in range(4)] + [(1, b"c1-%d" % i) for i in range(2)]
ABORTED = [(0, b"x0-%d" % i) for i in range(3)]
ENDS = {0: 9, 1: 3}


def read_with_kafka_python(
    bootstrap: str, topic: str, isolation: str
) -> tuple[list[tuple[int, int, bytes]], dict[int, int]]:
    """Everything a kafka-python consumer at ``isolation`` returns until its positions reach the end offsets
    (which it asks for at its isolation level), and those end offsets."""
    reader = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    parts = [KpTopicPartition(topic, p) for p in ENDS]
    seen: list[tuple[int, int, bytes]] = []
    try:
        reader.assign(parts)
        reader.seek_to_beginning()
        ends = {tp.partition: offset for tp, offset in reader.end_offsets(parts).items()}
        deadline = time.monotonic() + READ_TIMEOUT_S
        while any(reader.position(tp) < ends[tp.partition] for tp in parts):
            assert time.monotonic() < deadline, (
                f"positions {[reader.position(tp) for tp in parts]}, ends {ends}"
            )
            for records in reader.poll(timeout_ms=200).values():
                seen.extend((r.partition, r.offset, r.value) for r in records)
    finally:
        reader.close()
    return sorted(seen), ends


def test_kafka_python_commit_abort_and_isolation_levels(target: Target) -> None:
    topic = unique("kp-tx")
    create_topics(target.bootstrap, {topic: 2})
    producer = KafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=unique("kp-id"))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for partition, value in COMMITTED:
            producer.send(topic, value=value, partition=partition)
        producer.commit_transaction()
        producer.begin_transaction()
        aborted = [producer.send(topic, value=value, partition=partition) for partition, value in ABORTED]
        producer.flush()
        assert [f.get(timeout=10).offset for f in aborted] == [5, 6, 7]
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)

    # Both consumers read up to the end (past the abort marker at 8); read_committed returns only the
    # committed records, read_uncommitted the aborted ones too, and neither a marker.
    on_committed, ends = read_with_kafka_python(target.bootstrap, topic, "read_committed")
    assert ends == ENDS
    assert on_committed == sorted(
        [(0, i, v) for i, (_, v) in enumerate(COMMITTED[:4])]
        + [(1, i, v) for i, (_, v) in enumerate(COMMITTED[4:])]
    )
    on_uncommitted, ends = read_with_kafka_python(target.bootstrap, topic, "read_uncommitted")
    assert ends == ENDS
    assert [(p, o) for p, o, _ in on_uncommitted] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (0, 3),
        (0, 5),
        (0, 6),
        (0, 7),
        (1, 0),
        (1, 1),
    ]
    assert sorted(v for _, _, v in on_uncommitted) == sorted(v for _, v in COMMITTED + ABORTED)


def test_kafka_python_send_offsets_to_transaction(target: Target) -> None:
    source, sink, group = unique("kp-in"), unique("kp-out"), unique("kp-group")
    create_topics(target.bootstrap, {source: 2, sink: 2})
    inputs = [(p, b"in-%d-%d" % (p, i)) for p in range(2) for i in range(10)]
    produce_plain(target.bootstrap, source, inputs)
    reader = KafkaConsumer(
        source,
        bootstrap_servers=target.bootstrap,
        group_id=group,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=6,
    )
    producer = KafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=unique("kp-id"))
    copied, transactions = 0, 0
    try:
        producer.init_transactions()
        deadline = time.monotonic() + READ_TIMEOUT_S
        while copied < len(inputs):
            assert time.monotonic() < deadline, f"copied {copied} of {len(inputs)}"
            batch = [r for records in reader.poll(timeout_ms=500).values() for r in records]
            if not batch:
                continue
            transactions += 1
            producer.begin_transaction()
            for r in batch:
                producer.send(sink, value=r.value, partition=r.partition)
            offsets = {tp: OffsetAndMetadata(reader.position(tp), "", -1) for tp in reader.assignment()}
            producer.send_offsets_to_transaction(offsets, reader.group_metadata())
            producer.commit_transaction()
            copied += len(batch)
    finally:
        reader.close()
        producer.close(timeout=10)
    assert transactions >= 4  # at most 6 records a poll
    assert committed(target.bootstrap, group, source, 2) == {0: 10, 1: 10}
    assert values(read_all(target.bootstrap, sink, 2, READ_COMMITTED)) == sorted(v for _, v in inputs)


class Rollback(Exception):
    """Raised inside aiokafka's transaction context to make it abort."""


async def abort_in_context(producer: AIOKafkaProducer, work: Callable[[], Awaitable[None]]) -> None:
    """``work`` inside ``async with producer.transaction()``, left with an exception: the context aborts."""
    async with producer.transaction():
        await work()
        raise Rollback


async def read_with_aiokafka(bootstrap: str, topic: str, isolation: str) -> list[tuple[int, int, bytes]]:
    reader = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False
    )
    parts = [AioTopicPartition(topic, p) for p in ENDS]
    seen: list[tuple[int, int, bytes]] = []
    try:
        await reader.start()
        reader.assign(parts)
        await reader.seek_to_beginning(*parts)
        ends = {tp.partition: offset for tp, offset in (await reader.end_offsets(parts)).items()}
        assert ends == ENDS
        deadline = time.monotonic() + READ_TIMEOUT_S
        while [await reader.position(tp) for tp in parts] != [ends[tp.partition] for tp in parts]:
            assert time.monotonic() < deadline, f"ends {ends}"
            for records in (await reader.getmany(timeout_ms=200)).values():
                seen.extend((r.partition, r.offset, r.value) for r in records)
    finally:
        await reader.stop()
    return sorted(seen)


async def test_aiokafka_transaction_context_commits_and_aborts(target: Target) -> None:
    topic = unique("aio-tx")
    create_topics(target.bootstrap, {topic: 2})
    producer = AIOKafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=unique("aio-id"))
    try:
        await producer.start()
        async with producer.transaction():
            for partition, value in COMMITTED:
                await producer.send(topic, value=value, partition=partition)
        sent: list[Any] = []

        async def write_aborted() -> None:
            sent.extend([await producer.send_and_wait(topic, value=v, partition=p) for p, v in ABORTED])

        with pytest.raises(Rollback):
            await abort_in_context(producer, write_aborted)
        assert [m.offset for m in sent] == [5, 6, 7]
    finally:
        await producer.stop()

    on_committed = await read_with_aiokafka(target.bootstrap, topic, "read_committed")
    assert on_committed == sorted(
        [(0, i, v) for i, (_, v) in enumerate(COMMITTED[:4])]
        + [(1, i, v) for i, (_, v) in enumerate(COMMITTED[4:])]
    )
    on_uncommitted = await read_with_aiokafka(target.bootstrap, topic, "read_uncommitted")
    assert [(p, o) for p, o, _ in on_uncommitted] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (0, 3),
        (0, 5),
        (0, 6),
        (0, 7),
        (1, 0),
        (1, 1),
    ]


async def copy(
    producer: AIOKafkaProducer, sink: str, batch: list[Any], offsets: dict[Any, Any], group: str
) -> None:
    """Inside a transaction: each record to the same partition of ``sink``, then the consumer's positions."""
    for r in batch:
        await producer.send(sink, value=r.value, partition=r.partition)
    await producer.send_offsets_to_transaction(offsets, group)


async def test_aiokafka_send_offsets_to_transaction(target: Target) -> None:
    source, sink, group = unique("aio-in"), unique("aio-out"), unique("aio-group")
    create_topics(target.bootstrap, {source: 2, sink: 2})
    inputs = [(p, b"in-%d-%d" % (p, i)) for p in range(2) for i in range(10)]
    produce_plain(target.bootstrap, source, inputs)
    reader = AIOKafkaConsumer(
        source,
        bootstrap_servers=target.bootstrap,
        group_id=group,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    producer = AIOKafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=unique("aio-id"))
    copied, aborted = 0, 0
    try:
        await reader.start()
        await producer.start()
        deadline = time.monotonic() + READ_TIMEOUT_S
        while copied < len(inputs):
            assert time.monotonic() < deadline, f"copied {copied} of {len(inputs)}"
            batch = [r for rs in (await reader.getmany(timeout_ms=500, max_records=6)).values() for r in rs]
            if not batch:
                continue
            offsets = {tp: AioOffsetAndMetadata(await reader.position(tp), "") for tp in reader.assignment()}
            if aborted == 0:
                # The first batch is copied in a transaction that aborts; the consumer goes back to where
                # the group's committed offsets say (none yet: the beginning).

                with pytest.raises(Rollback):
                    await abort_in_context(producer, partial(copy, producer, sink, batch, offsets, group))
                aborted = len(batch)
                await reader.seek_to_beginning()
                continue
            async with producer.transaction():
                await copy(producer, sink, batch, offsets, group)
            copied += len(batch)
    finally:
        await producer.stop()
        await reader.stop()
    assert aborted > 0
    assert committed(target.bootstrap, group, source, 2) == {0: 10, 1: 10}
    assert values(read_all(target.bootstrap, sink, 2, READ_COMMITTED)) == sorted(v for _, v in inputs)
