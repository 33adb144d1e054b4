"""What every EOS client shares: client settings, topic creation, and reading partitions to their end.

``drain`` is the final, complete read the checker's lost-write needs: a read_committed consumer assigned
every partition from offset 0, reading until its position reaches the partition's last stable offset (LSO),
and the LSO equals the high watermark (HWM). LSO < HWM means a transaction still open (a hanging
transaction if nothing will end it), so a drain that cannot get there before its deadline is incomplete,
and says so rather than pretending to be complete.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # where it is defined and typed; admin re-exports it untyped

from tests.eos.history import Record

# Every client of the harness. librdkafka logs at warning and above only; its errors the harness meets come
# back as exceptions. Reconnects are tried at most a second apart (librdkafka's default backs off to 10 s):
# a client that still counts a restarted agent down when the other agent is killed sees every broker down
# at once and re-bootstraps, and a re-bootstrap decommissions the broker that a pending
# send_offsets_to_transaction waits on, which then never returns, past its timeout (librdkafka 2.16,
# measured here with debug=eos,broker; https://github.com/confluentinc/librdkafka/issues/5511).
CLIENT = {"log_level": 4, "reconnect.backoff.max.ms": 1000}


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Creates ``topic``; retried while the cluster answers with a retriable error (an agent restarting)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT})
    deadline = time.monotonic() + timeout
    while True:
        future = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[
            topic
        ]
        try:
            future.result(timeout)
            break
        except KafkaException as e:
            error: KafkaError = e.args[0]
            if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                break
            if not error.retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    # Metadata reaches every broker a little after CreateTopics answers; wait until the leaders are known.
    while time.monotonic() < deadline:
        metadata = admin.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None or len(metadata.partitions) != partitions:
            time.sleep(0.2)
            continue
        if all(p.leader >= 0 for p in metadata.partitions.values()):
            return
        time.sleep(0.2)
    raise TimeoutError(f"topic {topic} has no leader for every partition after {timeout} s")


def record_of(message: Any) -> Record:
    """A polled message as a Record; values are decimal integers, keys text."""
    key = message.key()
    return Record(
        message.topic(),
        message.partition(),
        message.offset(),
        key.decode() if key else None,
        int(message.value()),
    )


def read_committed_consumer(bootstrap: str, group: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            **CLIENT,
            **extra,
        }
    )


@dataclass
class DrainResult:
    records: list[Record] = field(default_factory=list)
    ends: dict[tuple[str, int], int] = field(default_factory=dict)  # LSO each partition was read to
    hwm: dict[tuple[str, int], int] = field(default_factory=dict)
    complete: bool = False
    errors: list[str] = field(default_factory=list)


def _ends(
    probe: Consumer, consumer: Consumer, tps: list[TopicPartition]
) -> tuple[dict[Any, int], dict[Any, int]]:
    """Each partition's LSO (a read_committed ListOffsets) and HWM (a read_uncommitted one)."""
    lso, hwm = {}, {}
    for tp in tps:
        lso[(tp.topic, tp.partition)] = consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1]
        hwm[(tp.topic, tp.partition)] = probe.get_watermark_offsets(tp, timeout=10, cached=False)[1]
    return lso, hwm


def drain(
    bootstrap: str,
    partitions: list[tuple[str, int]],
    timeout: float,
    stop: threading.Event | None = None,
    group: str = "eos-drain",
) -> DrainResult:
    """Reads every partition from offset 0 until position = LSO = HWM everywhere, or ``timeout`` passes.

    With ``stop``, keeps reading (a concurrent consumer) until the event is set, then reads to the end; the
    timeout counts from then.
    """
    consumer = read_committed_consumer(bootstrap, group)
    probe = read_committed_consumer(bootstrap, group + "-probe", **{"isolation.level": "read_uncommitted"})
    tps = [TopicPartition(t, p, OFFSET_BEGINNING) for t, p in partitions]
    consumer.assign(tps)
    result = DrainResult()
    deadline = None if stop is not None else time.monotonic() + timeout
    try:
        while True:
            for message in consumer.consume(500, 0.2):
                if message.error() is not None:
                    result.errors.append(str(message.error()))
                    continue
                result.records.append(record_of(message))
            if deadline is None:
                if stop is not None and not stop.is_set():
                    continue
                deadline = time.monotonic() + timeout
            try:
                lso, hwm = _ends(probe, consumer, tps)
            except KafkaException as e:  # a broker restarting: ask again on the next round
                result.errors.append(str(e))
                continue
            positions = {(tp.topic, tp.partition): tp.offset for tp in consumer.position(tps)}
            # A partition never fetched from has no position yet; if it is empty, it is at its end.
            done = all(
                lso[k] == hwm[k] and (positions[k] >= lso[k] or (positions[k] < 0 and lso[k] == 0))
                for k in lso
            )
            result.ends, result.hwm = lso, hwm
            if done:
                result.complete = True
                return result
            if time.monotonic() > deadline:
                result.ends = {k: max(positions[k], 0) for k in lso}
                return result
    finally:
        consumer.close()
        probe.close()
