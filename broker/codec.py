"""Request frames to typed requests: sans-IO, so the decoding of anything a socket may carry is fuzzed
directly (tests/unit/test_decode_fuzz.py).

Produce is decoded by broker/produce_codec.py (hand-written: it is the hot path). Every other API uses
kafka-python's generated protocol classes (pure Python): garbage raises one of a few
exception types, which become ``BadRequest`` here, and nothing else escapes. kio 0.6.5's native decoder
was measured to abort the whole process on a random 60-byte frame declaring a huge array, so it is not
used.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from broker import apis, frames, produce_codec
from storage.errors import BadRequest

# What kafka-python's protocol decoder raises on bytes that do not match the schema (measured on random
# frames): nothing else escapes it.
DECODE_ERRORS = (
    struct.error,
    ValueError,
    IndexError,
    UnicodeDecodeError,
    TypeError,
    EOFError,
    OverflowError,
)


@dataclass(frozen=True, slots=True)
class Decoded:
    peek: frames.FramePeek
    api: apis.Api
    request: Any  # a kafka-python request object of api.request at peek.api_version


@dataclass(frozen=True, slots=True)
class UnsupportedApiVersions:
    """ApiVersions at a version this agent does not serve: answered with the v0 error, never closed."""

    correlation_id: int


def decode(frame: bytes | bytearray) -> Decoded | UnsupportedApiVersions:
    """The typed request in ``frame`` (everything after the size). BadRequest: the connection is closed."""
    peek = frames.peek(frame)
    api = apis.TABLE.get(peek.api_key)
    if api is None:
        raise BadRequest(f"unknown API key {peek.api_key}")
    if not api.min_version <= peek.api_version <= api.max_version:
        if peek.api_key == apis.API_VERSIONS:
            return UnsupportedApiVersions(peek.correlation_id)
        raise BadRequest(f"API {peek.api_key} version {peek.api_version} is not supported")
    if peek.api_key == apis.PRODUCE:
        # The hot path, decoded by hand (broker/produce_codec.py says why); it raises only BadRequest.
        return Decoded(peek, api, produce_codec.decode_request(frame))
    try:
        request = api.request.decode(bytes(frame), version=peek.api_version, header=True)
    except DECODE_ERRORS as exc:
        raise BadRequest(f"API {peek.api_key} v{peek.api_version} request does not decode: {exc}") from None
    return Decoded(peek, api, request)
