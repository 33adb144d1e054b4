"""Pure-ASGI middleware: request body size limit and optional bearer-token auth.

Body limit: a declared Content-Length over the limit is refused before any byte is read; a chunked body is
counted as it streams and refused once it passes the limit. Either way the request never reaches a handler,
so memory per request is bounded by ``max_body_bytes``.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from storage.errors import BadRequest, RecordTooLarge, StrataError, Unauthorized

# Probes and scrapes stay reachable without a token, as load balancers and Prometheus expect.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class _BodyTooLarge(Exception):
    pass


class LimitsAndAuth:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        tokens: frozenset[str],
        on_error: Callable[[StrataError], Response],
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.tokens = tokens
        self.on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if self.tokens and scope["path"] not in OPEN_PATHS and not self._authorized(headers):
            await self.on_error(Unauthorized("missing or invalid bearer token"))(scope, receive, send)
            return
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
        received = 0
        started = False
        too_large = False

        async def limited_receive() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    too_large = True
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if too_large:
                # The app's own answer to the aborted read (FastAPI turns any exception while reading the
                # body into a 400) is dropped: the client gets the 413 below.
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            pass
        if too_large and not started:
            await self.on_error(self._too_large())(scope, receive, send)

    def _too_large(self) -> RecordTooLarge:
        return RecordTooLarge(f"request body exceeds {self.max_body_bytes} bytes")

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        value = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, token = value.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        return any(hmac.compare_digest(token.strip(), t) for t in self.tokens)
