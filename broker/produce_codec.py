"""Produce (key 0, versions 3-9): the request decoder and the response encoder, written by hand.

Why by hand: profiling the agent at 6,000 small Produce requests a second (bench/kafka_bench.py, latency
phase) showed its one event-loop thread saturated, and kafka-python's generic decode and encode of Produce
(header included) took about a fifth of it. The issue allows hand-writing exactly these hot paths;
everything else stays with kafka-python's generated classes. tests/kafka/test_produce_codec.py checks
both directions byte for byte against kafka-python at every version, and the fuzz tests run this decoder.

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
from dataclasses import dataclass, field

from storage.errors import BadRequest

FLEXIBLE_FROM = 9

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")  # api key, version, correlation id
_ACKS_TIMEOUT = struct.Struct(">hi")
_PARTITION = struct.Struct(">ihqqq")  # index, error code, base offset, log append time, log start offset
_PARTITION_V3 = struct.Struct(">ihqq")  # v3-4: no log start offset


@dataclass(slots=True)
class PartitionData:
    index: int
    records: bytes | None


@dataclass(slots=True)
class TopicData:
    name: str
    partition_data: list[PartitionData] = field(default_factory=list)


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


class _Reader:
    __slots__ = ("data", "flexible", "pos")

    def __init__(self, data: bytes, pos: int, flexible: bool) -> None:
        self.data = data
        self.pos = pos
        self.flexible = flexible

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise BadRequest(f"Produce request truncated at byte {self.pos} (needs {n} more)")

    def i16(self) -> int:
        self._need(2)
        (value,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(value)

    def i32(self) -> int:
        self._need(4)
        (value,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            self._need(1)
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise BadRequest("Produce request has a varint longer than 5 bytes")

    def raw(self, n: int) -> bytes:
        self._need(n)
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def count(self) -> int:
        """An array's length; null arrays are refused (Produce has none that may be null)."""
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            raise BadRequest("Produce request has a null or negative array length")
        # Every element takes at least one byte: a count past the bytes left is garbage, not a promise.
        self._need(n)
        return n

    def nullable_bytes(self) -> bytes | None:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            if n == -1:
                return None
            raise BadRequest(f"Produce request has a bytes length of {n}")
        return self.raw(n)

    def string(self, nullable: bool) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise BadRequest(f"Produce request has a string length of {n}")
        try:
            return self.raw(n).decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest("Produce request has a string that is not UTF-8") from None

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.raw(self.uvarint())


def decode_request(frame: bytes) -> ProduceRequest:
    """A Produce request frame (after the size). BadRequest on anything that does not fit the schema."""
    if len(frame) < _HEAD.size + 2:
        raise BadRequest("Produce request shorter than its header")
    key, version, correlation_id = _HEAD.unpack_from(frame, 0)
    if key != 0 or not 3 <= version <= 9:
        raise BadRequest(f"not a Produce request of version 3-9: key {key} version {version}")
    flexible = version >= FLEXIBLE_FROM
    header = _Reader(frame, _HEAD.size, flexible=False)
    header.string(nullable=True)  # client_id: a classic nullable string even in header v2
    r = _Reader(frame, header.pos, flexible)
    r.skip_tags()  # header v2's tagged fields
    transactional_id = r.string(nullable=True)
    r._need(_ACKS_TIMEOUT.size)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, r.pos)
    r.pos += _ACKS_TIMEOUT.size
    topics = []
    for _ in range(r.count()):
        name = r.string(nullable=False)
        assert name is not None
        topic = TopicData(name)
        for _ in range(r.count()):
            index = r.i32()
            topic.partition_data.append(PartitionData(index, r.nullable_bytes()))
            r.skip_tags()
        r.skip_tags()
        topics.append(topic)
    r.skip_tags()
    if r.pos != len(frame):
        raise BadRequest(f"Produce request has {len(frame) - r.pos} bytes after its last field")
    return ProduceRequest(version, correlation_id, transactional_id, int(acks), int(timeout_ms), topics)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_response(
    correlation_id: int, version: int, topics: list[tuple[str, list[PartitionResponse]]]
) -> bytes:
    """The whole response frame, size included."""
    flexible = version >= FLEXIBLE_FROM
    parts: list[bytes] = [_I32.pack(correlation_id)]
    if flexible:
        parts.append(b"\x00")  # response header v1: no tagged fields

    def count(n: int) -> bytes:
        return _uvarint(n + 1) if flexible else _I32.pack(n)

    def string(s: str | None) -> bytes:
        if s is None:
            return b"\x00" if flexible else b"\xff\xff"
        raw = s.encode("utf-8")
        return (_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw

    tags = b"\x00" if flexible else b""
    parts.append(count(len(topics)))
    for name, partitions in topics:
        parts.append(string(name))
        parts.append(count(len(partitions)))
        for p in partitions:
            if version >= 5:
                parts.append(_PARTITION.pack(p.index, p.error_code, p.base_offset, -1, -1))
            else:
                parts.append(_PARTITION_V3.pack(p.index, p.error_code, p.base_offset, -1))
            if version >= 8:
                parts.append(count(0))  # record_errors
                parts.append(string(p.error_message))
            parts.append(tags)
        parts.append(tags)
    parts.append(_I32.pack(0))  # throttle_time_ms
    parts.append(tags)
    body = b"".join(parts)
    return _I32.pack(len(body)) + body
