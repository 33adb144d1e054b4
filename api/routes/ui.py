"""The web console: static files under /ui, served by the agent itself (nothing loads from a CDN).

The console is a client of the public HTTP API only (/v1/...), in the browser, with the same
authentication: when the agent requires credentials, /ui answers 401 with a Basic challenge, the browser
asks for a principal's name and password, and sends them with every API call the console makes.

Every page carries a Content-Security-Policy that allows scripts from the agent only, as defence in depth:
the console renders keys and values as text (``textContent``), never as HTML.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

UI_DIR = Path(__file__).resolve().parent.parent / "ui"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)


@router.get("/ui")
async def index() -> FileResponse:
    return FileResponse(UI_DIR / "index.html", headers=SECURITY_HEADERS)


@router.get("/ui/")
async def index_slash() -> RedirectResponse:
    return RedirectResponse("/ui")


class Assets(StaticFiles):
    """StaticFiles (which refuses paths outside its directory) with the console's security headers."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await super().__call__(scope, receive, send_with_headers)


def assets() -> Assets:
    """The app mounted at /ui/assets (api/app.py)."""
    return Assets(directory=UI_DIR)
