"""Produce (key 0, versions 3-9): the request decoder and the response encoder, written by hand.

Why by hand: profiling the agent at 6,000 small Produce requests a second (bench/kafka_bench.py, latency
phase) showed its one event-loop thread saturated, and kafka-python's generic decode and encode of Produce
(header included) took about a fifth of it. Only these hot paths are written by hand; everything else
stays with kafka-python's generated classes. The decoder reads the fields in C (broker/_produce.c: as
straight-line Python it was still a tenth of the loop), the encoder is Python.
tests/unit/test_produce_codec.py checks both directions byte for byte against kafka-python at every
version, and the fuzz tests run this decoder.

Request, after the frame size (integers big-endian)::

    api_key int16 (0) | api_version int16 | correlation_id int32 | client_id int16 length + bytes (-1: null)
    [v9: header tagged fields]
    transactional_id   v3-8: int16 length + bytes (-1: null)   v9: uvarint length+1 (0: null) + bytes
    acks               int16
    timeout_ms         int32
    topic_data         v3-8: int32 count                        v9: uvarint count+1
      name             v3-8: int16 length + bytes               v9: uvarint length+1 + bytes
      partition_data   v3-8: int32 count                        v9: uvarint count+1
        index          int32
        records        v3-8: int32 length + bytes (-1: null)    v9: uvarint length+1 (0: null) + bytes
        [v9: tagged fields]
      [v9: tagged fields]
    [v9: tagged fields]

Response body (after correlation_id, and for v9 an empty header tagged-field section)::

    responses          v3-8: int32 count                        v9: uvarint count+1
      name             as in the request
      partition_responses  count as above
        index int32 | error_code int16 | base_offset int64 | log_append_time_ms int64
        log_start_offset int64                                       (v5+)
        record_errors: empty array | error_message nullable string   (v8+)
        [v9: tagged fields]
      [v9: tagged fields]
    throttle_time_ms   int32
    [v9: tagged fields]

Tagged fields are read and skipped (none is defined for Produce up to v9) and written as an empty section.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from broker import _produce, wire
from storage.errors import BadRequest

FLEXIBLE_FROM = 9

_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">ihqqq")  # index, error code, base offset, log append time, log start offset
_PARTITION_V3 = struct.Struct(">ihqq")  # v3-4: no log start offset


class PartitionData(NamedTuple):
    """NamedTuples, not dataclasses: broker/_produce.c makes them without calling Python code."""

    # kafka-python's name, which shadows tuple.index (a method the code never calls on these).
    index: int  # type: ignore[assignment]
    # A view into the request frame, not a copy: the batches are stored from the frame's own buffer.
    records: memoryview | None


class TopicData(NamedTuple):
    name: str
    partition_data: list[PartitionData]


@dataclass(slots=True)
class ProduceRequest:
    """The fields of a Produce request the agent uses, under kafka-python's attribute names."""

    API_VERSION: int
    correlation_id: int
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[TopicData]


@dataclass(slots=True)
class PartitionResponse:
    index: int
    error_code: int
    base_offset: int
    error_message: str | None = None
    record_errors: list[tuple[int, str]] = field(default_factory=list)
    log_append_time_ms: int = -1
    log_start_offset: int = -1


def decode_request(frame: bytes | bytearray) -> ProduceRequest:
    """A Produce request frame (after the size). BadRequest on anything that does not fit the schema.

    The fields are read by broker/_produce.c (the layout above); the batches stay views into ``frame``."""
    try:
        version, correlation_id, transactional_id, acks, timeout_ms, topic_data = _produce.decode(
            frame, TopicData, PartitionData
        )
    except UnicodeDecodeError:  # before ValueError, its base class
        raise BadRequest("Produce request has a string that is not UTF-8") from None
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    return ProduceRequest(version, correlation_id, transactional_id, acks, timeout_ms, topic_data)


class PartitionResult(Protocol):
    """What a partition's answer is encoded from: PartitionResponse, or the handler's own record."""

    index: int
    error_code: int
    base_offset: int
    error_message: str | None
    record_errors: Sequence[tuple[int, str]]
    # The batches' append time on a LogAppendTime topic, else -1 (Kafka's answer).
    log_append_time_ms: int
    # The partition's log start offset as the commit saw it, -1 when unknown (a failed partition).
    log_start_offset: int


_THROTTLE = wire.I32.pack(0)
_ONE_COUNT = wire.I32.pack(1)
# What nearly every partition answers with from v8 on, by whether the version is flexible: an empty
# record_errors array and a null error message.
_NO_ERRORS = {False: wire.EMPTY_ARRAY_CLASSIC, True: b"\x01"}
_NULL = {False: wire.NULL_CLASSIC, True: b"\x00"}


# The one-partition answer's fixed bytes by version (5-9), as the general encoder below writes them:
# before the topic's name (the header's tagged fields, the topic count) and after the partition's fields
# (v8+: no record errors, a null message; the tagged fields; the throttle time).
_ONE_BEFORE = {v: (wire.NO_TAGS + b"\x02" if v >= FLEXIBLE_FROM else _ONE_COUNT) for v in range(5, 10)}
_ONE_AFTER = {
    5: _THROTTLE,
    6: _THROTTLE,
    7: _THROTTLE,
    8: _NO_ERRORS[False] + _NULL[False] + _THROTTLE,
    # the partition's and the topic's tagged fields, the throttle time, the body's tagged fields
    9: _NO_ERRORS[True] + _NULL[True] + wire.NO_TAGS * 2 + _THROTTLE + wire.NO_TAGS,
}


def encode_response(
    correlation_id: int, version: int, topics: Sequence[tuple[str, Sequence[PartitionResult]]]
) -> bytes:
    """The whole response frame, size included. Runs once per answered Produce request, on the loop."""
    if len(topics) == 1 and version >= 5:
        name, partitions = topics[0]
        if len(partitions) == 1:
            p = partitions[0]
            if p.error_message is None and not p.record_errors:
                # librdkafka's request: one partition, answered without an error message. The same bytes
                # as below, from the fixed parts (tests/unit/test_produce_codec.py compares both).
                flexible = version >= FLEXIBLE_FROM
                body = b"".join(
                    (
                        _I32.pack(correlation_id),
                        _ONE_BEFORE[version],
                        wire.string(name, flexible),
                        b"\x02" if flexible else _ONE_COUNT,
                        _PARTITION.pack(
                            p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset
                        ),
                        _ONE_AFTER[version],
                    )
                )
                return _I32.pack(len(body)) + body
    flexible = version >= FLEXIBLE_FROM
    tags = b"\x00" if flexible else b""
    no_errors, null = _NO_ERRORS[flexible], _NULL[flexible]
    # Response header: correlation id, then (v1, flexible versions) an empty tagged-field section.
    parts: list[bytes] = [_I32.pack(correlation_id), tags, wire.count(len(topics), flexible)]
    append = parts.append
    for name, partitions in topics:
        append(wire.string(name, flexible))
        append(wire.count(len(partitions), flexible))
        for p in partitions:
            if version >= 5:
                append(
                    _PARTITION.pack(
                        p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset
                    )
                )
            else:
                append(_PARTITION_V3.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms))
            if version >= 8:
                if p.record_errors:
                    append(wire.count(len(p.record_errors), flexible))
                    for batch_index, message in p.record_errors:
                        append(_I32.pack(batch_index))
                        append(wire.string(message, flexible))
                        append(tags)
                else:
                    append(no_errors)
                append(null if p.error_message is None else wire.string(p.error_message, flexible))
            append(tags)
        append(tags)
    append(_THROTTLE)
    append(tags)
    body = b"".join(parts)
    return _I32.pack(len(body)) + body
