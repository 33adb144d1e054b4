"""What a Kafka connection writes for one request, and how an answer holding a grant of the listener's fetch
budget (agents/budget.py) gives it back once the connection has written it (``Held``, ``Framed``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class Prebuilt(Protocol):
    """An answer that encodes itself (a codec written by hand, broker/fetch_codec.py), not an ApiMessage."""

    def frame(self, correlation_id: int) -> bytes:
        """The whole response frame, size included."""
        ...


@dataclass(slots=True)
class Held:
    """An answer whose bytes count against a budget until the connection has written it."""

    response: Any
    release: Callable[[], None]


@dataclass(slots=True)
class Framed:
    """An encoded answer whose grant goes back once the connection has written it (or dropped it)."""

    data: bytes
    release: Callable[[], None]


# What a connection writes for one request: bytes, bytes holding a grant, or nothing (acks=0).
Answer = bytes | Framed | None
