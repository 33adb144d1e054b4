"""The seven compatibility levels applied to one format's checker, sans IO.

A format only answers "can this reader read what that writer wrote" (``SchemaFormat.compatibility``); a level
says which pairs to ask about, as Confluent's registry does:
- BACKWARD: the new schema reads data written with the previous one (reader = new, writer = previous);
- FORWARD: the previous schema reads data written with the new one (reader = previous, writer = new);
- FULL: both;
- each ``*_TRANSITIVE`` asks the same of every previous schema, the others of the latest only;
- NONE asks nothing.

``previous`` is the subject's live versions oldest first, so the latest is the last one.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from registry.formats.base import ParsedSchema, SchemaFormat


class CompatibilityLevel(StrEnum):
    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        return self.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.startswith(("FORWARD", "FULL"))


def check(
    level: CompatibilityLevel, fmt: SchemaFormat, new: ParsedSchema, previous: Sequence[ParsedSchema]
) -> list[str]:
    """The reasons ``new`` breaks ``level`` against ``previous``; empty when it does not. Each reason says
    its direction; the same reason found against several versions is given once."""
    against = previous if level.transitive else previous[-1:]
    reasons: list[str] = []
    for old in reversed(against):
        if level.backward:
            reasons += [f"backward: {m}" for m in fmt.compatibility(reader=new, writer=old)]
        if level.forward:
            reasons += [f"forward: {m}" for m in fmt.compatibility(reader=old, writer=new)]
    return list(dict.fromkeys(reasons))
