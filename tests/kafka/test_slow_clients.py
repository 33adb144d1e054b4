"""No client can starve the others over the Kafka door: a request whose bytes stop arriving is dropped at its
receive deadline with its reservation given back, idle connections close after connections.max.idle.ms,
frames still arriving hold at most the produce buffer's arriving share (so a producer whose requests are in
is still served beside many slow ones), and a request other than Produce counts its decoded objects
against memory while its handler runs."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from broker.connection import DECODED_EXPANSION
from tests.fixtures.kafka import RunningBroker
from tests.kafka.test_protocol import create, fetch_request
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration


def _wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {seconds} s")
        time.sleep(0.05)


def _closed_by_server(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def _partial_produce(port: int, declared: int, sent: int) -> socket.socket:
    """A connection that declares a Produce frame of ``declared`` bytes and sends ``sent`` of them."""
    sock = socket.create_connection(("127.0.0.1", port))
    header = struct.pack(">ihhi", declared, 0, 7, 1)  # size, Produce, v7, correlation id
    sock.sendall(header + bytes(max(0, sent - len(header) + 4)))
    return sock


def test_a_request_whose_bytes_stop_is_dropped_and_gives_its_memory_back(
    kafka_factory: Callable[..., Any],
) -> None:
    with kafka_factory(kafka_request_receive_timeout_ms=1000) as broker:
        buffer = broker.runtime.agent.buffer
        sock = _partial_produce(broker.port, 600_000, 50_000)
        _wait_for(lambda: buffer.reserved_bytes >= 600_000, 5, "the frame's reservation")
        assert buffer.arriving_bytes >= 600_000
        assert _closed_by_server(sock, 10), "the stalled request's connection stayed open"
        _wait_for(lambda: buffer.reserved_bytes == 0 and buffer.arriving_bytes == 0, 5, "the memory's return")
        sock.close()


def test_an_idle_connection_is_closed_and_a_busy_one_is_not(kafka_factory: Callable[..., Any]) -> None:
    with (
        kafka_factory(kafka_connections_max_idle_ms=1500) as broker,
        Wire(broker.port) as idle,
        Wire(broker.port) as busy,
    ):
        assert idle.call(ApiVersionsRequest[3](), ApiVersionsResponse).error_code == 0
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:  # busy keeps talking, within the idle limit each time
            assert busy.call(ApiVersionsRequest[3](), ApiVersionsResponse).error_code == 0
            time.sleep(0.3)
        assert _closed_by_server(idle.sock, 5), "the idle connection stayed open"
        assert busy.call(ApiVersionsRequest[3](), ApiVersionsResponse).error_code == 0


def test_slow_senders_hold_at_most_the_arriving_share_and_a_producer_is_served(
    kafka_factory: Callable[..., Any],
) -> None:
    with kafka_factory(buffer_bytes=4 << 20) as broker:
        create(broker, "t", 1)
        buffer = broker.runtime.agent.buffer
        # Each sends past SMALL_FRAME, so it has shown it is sending and its frame is reserved.
        slow = [_partial_produce(broker.port, 700_000, 40_000) for _ in range(6)]
        # Two of the six fit in half of 4 MiB; the others wait, reading paused, holding nothing.
        _wait_for(lambda: buffer.arriving_bytes >= 1_400_000, 5, "the slow frames' reservations")
        time.sleep(0.5)
        assert buffer.arriving_bytes <= buffer.arriving_limit
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i in range(200):
            producer.produce("t", key=b"k", value=b"v" * 1000 + str(i).encode())
        assert producer.flush(30) == 0, "the producer whose requests are in was starved"
        assert broker.runtime.metadata.partition_state("t", 0).high_watermark == 200
        for sock in slow:
            sock.close()
        _wait_for(lambda: buffer.arriving_bytes == 0, 5, "the slow frames' memory")


def test_clients_that_declare_frames_and_send_little_hold_nothing(kafka_factory: Callable[..., Any]) -> None:
    # What is reserved follows what was sent: declared frames, large or small, sent a few bytes at a
    # time, hold none of the budget, however many connections there are, and a producer is served.
    with kafka_factory(buffer_bytes=4 << 20) as broker:
        create(broker, "t", 1)
        buffer = broker.runtime.agent.buffer
        slow = [_partial_produce(broker.port, 900_000, 100) for _ in range(50)]
        slow += [_partial_produce(broker.port, 20_000, 100) for _ in range(50)]
        time.sleep(0.5)
        assert (buffer.reserved_bytes, buffer.arriving_bytes) == (0, 0)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i in range(200):
            producer.produce("t", key=b"k", value=b"v" * 1000 + str(i).encode())
        assert producer.flush(30) == 0
        assert broker.runtime.metadata.partition_state("t", 0).high_watermark == 200
        for sock in slow:
            sock.close()


def test_a_request_other_than_produce_holds_its_decoded_size_while_it_runs(broker: RunningBroker) -> None:
    create(broker, "t", 1)
    buffer = broker.runtime.agent.buffer
    request = fetch_request("t", [0])
    request.max_wait_ms = 3000
    frame = Wire.frame(request, 7)
    with Wire(broker.port) as wire:
        wire.send(frame)  # a long poll on an empty partition: its handler waits 3 s
        expected = (len(frame) - 4) * DECODED_EXPANSION
        _wait_for(lambda: buffer.reserved_bytes == expected, 2, "the decoded request's reservation")
        wire.recv_frame()
    assert buffer.reserved_bytes == 0
