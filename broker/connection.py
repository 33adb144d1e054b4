"""One client connection: frames in, handlers run, responses out strictly in request order.

- Requests are read one after another. Before a frame's body is read, its size is reserved from the
  agent's produce budget, waiting for room if the buffer is full (Kafka's memory pool likewise stops
  reading sockets): memory for requests is bounded by the same configuration as HTTP's.
- Produce is admitted (checked and put in the buffer) before the next frame is read; every other request,
  and Produce's wait for its flush, runs concurrently. Responses go out in the order the requests came,
  as kafka-python and aiokafka require (they close the connection on a correlation id out of order).
- At most ``max_inflight_per_connection`` requests are unanswered; reading pauses at that many.
- ApiVersions at an unknown version gets the v0-format UNSUPPORTED_VERSION reply with the supported
  ranges (never a closed socket: librdkafka would reconnect in a loop). Any other unknown API or version,
  a frame that does not decode, or an oversize frame closes the connection, as Kafka's broker does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from kafka.protocol.api_message import ApiMessage

from agents.buffer import Reservation
from broker import apis, codec, errors, frames
from broker.budget import Answer, Framed, Held
from broker.context import BrokerContext
from broker.handlers.produce import admit_produce
from storage.errors import BadRequest, StrataError

log = logging.getLogger("strata.kafka")

Responder = Callable[[], Coroutine[Any, Any, Answer]]


class Connection:
    def __init__(
        self, ctx: BrokerContext, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.ctx = ctx
        self.reader = reader
        self.writer = writer
        self.peer = writer.get_extra_info("peername")
        self._pending: asyncio.Queue[asyncio.Future[Answer] | None] = asyncio.Queue(
            maxsize=ctx.config.max_inflight_per_connection
        )

    async def run(self) -> None:
        sender = asyncio.create_task(self._send_in_order(), name="strata-kafka-send")
        reader = asyncio.create_task(self._read_requests(), name="strata-kafka-read")
        try:
            # Whichever ends first ends the connection: the client closed or sent garbage (reader), or a
            # response could not be produced or written (sender).
            await asyncio.wait([reader, sender], return_when=asyncio.FIRST_COMPLETED)
            clean_eof = reader.done() and not reader.cancelled() and reader.exception() is None
            if clean_eof and not sender.done():
                await self._pending.put(None)  # the client closed: answer what it asked, then close
            else:
                reader.cancel()  # garbage, or a response that could not be made: drop the connection
                sender.cancel()
            for task, what in ((reader, "read"), (sender, "write")):
                try:
                    await task
                except (BadRequest, ConnectionError, asyncio.IncompleteReadError) as exc:
                    log.info("closing Kafka connection from %s (%s): %s", self.peer, what, exc)
                except asyncio.CancelledError:
                    if not task.cancelled():
                        raise
        finally:
            for task in (reader, sender):
                task.cancel()
            while not self._pending.empty():
                pending = self._pending.get_nowait()
                if pending is not None:
                    pending.cancel()
                    _release_unsent(pending)
            self.writer.close()

    async def _read_requests(self) -> None:
        buffer = self.ctx.agent.buffer
        max_bytes = self.ctx.config.max_request_bytes
        while True:
            size = await frames.read_size(self.reader, max_bytes)
            if size is None:
                return
            reservation = await buffer.reserve_when_free(size)
            try:
                frame = await self.reader.readexactly(size)
                answer = await self._admit(frame, reservation)
            finally:
                if reservation.size:
                    reservation.release()  # non-produce requests: nothing stays buffered
            await self._pending.put(answer)

    async def _admit(self, frame: bytes, reservation: Reservation) -> asyncio.Future[Answer]:
        """The future of the request's framed answer (None: no answer is sent)."""
        decoded = codec.decode(frame)
        if isinstance(decoded, codec.UnsupportedApiVersions):
            return asyncio.ensure_future(self._unsupported_api_versions(decoded.correlation_id)())
        correlation_id, request = decoded.peek.correlation_id, decoded.request
        handler = decoded.api.handler
        if handler is None:
            # Produce answers come framed from its callbacks (broker/handlers/produce.py), task-free.
            return await admit_produce(self.ctx, request, reservation)
        ctx = self.ctx
        return asyncio.ensure_future(self._encoder(correlation_id, lambda: handler(ctx, request))())

    def _encoder(
        self, correlation_id: int, produce: Callable[[], Awaitable[ApiMessage | Held | None]]
    ) -> Responder:
        async def respond() -> bytes | Framed | None:
            try:
                response = await produce()
            except StrataError as exc:
                # A handler answers its own per-item errors; what escapes it (say, the metadata store down
                # for a Metadata request) has no per-API error shape here, so the connection is closed and
                # the client retries on a new one.
                raise ConnectionError(f"request {correlation_id} failed: {exc.message}") from exc
            if response is None:
                return None
            held = response if isinstance(response, Held) else None
            message = response.response if isinstance(response, Held) else response
            try:
                message.with_header(correlation_id=correlation_id)
                encoded: bytes = message.encode(header=True, framed=True)
            except BaseException:
                if held is not None:
                    held.release()
                raise
            return encoded if held is None else Framed(encoded, held.release)

        return respond

    def _unsupported_api_versions(self, correlation_id: int) -> Responder:
        async def respond() -> bytes:
            # KIP-511: the v0 body, with the supported ranges, whatever version was asked for.
            body = apis.api_versions_response(0, errors.UNSUPPORTED_VERSION).encode()
            return frames.frame(correlation_id, False, body)

        return respond

    async def _send_in_order(self) -> None:
        while (task := await self._pending.get()) is not None:
            answer = await task
            if answer is None:
                continue
            data = answer.data if isinstance(answer, Framed) else answer
            try:
                if self.writer.is_closing():
                    # The peer went away while the answer was pending (uvloop raises RuntimeError on a
                    # write to a closed transport, asyncio's loop ignores it): end the connection cleanly.
                    raise ConnectionError("the client closed the connection before its answer was ready")
                self.writer.write(data)
                await self.writer.drain()
            finally:
                if isinstance(answer, Framed):
                    answer.release()  # written (or dropped with the connection): the budget is free again


def _release_unsent(pending: asyncio.Future[Answer]) -> None:
    """A fetch answer that was ready but will never be written still gives its grant back."""
    if pending.done() and not pending.cancelled() and pending.exception() is None:
        answer = pending.result()
        if isinstance(answer, Framed):
            answer.release()
