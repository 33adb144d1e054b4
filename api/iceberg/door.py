"""What every request to the Iceberg catalog goes through before a route: authentication with the agent's
principals (api/middleware.py's ``authenticate``: a bearer token, which pyiceberg's ``RestCatalog`` sends
for its ``token`` property and DuckDB for its secret's ``TOKEN``, or HTTP Basic with a principal's name
and password, as on the rest of the HTTP port). No or wrong credentials is 401 in the spec's body; the
catalog has no probe, so no path is open without them. The principal rides in the ASGI scope under
``api.authz.PRINCIPAL`` for the routes' permission checks (api/iceberg/access.py).

The catalog takes no request body it reads (every write is refused before one would be), so there is no
body limit to apply here beyond the server's own.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from agents.security import Security
from api.authz import PRINCIPAL
from api.iceberg.errors import NotAuthorized, iceberg_error
from api.middleware import authenticate


class IcebergDoor:
    def __init__(self, app: ASGIApp, *, security: Security | None) -> None:
        self.app = app
        self.security = security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.security is not None:
            principal = authenticate(dict(scope["headers"]), self.security)
            if principal is None:
                refused = NotAuthorized("missing or invalid credentials: send a bearer token or Basic auth")
                await iceberg_error(refused)(scope, receive, send)
                return
            scope[PRINCIPAL] = principal
        await self.app(scope, receive, send)
