"""A produce body refused part-way (its next chunk no longer fits the arriving share) is answered 429, and
nothing of it outlives the request: no reference cycle keeps the refused chunk for the garbage collector,
which the server runs rarely (strata/server.py, tune_gc). Such cycles once held hundreds of MiB of refused
bodies under the HTTP overload benchmark."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from agents.buffer import ProduceBuffer
from api.errors import error_response
from api.middleware import Admission, LimitsAndAuth
from tests.fixtures.collector import live_frames

KiB = 1024
CHUNK = 64 * KiB


async def _reads_the_body(scope: Scope, receive: Receive, send: Send) -> None:
    body = await Request(scope, receive).body()
    await Response(str(len(body)))(scope, receive, send)


def _scope(length: int) -> Scope:
    return {
        "type": "http",
        "method": "POST",
        "path": "/v1/topics/t/records",
        "headers": [(b"content-length", str(length).encode())],
    }


def _request(app: LimitsAndAuth, chunks: int) -> list[Message]:
    sent: list[Message] = []
    parts: Iterator[Message] = iter(
        [{"type": "http.request", "body": bytes(CHUNK), "more_body": i < chunks - 1} for i in range(chunks)]
    )

    async def receive() -> Message:
        return next(parts, {"type": "http.disconnect"})

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(app(_scope(chunks * CHUNK), receive, send))
    return sent


def _app(buffer: ProduceBuffer) -> LimitsAndAuth:
    return LimitsAndAuth(
        _reads_the_body,
        max_body_bytes=64 * CHUNK,
        security=None,
        on_error=error_response,
        admission=Admission(functools.partial(buffer.reserve, arriving=True)),
    )


def test_a_body_refused_part_way_is_429_and_leaves_no_cycle(collector_off: None) -> None:
    buffer = ProduceBuffer(max_bytes=16 * CHUNK)  # an arriving share of 8 chunks
    other = buffer.reserve(6 * CHUNK, arriving=True)  # another client's body, still arriving
    sent = _request(_app(buffer), chunks=4)  # its first chunk fits the share; its second does not
    assert sent[0]["status"] == 429
    assert live_frames("limited_receive") == []  # freed with the request, not left to the collector
    assert buffer.arriving_bytes == other.size  # the refused body's reservation was given back
    other.release()


def test_a_body_that_fits_is_read_whole(collector_off: None) -> None:
    buffer = ProduceBuffer(max_bytes=16 * CHUNK)
    sent = _request(_app(buffer), chunks=4)
    assert sent[0]["status"] == 200
    assert sent[1]["body"] == str(4 * CHUNK).encode()
    assert buffer.reserved_bytes == 0
