"""A produce the Kafka door refuses in part (a corrupt batch, an unknown topic) leaves nothing of the
request to the cycle collector, which the server runs rarely (strata/server.py, tune_gc): a refused
partition's error is kept without the traceback that would tie it to the frame holding the request's
batches (broker/handlers/produce.py)."""

from __future__ import annotations

import pytest
from kafka.protocol.producer.produce import ProduceResponse

from broker import errors
from tests.fixtures.collector import live_frames
from tests.fixtures.kafka import RunningBroker
from tests.kafka.test_protocol import batch, create, partition_results, produce
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration

# The produce handler's functions that hold a request's batches and keep a refused partition's error.
HOLDERS = ("_check_all", "load_topics")


def test_refused_partitions_leave_no_frame_behind(broker: RunningBroker, collector_off: None) -> None:
    create(broker, "cycles", 2)
    corrupt = bytearray(batch([b"x" * 1000]))
    corrupt[-1] ^= 0xFF
    with Wire(broker.port) as wire:
        refused = wire.call(produce("cycles", {0: bytes(corrupt), 1: batch([b"ok"])}), ProduceResponse)
        unknown = wire.call(produce("no-such-topic", {0: batch([b"v"])}), ProduceResponse, 2)
    assert partition_results(refused) == {0: (errors.CORRUPT_MESSAGE, -1), 1: (errors.NONE, 0)}
    assert partition_results(unknown)[0][0] == errors.UNKNOWN_TOPIC_OR_PARTITION
    assert live_frames(*HOLDERS) == []
