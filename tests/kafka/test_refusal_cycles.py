"""A produce the Kafka door refuses in part (a corrupt batch, an unknown topic) leaves nothing of the
request to the cycle collector, which the server runs rarely (strata/server.py, tune_gc): a refused
partition's error is kept without the traceback that would tie it to the frame holding the request's
batches (broker/handlers/produce.py)."""

from __future__ import annotations

import gc
import types
from collections.abc import Iterator

import pytest
from kafka.protocol.producer.produce import ProduceResponse

from broker import errors
from tests.fixtures.kafka import RunningBroker
from tests.kafka.test_protocol import batch, create, partition_results, produce
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration

# The produce handler's functions that hold a request's batches and keep a refused partition's error.
HOLDERS = {"_check_all", "load_topics"}


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _held_frames() -> list[str]:
    return [
        o.f_code.co_name
        for o in gc.get_objects()
        if isinstance(o, types.FrameType) and o.f_code.co_name in HOLDERS
    ]


def test_refused_partitions_leave_no_frame_behind(broker: RunningBroker, collector_off: None) -> None:
    create(broker, "cycles", 2)
    corrupt = bytearray(batch([b"x" * 1000]))
    corrupt[-1] ^= 0xFF
    with Wire(broker.port) as wire:
        refused = wire.call(produce("cycles", {0: bytes(corrupt), 1: batch([b"ok"])}), ProduceResponse)
        unknown = wire.call(produce("no-such-topic", {0: batch([b"v"])}), ProduceResponse, 2)
    assert partition_results(refused) == {0: (errors.CORRUPT_MESSAGE, -1), 1: (errors.NONE, 0)}
    assert partition_results(unknown)[0][0] == errors.UNKNOWN_TOPIC_OR_PARTITION
    assert _held_frames() == []
