"""Idempotent producers over the Kafka door: real clients, raw frames, restarts and two agents.

kafka-python enables idempotence by default and librdkafka on request; both must get every record
written exactly once, retries included. The raw-protocol tests resend one batch (same producer id, epoch
and sequence) and check the original offset comes back with nothing written twice, then break the
sequence and the epoch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker import errors
from tests.fixtures.kafka import RunningBroker, run_broker
from tests.fixtures.server import local_settings
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration
N = 300


def producer_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    """A RecordBatch as an idempotent Java/kafka-python producer writes it."""
    builder = DefaultRecordBatchBuilder(2, 0, False, pid, epoch, seq, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_700_000_000_000, key=b"k", value=value, headers=[])
    return bytes(builder.build())


def produce(topic: str, partitions: dict[int, bytes], version: int = 9) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    return ProduceRequest[version](
        transactional_id=None,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[T(name=topic, partition_data=[P(index=i, records=r) for i, r in partitions.items()])],
    )


def send(wire: Wire, topic: str, partitions: dict[int, bytes]) -> dict[int, tuple[int, int]]:
    response = wire.call(produce(topic, partitions), ProduceResponse)
    return {p.index: (p.error_code, p.base_offset) for t in response.responses for p in t.partition_responses}


def init_producer_id(
    wire: Wire, version: int = 4, pid: int = -1, epoch: int = -1, txn: str | None = None
) -> Any:
    request = InitProducerIdRequest[version](
        transactional_id=txn, transaction_timeout_ms=60_000, producer_id=pid, producer_epoch=epoch
    )
    return wire.call(request, InitProducerIdResponse)


def high_watermark(broker: RunningBroker, topic: str, partition: int = 0) -> int:
    return broker.runtime.metadata.partition_state(topic, partition).high_watermark


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        consumer.assign([KpTopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.time() + 30
        while len(values) < expected and time.time() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                values.extend(m.value for m in batch)
        # Anything beyond ``expected`` would be a duplicate: give it a moment to show up.
        for batch in consumer.poll(timeout_ms=300).values():
            values.extend(m.value for m in batch)
        return values
    finally:
        consumer.close()


def test_kafka_python_default_idempotent_producer_writes_every_record_once(broker: RunningBroker) -> None:
    broker.runtime.metadata.create_topic("kpi", 3, {}, 0)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")  # enable_idempotence defaults on
    try:
        futures = [producer.send("kpi", key=f"k{i}".encode(), value=f"v{i}".encode()) for i in range(N)]
        producer.flush(30)
        metas = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(10)
    assert len({(m.partition, m.offset) for m in metas}) == N
    values = consume_all(broker.bootstrap, "kpi", 3, N)
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(N))
    assert sum(high_watermark(broker, "kpi", p) for p in range(3)) == N


def test_kafka_python_retries_after_timeouts_are_written_once(kafka_factory: Callable[..., Any]) -> None:
    # Flushes take longer than the client waits, so it gives up on requests and resends their batches
    # (same producer id, epoch and sequence) while the first copies are still being committed.
    with kafka_factory(flush_interval_ms=1200, flush_class="standard") as broker:
        broker.runtime.metadata.create_topic("retry", 2, {}, 0)
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap,
            acks="all",
            request_timeout_ms=700,
            delivery_timeout_ms=60_000,
            retry_backoff_ms=50,
            linger_ms=0,
        )
        try:
            futures = [
                producer.send("retry", key=f"k{i}".encode(), value=f"r{i}".encode()) for i in range(40)
            ]
            producer.flush(60)
            for f in futures:
                f.get(timeout=60)
        finally:
            producer.close(10)
        values = consume_all(broker.bootstrap, "retry", 2, 40)
        assert sorted(values) == sorted(f"r{i}".encode() for i in range(40))
        assert sum(high_watermark(broker, "retry", p) for p in range(2)) == 40


def test_confluent_kafka_idempotent_producer_writes_every_record_once(broker: RunningBroker) -> None:
    broker.runtime.metadata.create_topic("lri", 3, {}, 0)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    delivered: list[tuple[int, int]] = []
    failed: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            delivered.append((msg.partition(), msg.offset()))
        else:
            failed.append(err)

    for i in range(N):
        producer.produce("lri", key=f"k{i}".encode(), value=f"v{i}".encode(), on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert failed == []
    assert len(set(delivered)) == N
    values = consume_all(broker.bootstrap, "lri", 3, N)
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(N))


def test_a_resent_batch_gets_its_original_offset_and_is_not_written_twice(broker: RunningBroker) -> None:
    broker.runtime.metadata.create_topic("dup", 2, {}, 0)
    with Wire(broker.port) as wire:
        given = init_producer_id(wire)
        assert given.error_code == errors.NONE
        assert given.producer_id >= 0
        assert given.producer_epoch == 0
        pid = given.producer_id
        first = producer_batch(pid, 0, 0, [b"a", b"b"])
        second = producer_batch(pid, 0, 2, [b"c"])
        assert send(wire, "dup", {0: first, 1: producer_batch(pid, 0, 0, [b"x"])}) == {0: (0, 0), 1: (0, 0)}
        assert send(wire, "dup", {0: second}) == {0: (0, 2)}
        # The same batches again: their original offsets, and nothing new in the log.
        assert send(wire, "dup", {0: first}) == {0: (0, 0)}
        assert send(wire, "dup", {0: second, 1: producer_batch(pid, 0, 1, [b"y"])}) == {0: (0, 2), 1: (0, 1)}
        assert high_watermark(broker, "dup", 0) == 3
        assert high_watermark(broker, "dup", 1) == 2
        # A gap: OUT_OF_ORDER_SEQUENCE_NUMBER for that partition only.
        results = send(
            wire, "dup", {0: producer_batch(pid, 0, 9, [b"gap"]), 1: producer_batch(pid, 0, 2, [b"z"])}
        )
        assert results == {0: (errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1), 1: (0, 2)}
        assert high_watermark(broker, "dup", 0) == 3
        # KIP-360: the producer bumps its epoch and starts again at sequence 0.
        bumped = init_producer_id(wire, pid=pid, epoch=0)
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (errors.NONE, pid, 1)
        assert send(wire, "dup", {0: producer_batch(pid, 1, 0, [b"new"])}) == {0: (0, 3)}
        # The old epoch is fenced from the partition now.
        stale = send(wire, "dup", {0: producer_batch(pid, 0, 3, [b"old"])})
        assert stale == {0: (errors.INVALID_PRODUCER_EPOCH, -1)}
        assert high_watermark(broker, "dup", 0) == 4
    values = consume_all(broker.bootstrap, "dup", 1, 4)
    assert values == [b"a", b"b", b"c", b"new"]


def test_init_producer_id_fencing_codes_and_transactions(broker: RunningBroker) -> None:
    with Wire(broker.port) as wire:
        pid = init_producer_id(wire, version=0).producer_id
        assert init_producer_id(wire, pid=pid, epoch=0).producer_epoch == 1
        assert init_producer_id(wire, pid=pid, epoch=1).producer_epoch == 2
        # Epoch 0 is two bumps behind: PRODUCER_FENCED at v4, INVALID_PRODUCER_EPOCH for older clients.
        assert init_producer_id(wire, version=4, pid=pid, epoch=0).error_code == errors.PRODUCER_FENCED
        assert init_producer_id(wire, version=3, pid=pid, epoch=0).error_code == errors.INVALID_PRODUCER_EPOCH
        assert init_producer_id(wire, pid=pid, epoch=-1).error_code == errors.INVALID_REQUEST
        # A transactional id gets an id of its own (a new producer id), epoch 0.
        txn = init_producer_id(wire, txn="my-txn")
        assert (txn.error_code, txn.producer_epoch) == (errors.NONE, 0)
        assert txn.producer_id not in (-1, pid)


def test_producer_state_holds_across_restarts_and_agents(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    first = producer_batch(0, 0, 0, [b"a"])
    with run_broker(settings) as broker:
        broker.runtime.metadata.create_topic("shared", 1, {}, 0)
        with Wire(broker.port) as wire:
            pid = init_producer_id(wire).producer_id
            first = producer_batch(pid, 0, 0, [b"a", b"b"])
            assert send(wire, "shared", {0: first}) == {0: (0, 0)}
    # A restarted agent remembers the producer.
    with run_broker(settings) as broker, Wire(broker.port) as wire:
        assert send(wire, "shared", {0: first}) == {0: (0, 0)}
        assert high_watermark(broker, "shared") == 2
    # Two agents on one metadata file and bucket see each other's producer state.
    with run_broker(settings) as a, run_broker(settings) as b, Wire(a.port) as wa, Wire(b.port) as wb:
        assert init_producer_id(wa).producer_id != init_producer_id(wb).producer_id
        assert send(wa, "shared", {0: producer_batch(pid, 0, 2, [b"c"])}) == {0: (0, 2)}
        assert send(wb, "shared", {0: producer_batch(pid, 0, 2, [b"c"])}) == {0: (0, 2)}
        assert send(wb, "shared", {0: producer_batch(pid, 0, 3, [b"d"])}) == {0: (0, 3)}
        assert send(wa, "shared", {0: producer_batch(pid, 0, 9, [b"e"])}) == {
            0: (errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        }
        # A bump on one agent continues on the other.
        assert init_producer_id(wa, pid=pid, epoch=0).producer_epoch == 1
        assert init_producer_id(wb, pid=pid, epoch=1).producer_epoch == 2
        assert high_watermark(a, "shared") == 4
        assert consume_all(b.bootstrap, "shared", 1, 4) == [b"a", b"b", b"c", b"d"]


def test_batches_with_a_producer_id_need_a_sequence(broker: RunningBroker) -> None:
    broker.runtime.metadata.create_topic("noseq", 1, {}, 0)
    with Wire(broker.port) as wire:
        assert send(wire, "noseq", {0: producer_batch(7, 0, -1, [b"x"])}) == {0: (errors.INVALID_RECORD, -1)}
    assert high_watermark(broker, "noseq") == 0


def test_a_resend_while_the_original_is_in_flight_follows_it(kafka_factory: Callable[..., Any]) -> None:
    # A long flush interval puts the original and its resend (from another connection, as after a
    # reconnect) in the same flush: the resend waits for the original and gets the same offset.
    with kafka_factory(flush_interval_ms=600, flush_class="standard") as broker:
        broker.runtime.metadata.create_topic("inflight", 1, {}, 0)
        with Wire(broker.port) as setup:
            assert send(setup, "inflight", {0: producer_batch(0, 0, 0, [b"before"])}) == {0: (0, 0)}
            pid = init_producer_id(setup).producer_id
        batch = producer_batch(pid, 0, 0, [b"a", b"b"])
        with Wire(broker.port) as first, Wire(broker.port) as second:
            first.send(Wire.frame(produce("inflight", {0: batch}), 1))
            time.sleep(0.1)
            second.send(Wire.frame(produce("inflight", {0: batch}), 2))
            answers = [
                Wire.decode(w.recv_frame(), ProduceResponse, 9, c) for w, c in ((first, 1), (second, 2))
            ]
        offsets = [
            (p.error_code, p.base_offset) for a in answers for t in a.responses for p in t.partition_responses
        ]
        assert offsets == [(0, 1), (0, 1)]
        assert high_watermark(broker, "inflight") == 3


def test_an_idempotent_producer_at_its_in_flight_limit_is_flushed_without_waiting(
    kafka_factory: Callable[..., Any],
) -> None:
    """With its 5 requests unanswered an idempotent producer can send nothing more, and the listener says
    so (broker/waiting.py): the flush is cut at once. Here the interval and the idle cut's quiet period are
    a minute, so without that word every round of 5 requests would wait a minute."""
    with kafka_factory(
        flush_interval_ms=60_000, flush_idle_ms=60_000, flush_idle_bytes=1, flush_class="standard"
    ) as broker:
        broker.runtime.metadata.create_topic("limit", 1, {}, 0)
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 0,
                "batch.num.messages": 1,
            }
        )
        delivered: list[int] = []
        started = time.monotonic()
        for i in range(40):
            producer.produce(
                "limit", value=b"v%d" % i, on_delivery=lambda err, msg: delivered.append(msg.offset())
            )
        assert producer.flush(30) == 0
        assert sorted(delivered) == list(range(40))
        assert time.monotonic() - started < 30
        puts = broker.runtime.astore.counters.get("PUT")
        assert 8 <= puts <= 40  # rounds of at most 5 requests, each its own flush


def test_only_an_idempotent_producers_five_unanswered_requests_cut_at_once(
    kafka_factory: Callable[..., Any],
) -> None:
    """Five pipelined requests: batches with a producer id (the produce path reads it as it checks them)
    are flushed at once; batches without one leave the connection free to send more, so they wait for the
    minute-long idle period."""
    plain = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    plain.append(0, timestamp=1_700_000_000_000, key=b"k", value=b"plain", headers=[])
    plain_batch = bytes(plain.build())
    with kafka_factory(
        flush_interval_ms=60_000, flush_idle_ms=60_000, flush_idle_bytes=1, flush_class="standard"
    ) as broker:
        broker.runtime.metadata.create_topic("five", 1, {}, 0)
        with Wire(broker.port, timeout=1.0) as wire:
            wire.send(*(Wire.frame(produce("five", {0: plain_batch}), i) for i in range(5)))
            with pytest.raises(TimeoutError):
                wire.recv_frame()
        with Wire(broker.port) as wire:
            pid = init_producer_id(wire).producer_id
            batches = [producer_batch(pid, 0, seq, [b"v%d" % seq]) for seq in range(5)]
            wire.send(*(Wire.frame(produce("five", {0: b}), 10 + i) for i, b in enumerate(batches)))
            answers = [Wire.decode(wire.recv_frame(), ProduceResponse, 9, 10 + i) for i in range(5)]
        codes = [p.error_code for a in answers for t in a.responses for p in t.partition_responses]
        assert codes == [errors.NONE] * 5
        assert high_watermark(broker, "five") == 10  # the plain batches went with the first cut
