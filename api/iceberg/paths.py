"""Namespaces in paths and queries, as the REST spec writes them: the parts of a multi-level namespace
joined by the unit separator (``0x1F``, ``%1F`` in a URL), which the config does not change (it advertises
no ``namespace-separator``), so every client sends it.

Starlette has decoded the percent escapes of a path parameter before a route sees it, so a part holding
an encoded ``/`` cannot be told from two path segments: such a namespace does not route. The lake's
namespaces are names Strata makes (``strata``), so none has one.
"""

from __future__ import annotations

from api.iceberg.errors import BadRequest

SEPARATOR = "\x1f"


def parse_namespace(text: str) -> tuple[str, ...]:
    """The namespace a path parameter or the ``parent`` query names; BadRequest for an empty part."""
    parts = tuple(text.split(SEPARATOR))
    if not all(parts):
        raise BadRequest(f"invalid namespace {text!r}: empty part")
    return parts
