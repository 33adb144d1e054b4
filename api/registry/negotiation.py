"""Content negotiation as Confluent's registry does it (and Karapace's tests pin down).

- A POST or PUT body may be ``application/vnd.schemaregistry.v1+json``,
  ``application/vnd.schemaregistry+json``, ``application/json`` or ``application/octet-stream`` (parameters
  such as ``charset`` aside; no header counts as JSON). Anything else is 415.
- The answer's type comes from ``Accept``, q-values honoured, among the first three. No header, ``*``,
  ``*/*`` and ``*/<anything>`` give the registry's own type (``vnd.schemaregistry.v1+json``); an Accept none
  of the three satisfies (``text/*``, ``...v2+json``, ``application/octet-stream``) is 406.

The Accept header is parsed by werkzeug (Pallets' HTTP toolkit, well kept, pure Python, already installed
with moto's server): its ``MIMEAccept`` orders by quality and specificity as RFC 9110 says. Only the
registry's leniencies are ours: a bare ``*`` and ``*/<subtype>`` read as ``*/*``, and a quality without its
leading zero (``q=.2``) as ``q=0.2``, as Confluent's Jersey reads them (werkzeug drops such ranges).

werkzeug is imported by the functions that use it, on the registry's first request with a header to read:
its package imports its development server, test client and request wrappers, which an agent serving no
registry request would carry for nothing (about 2 MiB of a built agent's RSS; 13 MiB imported alone,
most of it standard library the agent loads anyway; tests/unit/test_agent_imports.py).
"""

from __future__ import annotations

import re

V1 = "application/vnd.schemaregistry.v1+json"
ANSWER_TYPES = (V1, "application/vnd.schemaregistry+json", "application/json")
BODY_TYPES = frozenset((*ANSWER_TYPES, "application/octet-stream"))


_BARE_QUALITY = re.compile(r"(?i)\bq\s*=\s*\.")


class NotAcceptable(Exception):
    """406: no answer type satisfies the Accept header."""


class UnsupportedMediaType(Exception):
    """415: the body's Content-Type is not one the registry reads."""


def check_body_type(method: str, content_type: str | None) -> None:
    """Raise UnsupportedMediaType for a POST or PUT whose body type the registry does not read."""
    if method not in ("POST", "PUT") or content_type is None:
        return
    from werkzeug.http import parse_options_header

    media, _ = parse_options_header(content_type)
    if media.lower() not in BODY_TYPES:
        raise UnsupportedMediaType(media)


def answer_type(accept: str | None) -> str:
    """The Content-Type of the answer; raises NotAcceptable."""
    if accept is None or not accept.strip():
        return V1
    ranges = []
    for part in accept.split(","):
        media, _, params = part.strip().partition(";")
        media = media.strip()
        if media == "*" or media.startswith("*/"):
            media = "*/*"
        params = _BARE_QUALITY.sub("q=0.", params)
        ranges.append(f"{media};{params}" if params else media)
    from werkzeug.datastructures import MIMEAccept
    from werkzeug.http import parse_accept_header

    best = parse_accept_header(", ".join(ranges), MIMEAccept).best_match(ANSWER_TYPES)
    if best is None:
        raise NotAcceptable(accept)
    return best
