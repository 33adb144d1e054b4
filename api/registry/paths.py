"""The path the registry routes on, and subject names in it.

Registry clients percent-encode a subject whole (confluent-kafka: ``quote(subject, safe="")``), so a
subject may hold an encoded ``/`` (Karapace's tests register ``test_sche/ma_lifecycle``). An ASGI server
decodes ``scope["path"]`` before any routing, where that ``/`` would split the segment and no route would
match. ``routed_path`` rebuilds the path from ``raw_path`` instead: each segment decoded, then ``%`` and
``/`` escaped again (``%25``, ``%2F``), so a path parameter is always one segment and ``segment`` gives
its text back exactly. A trailing slash is dropped (``/subjects/`` is ``/subjects``), as Karapace does.

Under a mount (``root_path``, e.g. ``/schema-registry`` on the HTTP port) the raw path holds the prefix
too; it is kept as it is and only what follows it is rebuilt.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote, unquote_to_bytes

from fastapi import Depends
from starlette.types import Scope


def _escaped(raw: bytes) -> str:
    text = unquote_to_bytes(raw).decode("utf-8", "replace")
    return text.replace("%", "%25").replace("/", "%2F")


def routed_path(scope: Scope) -> str:
    """``scope["path"]`` as the registry routes it (the module docstring)."""
    root: str = scope.get("root_path", "")
    raw: bytes | None = scope.get("raw_path")
    if raw is None:
        rest = scope["path"][len(root) :] if scope["path"].startswith(root) else scope["path"]
        raw = rest.encode("utf-8")
    elif root and raw.startswith(root.encode("utf-8")):
        raw = raw[len(root.encode("utf-8")) :]
    raw = raw.split(b"?", 1)[0]
    path = "/".join(_escaped(part) for part in raw.split(b"/"))
    if not path.startswith("/"):
        path = "/" + path
    if len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/") or "/"
    return root + path


def segment(param: str) -> str:
    """A path parameter's text: the subject name as the client sent it."""
    return unquote(param)


def _subject(subject: str) -> str:
    return segment(subject)


# A route's ``{subject}``, decoded (the module docstring).
Subject = Annotated[str, Depends(_subject)]
