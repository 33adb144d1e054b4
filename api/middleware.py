"""Pure-ASGI middleware: request body size limit, optional authentication, and produce admission.

Authentication (with STRATA_API_TOKENS or --principals-file): every path but the probes needs
``Authorization: Bearer <token>`` (a principal's token, or one of STRATA_API_TOKENS) or ``Authorization:
Basic`` with a principal's name and password, the same password its Kafka clients use over SASL (or a
SCRAM credential stored at run time, agents/security.py). The principal rides in the ASGI scope
(api/authz.py) for the routes' permission checks. A probe (the permission table's unauthenticated
paths) is served without credentials; it carries the principal of valid ones, and None otherwise, so that
it can tell an operator more than an anonymous caller.

Admission: before a produce body is read, the agent's buffer is asked for a ``Reservation`` of its declared
size (agents/buffer.py owns the budget). The reservation rides in the ASGI scope to the produce handler,
which grows it by the parse expansion while it parses the body (``Admission.expansion``) and hands it to
the agent; the buffer consumes it when the request is queued. Whatever path the request takes, this
middleware releases it at the end, which does nothing if it was consumed.

Body limit: a declared Content-Length over the limit is refused before any byte is read; a chunked body is
counted as it streams and refused once it passes the limit. Either way the request never reaches a handler,
so memory per request is bounded by ``max_body_bytes``.

Body deadline: a body not received in full ``body_timeout_s`` after the request began is refused with 408
(40801), and what it reserved goes back: a client that stops sending cannot hold its reservation, nor a
connection, for longer. Until its last byte is in, a produce body counts against the produce buffer's
arriving share (agents/buffer.py).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Callable

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agents.buffer import Reservation
from agents.permissions import UNAUTHENTICATED_PATHS
from agents.principals import Principal
from agents.security import Security
from api.authz import PRINCIPAL
from storage.errors import BadRequest, BufferFull, RecordTooLarge, RequestTimeout, StrataError, Unauthorized

# Probes and scrapes stay reachable without a token, as load balancers and Prometheus expect.
OPEN_PATHS = UNAUTHENTICATED_PATHS
# The scope key under which the produce handler finds the Reservation made for its body.
RESERVATION = "strata.reservation"


class _BodyRefused(Exception):
    """Raised out of the app's body read: the body is too large or late (the error says which)."""


class Admission:
    """Memory admission for produce bodies, against the produce buffer's budget.

    A body being received holds the bytes received so far, which is what is reserved: ``FIRST_BYTES`` of it
    (or all of a shorter declared body) before it is read, so that an overloaded agent answers 429 at once,
    and then each chunk as it arrives, counted against the arriving share until the last one
    (agents/buffer.py). A client that declares a large body and sends it slowly, or not at all, holds
    only what it sent, never what it declared; one whose chunks no longer fit gets 429. Parsing it
    holds more: the parsed objects and the encoded batches beside the body. ``expansion`` is that peak
    per body byte; the handler reserves the difference only for its parse window, from the body's last
    byte until it is encoded (api/routes/records.py), in which nothing awaits: one event loop runs one
    such window at a time, so this peak adds at most one body's worth. Reserving the peak for the whole
    request instead refused loads that fit: a request waiting for its body, or for its flush, never holds
    the peak, and many clients sending bodies at once then reserved ``expansion`` times their bytes in
    flight, most of the buffer, while at most one of them was parsing (docs/benchmarks.md).
    """

    expansion = 4
    FIRST_BYTES = 64 * 1024

    def __init__(self, reserve: Callable[[int], Reservation]) -> None:
        self.reserve = reserve

    @staticmethod
    def applies(scope: Scope) -> bool:
        path: str = scope["path"]
        return scope["method"] == "POST" and path.startswith("/v1/topics/") and path.endswith("/records")


class LimitsAndAuth:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        security: Security | None,
        on_error: Callable[[StrataError], Response],
        admission: Admission | None = None,
        body_timeout_s: float = 30.0,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s
        self.security = security
        self.on_error = on_error
        self.admission = admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if self.security is not None:
            principal = authenticate(headers, self.security)
            if principal is None and scope["path"] not in OPEN_PATHS:
                await self.on_error(Unauthorized("missing or invalid credentials"))(scope, receive, send)
                return
            scope[PRINCIPAL] = principal
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await self.on_error(BadRequest("invalid Content-Length"))(scope, receive, send)
                return
            if length > self.max_body_bytes:
                await self.on_error(self._too_large())(scope, receive, send)
                return
        admission = self.admission
        reservation: Reservation | None = None
        if admission is not None and admission.applies(scope):
            # Reserve for the body's first bytes before reading it: an overloaded agent answers 429 at once,
            # without spending memory or CPU on a body it could not buffer. The rest is reserved as it comes.
            declared_bytes = int(declared) if declared is not None else self.max_body_bytes
            try:
                reservation = admission.reserve(min(declared_bytes, Admission.FIRST_BYTES))
            except BufferFull as exc:
                await self.on_error(exc)(scope, receive, send)
                return
            scope[RESERVATION] = reservation
        try:
            await self._limited(scope, receive, send, reservation)
        finally:
            if reservation is not None:
                reservation.release()  # a no-op if the buffer consumed it

    async def _limited(
        self, scope: Scope, receive: Receive, send: Send, reservation: Reservation | None
    ) -> None:
        received = 0
        started = False
        refused: StrataError | None = None
        deadline = asyncio.get_running_loop().time() + self.body_timeout_s
        complete = False

        async def limited_receive() -> Message:
            nonlocal received, refused, complete
            if complete:
                return await receive()  # after the body: only a disconnect is left to wait for
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                refused = RequestTimeout(f"the request body did not arrive within {self.body_timeout_s:g} s")
                raise _BodyRefused from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    refused = self._too_large()
                    raise _BodyRefused
                if reservation is not None and received > reservation.size:
                    try:
                        reservation.grow(received - reservation.size, arriving=True)
                    except BufferFull as exc:
                        # Without its traceback: this frame's cell holding ``refused`` would otherwise
                        # make a cycle with it, and keep the chunk in ``message`` until a full collection
                        # (tune_gc makes those rare): under overload, hundreds of MiB of refused bodies.
                        refused = exc.with_traceback(None)
                        raise _BodyRefused from None
                if not message.get("more_body", False):
                    complete = True
                    if reservation is not None:
                        reservation.arrived()
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if refused is not None:
                # The app's own answer to the aborted read (FastAPI turns any exception while reading the
                # body into a 400) is dropped: the client gets the 413 or 408 below.
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyRefused:
            pass
        if refused is not None and not started:
            await self.on_error(refused)(scope, receive, send)

    def _too_large(self) -> RecordTooLarge:
        return RecordTooLarge(f"request body exceeds {self.max_body_bytes} bytes")


def authenticate(headers: dict[bytes, bytes], principals: Security) -> Principal | None:
    """The principal of the request's ``Authorization`` (a bearer token, or Basic with a name and password),
    or None for none or a wrong one. The schema registry's door (api/registry/door.py) asks the same."""
    value = headers.get(b"authorization", b"").decode("latin-1")
    scheme, _, credentials = value.partition(" ")
    credentials = credentials.strip()
    if not credentials:
        return None
    if scheme.lower() == "bearer":
        return principals.by_token(credentials)
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credentials, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        name, sep, password = decoded.partition(":")
        return principals.by_password(name, password) if sep else None
    return None
