"""Validation on produce with the Python Kafka clients (confluent-kafka, kafka-python, aiokafka) against a
real agent: each runs the scenarios of tests/kafka/schema_cases.py (accepted, refused with
INVALID_RECORD, a wrong subject, a tombstone, compressed batches, a refused partition beside an accepted
one) with values confluent-kafka's AvroSerializer wrote, registering through the agent's registry, and
afterwards the partitions hold exactly the accepted records.

What each client shows of a refusal is what it can: kafka-python raises InvalidRecordError (87) with the
agent's message for the record ``record_errors`` names, and a KafkaError for the batch's other records
(KIP-467); confluent-kafka reports
INVALID_RECORD (87) to the delivery callback, without the message (librdkafka does not pass a Produce
answer's ``error_message`` on); aiokafka 0.14 speaks Produce v7 (no message) and has no class for code 87,
so it raises UnknownError. The message itself is checked byte for byte on the wire in
tests/kafka/test_schema_validation_wire.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.errors import UnknownError
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer
from kafka.errors import InvalidRecordError
from kafka.errors import KafkaError as KafkaPythonError

from tests.fixtures.server import RunningServer, local_settings, run_server
from tests.kafka.schema_cases import (
    PARTITIONS,
    Send,
    Serialized,
    create_validating,
    scenarios,
    stored,
    values,
)

pytestmark = pytest.mark.integration

# Per record: None when it was written, else (code, message) as the client reports it.
Outcome = tuple[int, str] | None


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path_factory.mktemp("schema-validation"))) as running:
        yield running


def confluent_send(bootstrap: str, topic: str, send: Send) -> list[Outcome]:
    codec = {"none": "none"}.get(send.codec, send.codec)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 100})
    outcomes: list[Outcome] = [None] * len(send.records)

    def delivered(i: int) -> Callable[[KafkaError | None, object], None]:
        def report(err: KafkaError | None, _: object) -> None:
            outcomes[i] = None if err is None else (err.code(), err.str())

        return report

    for i, (partition, key, value) in enumerate(send.records):
        producer.produce(topic, key=key, value=value, partition=partition, on_delivery=delivered(i))
    assert producer.flush(30) == 0
    return outcomes


def kafka_python_send(bootstrap: str, topic: str, send: Send) -> list[Outcome]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if send.codec == "none" else send.codec,
        linger_ms=100,
        enable_idempotence=False,
    )
    try:
        futures = [producer.send(topic, key=k, value=v, partition=p) for p, k, v in send.records]
        producer.flush(30)
        outcomes: list[Outcome] = []
        for future in futures:
            try:
                future.get(10)
                outcomes.append(None)
            except InvalidRecordError as exc:
                outcomes.append((exc.errno, str(exc)))
            except KafkaPythonError as exc:
                # KIP-467: the records of the refused batch that record_errors does not name ("failed to
                # append record because it was part of a batch which had one more more invalid records").
                outcomes.append((-1, str(exc)))
        return outcomes
    finally:
        producer.close()


def aiokafka_send(bootstrap: str, topic: str, send: Send) -> list[Outcome]:
    async def main() -> list[Outcome]:
        codec = None if send.codec == "none" else send.codec
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=100)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=k, value=v, partition=p) for p, k, v in send.records]
            results = await asyncio.gather(*futures, return_exceptions=True)
        finally:
            await producer.stop()
        outcomes: list[Outcome] = []
        for result in results:
            if isinstance(result, BaseException):
                assert isinstance(result, UnknownError), result  # aiokafka 0.14 knows no code 87
                assert isinstance(result, AioKafkaError)
                outcomes.append((87, str(result)))
            else:
                outcomes.append(None)
        return outcomes

    return asyncio.run(main())


# client -> (send, whether its outcome carries the agent's message)
CLIENTS: dict[str, tuple[Callable[[str, str, Send], list[Outcome]], bool]] = {
    "confluent": (confluent_send, False),
    "kafka-python": (kafka_python_send, True),
    "aiokafka": (aiokafka_send, False),
}
CASES = [("confluent", "lz4"), ("kafka-python", "gzip"), ("aiokafka", "zstd")]


@pytest.mark.parametrize(("client", "codec"), CASES)
def test_client_sees_each_refusal_and_only_valid_records_are_stored(
    srv: RunningServer, client: str, codec: str
) -> None:
    topic = f"validated-{client}"
    create_validating(srv.runtime.metadata, topic)
    send_with, with_message = CLIENTS[client]
    with Serialized(srv.registry_prefix_url, topic) as serialized:
        sends = scenarios(topic, serialized, codec)
    for send in sends:
        outcomes = send_with(srv.kafka_bootstrap, topic, send)
        for partition in range(PARTITIONS):
            got = [o for (p, _, _), o in zip(send.records, outcomes, strict=True) if p == partition]
            expected = send.refused.get(partition)
            if expected is None:
                assert got == [None] * len(got), (send.name, got)
                continue
            # The whole batch is refused; the client names the code (aiokafka 0.14 cannot) and, with
            # record_errors (kafka-python), the one record with the agent's message.
            assert None not in got, f"{send.name}: partition {partition} was accepted in part"
            if client == "aiokafka":
                assert all("UnknownError" in o[1] for o in got if o is not None)
            else:
                assert 87 in {o[0] for o in got if o is not None}, (send.name, got)
            if with_message:
                messages = [o[1] for o in got if o is not None and o[0] == 87]
                assert len(messages) == 1, messages
                assert expected in messages[0], (send.name, messages)
    assert {p: values(srv, topic, p) for p in range(PARTITIONS)} == stored(sends)
