"""Garbage on the socket: a live agent survives the decoder's corpus and samples, and a slow sender.

Each frame goes to its own connection, which gets an answer and a close, or just a close; the agent keeps
answering other connections throughout. The decoder itself is fuzzed sans-IO in
tests/unit/test_decode_fuzz.py.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

from tests.fixtures.frames import corpus, sample_frames
from tests.fixtures.kafka import RunningBroker
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration


def test_a_live_agent_survives_the_corpus_and_a_slow_sender(broker: RunningBroker) -> None:
    broker.runtime.metadata.create_topic("t", 1, {}, 0)
    slow = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    slow.sendall(struct.pack(">i", 100) + b"\x00\x12")  # a frame started and never finished
    try:
        frames = [f for _, f in corpus()] + sample_frames()
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
