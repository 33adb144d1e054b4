"""One client connection: frames in, requests admitted in arrival order, answers out in request order.

It is an ``asyncio.BufferedProtocol``, not a StreamReader/StreamWriter pair with tasks: under many small
Produce requests the streams' per-request machinery (``readexactly``, a queue put and get, a sender task's
step, ``drain``) took a large share of the event loop, and at large requests two copies of every byte (the
StreamReader's buffer, then ``readexactly``'s bytes) took another (docs/benchmarks.md). Here the kernel writes
a large frame straight into a buffer of its own, whose batches are then stored from it without another copy
(broker/handlers/produce.py, agents/flusher.py), and a Produce request is admitted and answered by plain
callbacks.

Reading:
- A frame of up to ``SMALL_FRAME`` bytes (size prefix included) is received into this connection's small
  buffer and copied out; a larger one gets a buffer of its declared size and the kernel fills it directly.
- Before a frame is kept, its size is reserved from the agent's produce budget (agents/buffer.py), so
  request memory is bounded by the same configuration as HTTP's. A request other than Produce reserves
  ``DECODED_EXPANSION`` times its size, for its decoded objects, and holds it until its handler answers.
  If the budget is full, reading pauses until memory frees up (Kafka's memory pool likewise mutes
  sockets); the client times out and retries.
- What is reserved follows what the client has sent, not what it declared: a small frame is reserved
  once it is complete (until then it holds only this connection's small buffer), and a large frame gets
  its reservation and its own buffer once its first ``SMALL_FRAME`` bytes are in. So a client that
  declares frames and sends them a byte at a time holds nothing of the budget, however many connections
  it opens (bench/slow_clients_bench.py).
- A Produce request is admitted (checked and put in the agent's buffer) before the next frame is looked
  at, so a connection's produce requests enter the buffer in the order they were sent; when a topic is not
  in the agent's topic cache, processing stops until it is loaded; a Produce answer waiting for its flush
  gets the request's ``timeout_ms`` as its deadline (broker/answers.py). Every other request runs as a
  task, concurrently with later ones.
- At most ``max_inflight_per_connection`` requests are unanswered; reading pauses at that many.
- Deadlines, checked by the listener's sweep every second (``check_deadlines``): a frame whose bytes stop
  arriving closes the connection ``request_receive_timeout_ms`` after its first byte (time stalled by the
  agent, for memory or a topic to load, does not count), and a connection that sends nothing and waits
  for nothing for ``connections_max_idle_ms`` is closed (Kafka's connections.max.idle.ms). A frame still
  arriving counts against the produce buffer's arriving share (agents/buffer.py), so slow senders can
  delay the others but not take the memory of requests that are in.
- ApiVersions at an unknown version gets the v0-format UNSUPPORTED_VERSION reply with the supported
  ranges (never a closed socket: librdkafka would reconnect in a loop). Any other unknown API or version,
  a frame that does not decode, or a frame over ``socket.request.max.bytes`` closes the connection, as
  Kafka's broker does.

Writing: answers go out in request order (broker/answers.py: how, and a Produce answer's deadline).

Authentication: with principals configured, a connection serves nothing but ApiVersions and SASL until SASL
succeeds, its frames before that are limited in size and reserved from a small budget of their own
(``BrokerContext.unauthenticated``), never from the produce buffer, and it has a deadline to authenticate
(broker/sasl.py says what the gate does).

At end of stream the connection answers what it was asked, then closes.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any, Protocol, cast

from kafka.protocol.api_message import ApiMessage

from agents.buffer import Reservation
from broker import apis, codec, errors, frames, produce_codec
from broker.admission import ProduceAdmission
from broker.answers import Answers, Slot
from broker.budget import Framed, Held, Prebuilt
from broker.context import BrokerContext
from broker.frame_pool import FramePool
from broker.sasl import BEFORE_AUTHENTICATION, SaslGate, State
from storage.errors import BadRequest, BufferFull, StrataError

log = logging.getLogger("strata.kafka")

# Frames up to this size (with their 4-byte size) go through the connection's small buffer; larger ones
# get a buffer of their own. Fixed cost per connection: this many bytes.
SMALL_FRAME = 32 * 1024
# A decoded request (kafka-python's objects: a str per name, an object per partition) holds at most this
# many times its frame's bytes; what a request other than Produce reserves while it is handled.
DECODED_EXPANSION = 16

_SIZE = struct.Struct(">i")

# Why reading is paused; processing of buffered frames stops for all of them.
_INFLIGHT = "inflight"  # max_inflight_per_connection answers outstanding
_MEMORY = "memory"  # waiting for the produce budget to reserve a frame
_CLOSING = "closing"  # end of stream or a fatal error: nothing more is read


class Registry(Protocol):
    """The listener's view of its connections (broker/server.py): the connection limit, and shutdown."""

    def opened(self, connection: Connection) -> bool: ...

    def lost(self, connection: Connection) -> None: ...

    @property
    def frames(self) -> FramePool: ...


class Connection(ProduceAdmission, asyncio.BufferedProtocol):
    """Framing, frame reservations and request admission; the answers (broker/answers.py) and the SASL gate
    (broker/sasl.py) are its parts."""

    def __init__(self, ctx: BrokerContext, registry: Registry) -> None:
        self.ctx = ctx
        self._registry = registry
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.peer: object = None
        self._small = bytearray(SMALL_FRAME)
        self._start = 0  # unprocessed bytes of the small buffer: [_start, _end)
        self._end = 0
        self._big: bytearray | None = None  # the large frame being received, and how much of it is
        self._big_filled = 0
        # The reservation of the frame whose size has been read and whose body is not yet handled.
        self._reservation: Reservation | None = None
        self._answers = Answers(self, ctx.config.max_inflight_per_connection)
        self._stalls: set[str] = set()
        self._reading = True
        self._process_scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._eof = False
        self._lost = False
        self._finishing = False  # answer what is owed, then close (a failed SASL exchange)
        self._tls = False
        self._gate = SaslGate(ctx.security, self._answers, self)
        # The gate's exchange, read on every frame; None when the listener needs no authentication.
        self._sasl = self._gate.exchange
        # Produce requests waiting for their flush, and how many unanswered requests stop this client from
        # sending (5 once it shows itself an idempotent producer): broker/waiting.py.
        self._produce_waiting = 0
        self._send_limit = ctx.config.max_inflight_per_connection
        self._wait_state = (False, False)
        # Deadlines (check_deadlines): the last time bytes came in, and when the frame still arriving began.
        self._last_read = self._loop.time()
        self._frame_since: float | None = None

    # --- asyncio.Protocol ----------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not registered as asyncio.Transport subclasses, but have its interface.
        self.transport = transport = cast(asyncio.Transport, transport)
        self.peer = transport.get_extra_info("peername")
        if isinstance(self.peer, tuple) and self.peer:
            self.ctx = replace(self.ctx, client_host=f"/{self.peer[0]}")
        self._tls = transport.get_extra_info("ssl_object") is not None
        self._gate.start(self._loop)
        self._answers.attach(transport)
        if not self._registry.opened(self):
            self._close()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        if self._end == len(self._small):
            self._compact()
            if self._end == len(self._small):
                # Only reachable while frames are held back (a stall), when reading is paused anyway:
                # make room rather than hand the transport an empty buffer (a new buffer: the old one
                # may still be exported to the transport, which forbids resizing it).
                self._small = self._small + bytes(SMALL_FRAME)
        return memoryview(self._small)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._big is not None:
            self._big_filled += nbytes
        else:
            self._end += nbytes
        self._last_read = now = self._loop.time()
        if self._frame_since is None:
            self._frame_since = now
        self._process()

    def eof_received(self) -> bool:
        self._eof = True
        self._check_eof()
        # Keep the transport open to write the answers still owed. A TLS transport closes on EOF whatever
        # is returned (and warns if True is), since TLS has no half-closed state.
        return not self._tls

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._gate.stop()
        for task in list(self._tasks):
            task.cancel()
        self._release_reservation()
        self._answers.drop()
        self._report_waiting()
        self._registry.lost(self)

    def pause_writing(self) -> None:
        self._answers.pause_writing()

    def resume_writing(self) -> None:
        self._answers.resume_writing()

    # --- reading -------------------------------------------------------------------------------------------
    def _process(self) -> None:
        """Handle every complete frame received, until one stalls processing."""
        self._process_scheduled = False
        try:
            while not self._stalls:
                if self._big is not None:
                    if self._big_filled < len(self._big):
                        return
                    frame, self._big = self._big, None
                    self._handle(frame)
                    continue
                available = self._end - self._start
                if available < 4:
                    break
                if self._reservation is None:
                    size = self._read_size()  # a size over the limit closes the connection at once
                    if available < 6:
                        break  # the API key too, to know what the frame will hold (``_cost``)
                    complete = 4 + size <= available
                    if not complete and (4 + size <= SMALL_FRAME or available < SMALL_FRAME):
                        # Reserved only once the client has sent it (a small frame) or shown it is sending
                        # it (a large one's first SMALL_FRAME bytes): see the module doc.
                        break
                    if not self._reserve(self._cost(size), arriving=not complete):
                        return  # stalled for memory: resumed by _wait_for_memory
                else:
                    (size,) = _SIZE.unpack_from(self._small, self._start)
                if 4 + size <= available:
                    body = self._start + 4
                    self._start = body + size
                    self._handle(self._small[body : self._start])
                elif 4 + size > len(self._small):
                    # A large frame: its own buffer, which the kernel fills from here on.
                    big = self._registry.frames.take(size)  # its bytes are undefined until received
                    have = available - 4
                    big[:have] = self._small[self._start + 4 : self._end]
                    self._big, self._big_filled = big, have
                    self._start = self._end = 0
                else:
                    break  # a small frame, not complete yet
        except BadRequest as exc:
            log.info("closing Kafka connection from %s: %s", self.peer, exc.message)
            self._close()
            return
        finally:
            if self._start == self._end:
                self._start = self._end = 0
                if self._big is None:
                    self._frame_since = None  # nothing left arriving
        if self._end - self._start < len(self._small) // 2 and self._start > len(self._small) // 2:
            self._compact()
        if self._eof:
            self._check_eof()

    def _cost(self, size: int) -> int:
        """What a frame of ``size`` bytes will hold while it lives: a Produce request its bytes (stored as
        they came); any other its decoded objects too, up to ``DECODED_EXPANSION`` times its bytes, held
        until its handler has answered (decoded Python objects take several times their wire bytes)."""
        api_key = (self._small[self._start + 4] << 8) | self._small[self._start + 5]
        return size if api_key == apis.PRODUCE else size * DECODED_EXPANSION

    def _read_size(self) -> int:
        size: int = _SIZE.unpack_from(self._small, self._start)[0]
        if self._authenticated:
            return frames.check_size(size, self.ctx.config.max_request_bytes)
        return self._gate.check_size(size)

    @property
    def _authenticated(self) -> bool:
        """Whether requests other than SASL's may be served (read on every frame, hence the exchange's own
        state rather than the gate's property)."""
        return self._sasl is None or self._sasl.state is State.AUTHENTICATED

    def _reserve(self, size: int, arriving: bool) -> bool:
        if not self._authenticated:
            try:
                self._reservation = self.ctx.unauthenticated.reserve(size)
            except BufferFull:
                raise BadRequest("unauthenticated connections hold too many bytes") from None
            return True
        try:
            self._reservation = self.ctx.agent.buffer.reserve(size, arriving=arriving)
            return True
        except BufferFull:
            self._stall(_MEMORY)
            self._spawn(self._wait_for_memory(size, arriving))
            return False

    async def _wait_for_memory(self, size: int, arriving: bool) -> None:
        reservation = await self.ctx.agent.buffer.reserve_when_free(size, arriving=arriving)
        if self._lost:
            reservation.release()
            return
        self._reservation = reservation
        self._unstall(_MEMORY)

    def _compact(self) -> None:
        if self._start:
            pending = self._end - self._start
            self._small[:pending] = self._small[self._start : self._end]
            self._start, self._end = 0, pending

    def _take_reservation(self) -> Reservation:
        reservation = self._reservation
        assert reservation is not None  # every frame is reserved before it is handled
        self._reservation = None
        reservation.arrived()
        return reservation

    def _release_reservation(self) -> None:
        if self._reservation is not None:
            self._reservation.release()
            self._reservation = None

    def _handle(self, frame: bytearray) -> None:
        reservation = self._take_reservation()
        if self._sasl is not None and self._sasl.expects_raw_token:
            reservation.release()
            self._gate.raw_token(bytes(frame))
            return
        # Produce (key 0), the hot path, goes straight to its decoder, which refuses other versions itself.
        produce = frame[0] == frame[1] == 0 and self._authenticated
        try:
            decoded = produce_codec.decode_request(frame) if produce else codec.decode(frame)
        except BadRequest:
            reservation.release()
            raise
        if isinstance(decoded, produce_codec.ProduceRequest):
            return self._admit_produce(decoded, reservation)
        key = decoded.api.key if isinstance(decoded, codec.Decoded) else apis.API_VERSIONS
        if not self._authenticated and key not in BEFORE_AUTHENTICATION:
            reservation.release()
            raise BadRequest(f"API {key} before SASL authentication")
        if key in (apis.SASL_HANDSHAKE, apis.SASL_AUTHENTICATE) and isinstance(decoded, codec.Decoded):
            reservation.release()
            self._gate.step(decoded)
            return
        handler = decoded.api.handler if isinstance(decoded, codec.Decoded) else None
        if isinstance(decoded, codec.UnsupportedApiVersions):
            reservation.release()
            # KIP-511: the v0 body, with the supported ranges, whatever version was asked for.
            body = apis.api_versions_response(0, errors.UNSUPPORTED_VERSION).encode()
            answers = self._answers
            answers.fill(answers.new_slot(), frames.frame(decoded.correlation_id, False, body))
            return
        assert handler is not None
        # The decoded request counts against memory until its handler has answered (``_cost``).
        slot = self._answers.new_slot()
        self._spawn(self._respond(slot, decoded.peek.correlation_id, handler, decoded.request, reservation))

    async def _respond(
        self,
        slot: Slot,
        correlation_id: int,
        handler: apis.Handler,
        request: object,
        reservation: Reservation,
    ) -> None:
        try:
            try:
                response = await handler(self.ctx, request)
            finally:
                del request  # the decoded request is gone: so is what it reserved (``_cost``)
                reservation.release()
        except StrataError as exc:
            # A handler answers its own per-item errors; what escapes it (say, the metadata store down for
            # a Metadata request) has no per-API error shape here, so the connection is closed and the
            # client retries on a new one.
            log.info(
                "closing Kafka connection from %s: request %d failed: %s",
                self.peer,
                correlation_id,
                exc.message,
            )
            self._close()
            return
        if response is None:
            self._answers.fill(slot, None)
            return
        held = response if isinstance(response, Held) else None
        message: ApiMessage | Prebuilt = response.response if isinstance(response, Held) else response
        try:
            if isinstance(message, ApiMessage):
                message.with_header(correlation_id=correlation_id)
                encoded: bytes = message.encode(header=True, framed=True)
            else:
                encoded = message.frame(correlation_id)
        except BaseException:
            if held is not None:
                held.release()
            raise
        if self._lost:
            if held is not None:
                held.release()
            return
        self._answers.fill(slot, encoded if held is None else Framed(encoded, held.release))

    # --- stalls --------------------------------------------------------------------------------------------
    def check_deadlines(self, now: float) -> None:
        """Close the connection if a frame's bytes stopped arriving, or if it has been idle too long (see
        the module doc); called by the listener's sweep."""
        if self._lost or self._finishing:
            return
        config = self.ctx.config
        if (
            self._frame_since is not None
            and not self._stalls
            and now - self._frame_since > config.request_receive_timeout_ms / 1000
        ):
            log.info(
                "closing Kafka connection from %s: a request's bytes stopped arriving for %d ms",
                self.peer,
                config.request_receive_timeout_ms,
            )
            self._close()
        elif (
            now - self._last_read > config.connections_max_idle_ms / 1000
            and not self._answers.slots
            and not self._tasks
        ):
            log.info("closing idle Kafka connection from %s", self.peer)
            self._close()

    def _stall(self, reason: str) -> None:
        self._stalls.add(reason)
        if self._reading and self.transport is not None and not self._lost:
            self._reading = False
            self.transport.pause_reading()

    def _unstall(self, reason: str) -> None:
        self._stalls.discard(reason)
        if self._stalls or self._lost:
            return
        if self._frame_since is not None:
            self._frame_since = self._loop.time()  # the time the agent held it back is not the client's
        if not self._reading and self.transport is not None:
            self._reading = True
            self.transport.resume_reading()
        if not self._process_scheduled:
            # Frames received while stalled are waiting in the buffers: handle them on the next turn.
            self._process_scheduled = True
            self._loop.call_soon(self._process)

    # --- what the answer queue tells (broker/answers.py) ---------------------------------------------------
    def inflight_limit(self) -> None:
        self._stall(_INFLIGHT)

    def produce_answered(self) -> None:
        self._produce_waiting -= 1
        self._report_waiting()

    def answers_written(self) -> None:
        if (
            _INFLIGHT in self._stalls
            and len(self._answers.slots) < self.ctx.config.max_inflight_per_connection
        ):
            self._unstall(_INFLIGHT)
        self._close_if_done()

    # --- lifecycle -----------------------------------------------------------------------------------------
    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("closing Kafka connection from %s: unexpected error", self.peer, exc_info=exc)
            self._close()
        elif self._eof:
            self._close_if_done()

    def _check_eof(self) -> None:
        """After end of stream: once every complete frame is handled, a partial one is garbage."""
        if self._stalls:
            return  # frames may still be waiting to be handled
        if self._big is not None or self._end > self._start:
            log.info("closing Kafka connection from %s: it ended inside a frame", self.peer)
            self._close()
            return
        self._close_if_done()

    def _close_if_done(self) -> None:
        done = (self._eof or self._finishing) and not self._answers.slots and not self._tasks
        if done and self.transport is not None:
            self.transport.close()  # writes what the transport still holds first

    def _close(self) -> None:
        self._stall(_CLOSING)
        if self.transport is not None:
            self.transport.close()

    def close(self) -> None:
        """Close at once: the server shuts down, or the SASL gate refuses the client."""
        self._close()

    def finish(self) -> None:
        """Answer what is owed, read nothing more, then close (a failed SASL exchange)."""
        self._finishing = True
        self._stall(_CLOSING)
