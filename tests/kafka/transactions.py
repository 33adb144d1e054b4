"""What the transaction acceptance tests share: topics, plain records, and reads through librdkafka at either
isolation level (its reads stop at the end of each partition, so a test never waits for a timeout to know it
has seen everything).

Offsets in these tests count the markers: a committed or aborted transaction takes one offset (its control
record) in each partition it wrote to, which no consumer returns as a record but which moves the high
watermark. A read_committed read ends at the last stable offset (the first offset of the oldest open
transaction), a read_uncommitted one at the high watermark.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.fixtures.targets import Target

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"
READ_TIMEOUT_S = 30.0
COORDINATOR_NOT_READY = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)


@dataclass(frozen=True, order=True)
class Seen:
    partition: int
    offset: int
    value: bytes


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    """Create each topic with its number of partitions (replication factor 1), and wait for it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, n, 1) for name, n in topics.items()], operation_timeout=30)
    for future in futures.values():
        future.result(timeout=30)
    # Kafka answers CreateTopics once the controller has them; its broker may not lead them yet, and raw
    # requests (no client retries) would get UNKNOWN_TOPIC_OR_PARTITION. Wait until metadata shows leaders.
    deadline = time.monotonic() + READ_TIMEOUT_S
    for name, count in topics.items():
        while not _led(admin, name, count):
            assert time.monotonic() < deadline, f"{name} has no leader for every partition"
            time.sleep(0.1)


def _led(admin: AdminClient, topic: str, partitions: int) -> bool:
    found = admin.list_topics(topic, timeout=10).topics[topic]
    if found.error is not None or len(found.partitions) != partitions:
        return False
    return all(p.error is None and p.leader >= 0 for p in found.partitions.values())


def produce_plain(bootstrap: str, topic: str, records: list[tuple[int, bytes]]) -> None:
    """Non-transactional records, each to its partition, acknowledged by all replicas."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    failed: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    for partition, value in records:
        producer.produce(topic, value=value, partition=partition, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert failed == []


def consumer(bootstrap: str, isolation: str, group: str = "unused", **extra: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            **extra,
        }
    )


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[Seen]:
    """Every record a consumer at ``isolation`` returns from offset 0 up to the end of each partition."""
    reader = consumer(bootstrap, isolation)
    seen: list[Seen] = []
    at_end: set[int] = set()
    try:
        reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, (
                f"{topic}: no end of partitions {set(range(partitions)) - at_end}"
            )
            msg = reader.poll(0.5)
            if msg is None:
                continue
            err, partition, offset, value = msg.error(), msg.partition(), msg.offset(), msg.value()
            assert partition is not None
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, err
                at_end.add(partition)
                continue
            assert offset is not None
            assert isinstance(value, bytes)
            seen.append(Seen(partition, offset, value))
    finally:
        reader.close()
    return sorted(seen)


def values(seen: list[Seen]) -> list[bytes]:
    return sorted(s.value for s in seen)


def watermarks(bootstrap: str, topic: str, partition: int, isolation: str) -> tuple[int, int]:
    """(low, high) as librdkafka queries them: ListOffsets at the consumer's isolation level, so ``high`` is
    the last stable offset for read_committed and the high watermark for read_uncommitted."""
    reader = consumer(bootstrap, isolation)
    try:
        low, high = reader.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(low), int(high)
    finally:
        reader.close()


def settled_watermarks(
    target: Target, topic: str, partition: int, isolation: str, want: tuple[int, int]
) -> tuple[int, int]:
    """``watermarks`` right after a transaction ended. Strata writes the markers before it answers EndTxn,
    so its answer is read once. Kafka writes them after it has answered, so on the reference broker the
    last stable offset can still be the transaction's first offset for a moment: it is read until it is
    ``want``, or READ_TIMEOUT_S has passed (then the last answer is returned, for the caller's assert)."""
    deadline = time.monotonic() + READ_TIMEOUT_S
    while True:
        seen = watermarks(target.bootstrap, topic, partition, isolation)
        if target.name != "reference" or seen == want or time.monotonic() > deadline:
            return seen
        time.sleep(0.1)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (partitions without one left out). A read_committed consumer asks with
    require_stable, so a transaction's offsets are read only once its commit is complete."""
    deadline = time.monotonic() + READ_TIMEOUT_S
    while True:
        reader = consumer(bootstrap, READ_COMMITTED, group=group)
        try:
            found = reader.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
            return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
        except KafkaException as exc:
            # A fresh Kafka creates its offsets topic at the first question about a group, and answers
            # NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS until it has; librdkafka gives those up.
            code = exc.args[0].code()
            if code not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                raise
        finally:
            reader.close()
        time.sleep(0.2)
