"""Garbage on the socket: request decoding is fuzzed sans-IO, and a live agent survives a corpus of frames.

Whatever the bytes, decoding gives a typed request or ``BadRequest`` (the connection is closed), never
another exception; and a live agent keeps answering other connections, including during a slow sender.
Cases worth keeping live in tests/kafka/corpus/ (hex, one frame per file, without the size prefix).
"""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin.topics import CreateTopicsRequest
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest

from broker import apis, codec
from storage import records
from storage.errors import BadRequest
from tests.fixtures.kafka import RunningBroker
from tests.kafka.wire import Wire

CORPUS = Path(__file__).parent / "corpus"


def _sample_frames() -> list[bytes]:
    """Valid requests of several APIs, as clients send them (without the size prefix)."""
    batch = records.encode_batch([records.Record(0, 1_700_000_000_000, b"k", b"v")])
    T = ProduceRequest.TopicProduceData
    FT = FetchRequest.FetchTopic
    LT = ListOffsetsRequest.ListOffsetsTopic
    requests = [
        MetadataRequest[12](
            topics=[MetadataRequest.MetadataRequestTopic(name="t")], allow_auto_topic_creation=True
        ),
        ProduceRequest[9](
            transactional_id=None,
            acks=-1,
            timeout_ms=1000,
            topic_data=[T(name="t", partition_data=[T.PartitionProduceData(index=0, records=batch)])],
        ),
        FetchRequest[12](
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1024,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            forgotten_topics_data=[],
            rack_id="",
            topics=[
                FT(
                    topic="t",
                    partitions=[FT.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=9)],
                )
            ],
        ),
        ListOffsetsRequest[7](
            replica_id=-1,
            isolation_level=0,
            topics=[LT(name="t", partitions=[LT.ListOffsetsPartition(partition_index=0, timestamp=-1)])],
        ),
        CreateTopicsRequest[5](
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name="t", num_partitions=1, replication_factor=1, assignments=[], configs=[]
                )
            ],
            timeout_ms=1000,
            validate_only=True,
        ),
        ApiVersionsRequest[3](client_software_name="fuzz", client_software_version="1"),
    ]
    out = []
    for i, request in enumerate(requests):
        request.with_header(correlation_id=i, client_id="fuzz")
        out.append(request.encode(header=True))
    return out


SAMPLES = _sample_frames()


def _decodes_or_refuses(frame: bytes) -> None:
    try:
        codec.decode(frame)
    except BadRequest:
        pass


def test_samples_decode() -> None:
    for frame in SAMPLES:
        assert isinstance(codec.decode(frame), codec.Decoded)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_refuse(frame: bytes) -> None:
    _decodes_or_refuses(frame)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(apis.TABLE)),
    st.data(),
    st.binary(max_size=300),
)
def test_valid_headers_with_random_bodies(key: int, data: st.DataObject, body: bytes) -> None:
    api = apis.TABLE[key]
    version = data.draw(st.integers(api.min_version, api.max_version))
    _decodes_or_refuses(struct.pack(">hhi", key, version, 7) + body)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SAMPLES), st.data())
def test_mutated_requests_decode_or_refuse(frame: bytes, data: st.DataObject) -> None:
    mutated = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 8))):
        kind = data.draw(st.sampled_from(["flip", "cut", "grow", "int"]))
        if kind == "flip" and mutated:
            mutated[data.draw(st.integers(0, len(mutated) - 1))] ^= data.draw(st.integers(1, 255))
        elif kind == "cut" and mutated:
            del mutated[data.draw(st.integers(0, len(mutated) - 1)) :]
        elif kind == "grow":
            mutated += data.draw(st.binary(min_size=1, max_size=16))
        elif kind == "int" and len(mutated) >= 4:
            at = data.draw(st.integers(0, len(mutated) - 4))
            struct.pack_into(">i", mutated, at, data.draw(st.sampled_from([-1, -2, 2**31 - 1, 2**20, 0])))
    _decodes_or_refuses(bytes(mutated))


def _corpus() -> list[tuple[str, bytes]]:
    return [(p.name, bytes.fromhex(p.read_text().strip())) for p in sorted(CORPUS.glob("*.hex"))]


@pytest.mark.parametrize(("name", "frame"), _corpus())
def test_corpus_decodes_or_refuses(name: str, frame: bytes) -> None:
    _decodes_or_refuses(frame)


@pytest.mark.integration
def test_a_live_agent_survives_the_corpus_and_a_slow_sender(broker: RunningBroker) -> None:
    broker.runtime.metadata.create_topic("t", 1, {}, 0)
    slow = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    slow.sendall(struct.pack(">i", 100) + b"\x00\x12")  # a frame started and never finished
    try:
        frames = [f for _, f in _corpus()] + SAMPLES
        for frame in frames:
            with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
                sock.sendall(struct.pack(">i", len(frame)) + frame)
                sock.shutdown(socket.SHUT_WR)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and sock.recv(65536):
                    pass  # an answer, then the close; or just the close
        with Wire(broker.port) as wire:
            assert wire.call(ApiVersionsRequest[2](), ApiVersionsResponse).error_code == 0
    finally:
        slow.close()
