"""The Kafka sink's ``--raw`` mode (bench/kafka_sink.py): requests read with ``struct`` at fixed offsets, no
protocol classes and no CRC check, so that the sink's own CPU is as small as Python allows and a durable
sink's figure is the disk's and the client's alone.

Only what a librdkafka producer sends is read: ApiVersions (answered with v0's layout up to v2, and with
v3's when asked for it), Metadata v1-v8, InitProducerId v0-v1 and Produce v3-v8, the versions before the
flexible (compact) encodings. The ApiVersions answer advertises exactly these, so the client stays within
them; librdkafka enables idempotence only when Produce >= 3 and Fetch >= 4 are both advertised, so Fetch
is listed although never served. Anything else is refused with ValueError (the sink closes the connection).

Byte layouts (big-endian), after the 4-byte frame size:
- request header v1: api key i16, api version i16, correlation id i32, client id (i16 length + bytes);
- Produce v3-v8 body: transactional id (i16 length + bytes, -1 for null), acks i16, timeout i32, topics
  i32 count; per topic: name (i16 length + bytes), partitions i32 count; per partition: index i32, records
  (i32 length + bytes, -1 for null). The records are RecordBatches: batchLength i32 at +8 and
  lastOffsetDelta i32 at +23 of each batch;
- answers: i32 size, correlation id i32, then the version's body as written below.

Connections are ``asyncio.Protocol``s (``RawConnection``): received bytes gather in one buffer, each whole
frame is copied out of it once, and answers go out in request order, a durable sink's each once its
batches are on disk.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from typing import cast

from bench.durable_log import GroupCommit, Piece

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")
_PARTITION = struct.Struct(">ii")
# (api key, min, max): Produce, Fetch, Metadata, ApiVersions, InitProducerId.
APIS = ((0, 3, 8), (1, 4, 11), (3, 1, 8), (18, 0, 3), (22, 0, 1))


def _string(value: bytes | None) -> bytes:
    return _I16.pack(-1) if value is None else _I16.pack(len(value)) + value


def _read_string(frame: memoryview, at: int) -> tuple[bytes | None, int]:
    n = _I16.unpack_from(frame, at)[0]
    if n < 0:
        return None, at + 2
    return bytes(frame[at + 2 : at + 2 + n]), at + 2 + n


class RawSink:
    """Answers of one sink; ``offsets`` counts each partition's records, as the full sink does."""

    def __init__(self, host: str, port: int, partitions: int) -> None:
        self.host = host.encode()
        self.port = port
        self.partitions = partitions
        self.topics: set[bytes] = set()
        self.offsets: dict[tuple[bytes, int], int] = {}
        self.next_producer_id = 1000

    def answer(self, frame: memoryview, pieces: list[Piece]) -> bytes | None:
        """The framed answer (None for acks=0); each partition's records are added to ``pieces``."""
        api, version, correlation = _HEADER.unpack_from(frame, 0)
        client_id = _I16.unpack_from(frame, 8)[0]
        at = 10 + max(client_id, 0)
        if api == 18:
            body = self._api_versions(version)
        elif api == 3 and 1 <= version <= 8:
            body = self._metadata(frame, at, version)
        elif api == 22 and version <= 1:
            self.next_producer_id += 1
            body = struct.pack(">ihqh", 0, 0, self.next_producer_id, 0)
        elif api == 0 and 3 <= version <= 8:
            produced = self._produce(frame, at, version, pieces)
            if produced is None:
                return None
            body = produced
        else:
            raise ValueError(f"the raw sink does not serve API {api} v{version}")
        return struct.pack(">ii", len(body) + 4, correlation) + body

    @staticmethod
    def _api_versions(version: int) -> bytes:
        entries = b"".join(struct.pack(">hhh", *api) for api in APIS)
        if version > 3:  # UNSUPPORTED_VERSION in v0's layout: the client retries with a version listed
            return struct.pack(">hi", 35, len(APIS)) + entries
        if version == 3:  # compact array (count + 1), a tagged-field byte per entry and at the end
            entries = b"".join(struct.pack(">hhh", *api) + b"\x00" for api in APIS)
            return struct.pack(">h", 0) + bytes([len(APIS) + 1]) + entries + struct.pack(">i", 0) + b"\x00"
        return struct.pack(">hi", 0, len(APIS)) + entries + (struct.pack(">i", 0) if version >= 1 else b"")

    def _metadata(self, frame: memoryview, at: int, version: int) -> bytes:
        count = _I32.unpack_from(frame, at)[0]
        at += 4
        names: list[bytes] = []
        for _ in range(max(count, 0)):
            name, at = _read_string(frame, at)
            names.append(name or b"")
        if count < 0:
            names = sorted(self.topics)
        self.topics.update(names)
        out = [struct.pack(">i", 0)] if version >= 3 else []  # throttle
        out.append(struct.pack(">ii", 1, 0) + _string(self.host) + _I32.pack(self.port) + _string(None))
        if version >= 2:
            out.append(_string(b"strata-raw-sink"))
        out.append(struct.pack(">ii", 0, len(names)))  # controller 0, topics
        for name in names:
            out.append(struct.pack(">h", 0) + _string(name) + b"\x00" + _I32.pack(self.partitions))
            for index in range(self.partitions):
                out.append(struct.pack(">hii", 0, index, 0))  # error, index, leader 0
                if version >= 7:
                    out.append(_I32.pack(-1))  # leader epoch
                out.append(struct.pack(">iiii", 1, 0, 1, 0))  # replicas [0], isr [0]
                if version >= 5:
                    out.append(_I32.pack(0))  # offline replicas []
            if version >= 8:
                out.append(_I32.pack(-2147483648))  # topic authorized operations
        if version >= 8:
            out.append(_I32.pack(-2147483648))  # cluster authorized operations
        return b"".join(out)

    def _produce(self, frame: memoryview, at: int, version: int, pieces: list[Piece]) -> bytes | None:
        _, at = _read_string(frame, at)  # transactional id
        acks = _I16.unpack_from(frame, at)[0]
        at += 6  # acks, timeout
        topics = _I32.unpack_from(frame, at)[0]
        at += 4
        out = [_I32.pack(topics)]
        for _ in range(topics):
            name, at = _read_string(frame, at)
            count = _I32.unpack_from(frame, at)[0]
            at += 4
            out.append(_string(name) + _I32.pack(count))
            for _ in range(count):
                index, size = _PARTITION.unpack_from(frame, at)
                at += 8
                end = at + max(size, 0)
                records = 0
                batch = at
                while batch + 27 <= end:
                    records += _I32.unpack_from(frame, batch + 23)[0] + 1
                    batch += 12 + _I32.unpack_from(frame, batch + 8)[0]
                pieces.append(frame[at:end])
                at = end
                key = (name or b"", index)
                base = self.offsets.get(key, 0)
                self.offsets[key] = base + records
                out.append(struct.pack(">ihqq", index, 0, base, -1))  # error, base, log append time
                if version >= 5:
                    out.append(struct.pack(">q", 0))  # log start offset
                if version >= 8:
                    out.append(struct.pack(">ih", 0, -1))  # record errors [], error message null
        if acks == 0:
            return None
        out.append(_I32.pack(0))  # throttle
        return b"".join(out)


class RawConnection(asyncio.Protocol):
    def __init__(self, sink: RawSink, durable: GroupCommit | None) -> None:
        self.sink = sink
        self.durable = durable
        self.received = bytearray()
        self.transport: asyncio.Transport | None = None
        # Answers not yet written, in request order, each with what it waits for (None: nothing).
        self.answers: deque[tuple[asyncio.Future[None] | None, bytes]] = deque()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        received = self.received
        received += data
        at = 0
        while len(received) - at >= 4:
            size = _I32.unpack_from(received, at)[0]
            if len(received) - at - 4 < size:
                break
            frame = bytes(received[at + 4 : at + 4 + size])
            at += 4 + size
            pieces: list[Piece] = []
            try:
                answer = self.sink.answer(memoryview(frame), pieces)
            except (ValueError, struct.error):
                assert self.transport is not None
                self.transport.close()
                return
            if answer is None:
                continue
            durable = self.durable.append(pieces) if self.durable is not None and pieces else None
            self.answers.append((durable, answer))
            if durable is not None:
                durable.add_done_callback(self._write_ready)
        if at:
            del received[:at]
        self._write_ready()

    def _write_ready(self, _: object = None) -> None:
        """Write every answer at the head of the queue whose batches are durable (or that waits for none)."""
        assert self.transport is not None
        out = []
        while self.answers and (self.answers[0][0] is None or self.answers[0][0].done()):
            durable, answer = self.answers.popleft()
            if durable is not None and durable.exception() is not None:
                self.transport.close()
                return
            out.append(answer)
        if out and not self.transport.is_closing():
            self.transport.write(b"".join(out))
