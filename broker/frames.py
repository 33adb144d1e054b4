"""Kafka's framing: every request and response is a 4-byte big-endian size followed by that many bytes.

Request frame (all integers big-endian)::

    size            int32    bytes that follow
    api_key         int16  ┐
    api_version     int16  │ request header v1 (v2 adds a tagged-field section after client_id:
    correlation_id  int32  │ used when the request version is flexible, KIP-482)
    client_id       int16 length + UTF-8, -1 = null
    [tagged fields] uvarint count + fields       (header v2 only)
    body                                          (the API's request schema at api_version)

Response frame::

    size            int32
    correlation_id  int32    response header v0
    [tagged fields]          response header v1: flexible versions, except ApiVersions (always v0)
    body

The first 8 bytes after the size are fixed, so the key, version and correlation id are read without
decoding the rest: an unknown key or version is answered (or refused) without a schema for it.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

from storage.errors import BadRequest

_PEEK = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
MIN_REQUEST_SIZE = _PEEK.size + 2  # key, version, correlation id, and the client id's length


@dataclass(frozen=True, slots=True)
class FramePeek:
    api_key: int
    api_version: int
    correlation_id: int


def peek(frame: bytes | bytearray) -> FramePeek:
    if len(frame) < MIN_REQUEST_SIZE:
        raise BadRequest(f"a request frame of {len(frame)} bytes is shorter than a request header")
    key, version, correlation = _PEEK.unpack_from(frame, 0)
    return FramePeek(key, version, correlation)


async def read_size(reader: asyncio.StreamReader, max_bytes: int) -> int | None:
    """The next frame's size; None at a clean end of stream; BadRequest if impossible or too large."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise BadRequest("the connection closed inside a frame's size") from None
        return None
    return check_size(_SIZE.unpack(head)[0], max_bytes)


def check_size(size: int, max_bytes: int, minimum: int = MIN_REQUEST_SIZE) -> int:
    """``size`` if a frame may declare it; BadRequest (the connection is closed) otherwise."""
    if size < minimum:
        raise BadRequest(f"a frame declares {size} bytes, fewer than a request header")
    if size > max_bytes:
        # Refused before reading it: the connection is closed (as Kafka's broker does).
        raise BadRequest(f"a frame declares {size} bytes, more than socket.request.max.bytes={max_bytes}")
    return size


def frame(correlation_id: int, header_tagged: bool, body: bytes) -> bytes:
    """A response frame: size, correlation id, the empty tagged-field section for header v1, body."""
    header = _SIZE.pack(correlation_id) + (b"\x00" if header_tagged else b"")
    return _SIZE.pack(len(header) + len(body)) + header + body
