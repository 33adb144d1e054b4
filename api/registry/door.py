"""What every request to the registry goes through before a route, as one pure-ASGI middleware:

1. the path is rebuilt from the raw path, so that an encoded ``/`` stays inside its subject (paths.py);
2. content negotiation (negotiation.py): an Accept the registry cannot answer is 406, a POST or PUT body
   of a type it does not read is 415; the answer type is set on every response on its way out, once here
   rather than in each route;
3. authentication, with the agent's principals (api/middleware.py's ``authenticate``: HTTP Basic, which
   confluent-kafka sends for ``basic.auth.user.info``, or a bearer token for ``bearer.auth.token``): no or
   wrong credentials is 401, but for the probes (the permission table's unauthenticated registry paths);
4. a POST or PUT body is read whole, bounded in size (413) and in time (408), and handed on as UTF-8 JSON:
   a ``charset`` other than UTF-8 is decoded here (Karapace's tests send UTF-16), and an
   ``application/octet-stream`` body is read as JSON, as Confluent reads it. Registry bodies are schemas
   and configs: small, and read whole by the route anyway.

Every refusal here has the registry's shape (``{"error_code": ..., "message": ...}``), never Strata's.
"""

from __future__ import annotations

import asyncio

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agents.permissions import REGISTRY_UNAUTHENTICATED_PATHS
from agents.security import Security
from api.authz import PRINCIPAL
from api.middleware import authenticate
from api.registry.errors import Unauthorized, error_response, http_error, registry_error
from api.registry.negotiation import (
    V1,
    NotAcceptable,
    UnsupportedMediaType,
    answer_type,
    check_body_type,
)
from api.registry.paths import routed_path


class _BodyRefused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class RegistryDoor:
    def __init__(
        self, app: ASGIApp, *, security: Security | None, max_body_bytes: int, body_timeout_s: float
    ) -> None:
        self.app = app
        self.security = security
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # A copy: the headers are changed below, and the path is the registry's own.
        scope = {**scope, "path": routed_path(scope), "headers": list(scope["headers"])}
        route = scope["path"][len(scope.get("root_path", "")) :] or "/"
        probe = route in REGISTRY_UNAUTHENTICATED_PATHS
        headers = Headers(scope=scope)
        try:
            media = answer_type(headers.get("accept"))
        except NotAcceptable:
            if not probe:
                await http_error(406)(scope, receive, send)
                return
            media = V1
        try:
            check_body_type(scope["method"], headers.get("content-type"))
        except UnsupportedMediaType:
            await http_error(415)(scope, receive, send)
            return
        if self.security is not None:
            principal = authenticate(dict(scope["headers"]), self.security)
            if principal is None and not probe:
                refused = Unauthorized("Unauthorized: missing or invalid credentials")
                await registry_error(refused)(scope, receive, send)
                return
            scope[PRINCIPAL] = principal
        if scope["method"] in ("POST", "PUT"):
            try:
                receive = await self._json_body(scope, receive, headers)
            except _BodyRefused as exc:
                await error_response(exc.status, exc.status, exc.message)(scope, receive, send)
                return

        async def typed(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer = MutableHeaders(raw=list(message.get("headers", [])))
                answer["content-type"] = media
                message["headers"] = answer.raw
            await send(message)

        await self.app(scope, receive, typed)

    async def _json_body(self, scope: Scope, receive: Receive, headers: Headers) -> Receive:
        """Read the body whole (bounded), as UTF-8; the scope's headers then say ``application/json``."""
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise _BodyRefused(413, f"the request body exceeds {self.max_body_bytes} bytes")
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        break
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        raise _BodyRefused(413, f"the request body exceeds {self.max_body_bytes} bytes")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            raise _BodyRefused(
                408, f"the request body did not arrive within {self.body_timeout_s:g} s"
            ) from None
        body = _utf8(b"".join(chunks), headers.get("content-type"))
        fixed = MutableHeaders(scope=scope)
        fixed["content-type"] = "application/json"  # a body without a type is JSON too (negotiation.py)
        fixed["content-length"] = str(len(body))
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()  # after the body: only a disconnect is left to wait for
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay


def _utf8(body: bytes, content_type: str | None) -> bytes:
    """The body in UTF-8: decoded from its declared charset first, if it has one. Without one, JSON's own
    detection stands (UTF-8, or UTF-16/32 by their byte patterns). An unknown charset is 415; bytes that
    are not in the declared one are 400."""
    if content_type is None:
        return body
    from werkzeug.http import parse_options_header  # loaded on first use: see negotiation.py

    _, params = parse_options_header(content_type)
    charset = params.get("charset", "").strip().lower()
    if charset in ("", "utf-8", "utf8"):
        return body
    try:
        return body.decode(charset).encode("utf-8")
    except LookupError:
        raise _BodyRefused(415, "HTTP 415 Unsupported Media Type") from None
    except UnicodeDecodeError:
        raise _BodyRefused(400, f"the request body is not valid {charset}") from None
