"""Which compatibility level (``registry.compatibility.CompatibilityLevel``) applies to a subject, and the
levels as requests name them.

A subject's level is its own if set, else the global one, else ``DEFAULT_LEVEL`` (Confluent's BACKWARD).
The config's ``normalize`` falls back the same way, to False.
"""

from __future__ import annotations

from registry.compatibility import CompatibilityLevel
from registry.errors import InvalidCompatibilityLevel
from storage.metadata.schema_store import ConfigRow

DEFAULT_LEVEL = CompatibilityLevel.BACKWARD

# Karapace's wording; its tests compare it.
_INVALID = (
    "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive,"
    " forward_transitive, and full_transitive"
)


def parse_level(text: str) -> CompatibilityLevel:
    """A level by name, case-insensitively as Confluent reads it. Raises InvalidCompatibilityLevel."""
    try:
        return CompatibilityLevel(text.upper())
    except ValueError:
        raise InvalidCompatibilityLevel(_INVALID) from None


def stored_level(row: ConfigRow | None) -> CompatibilityLevel | None:
    """The level a config row sets, if any. A stored name this registry does not know is ignored: only
    ``parse_level``'s results are written there."""
    if row is None or row.compatibility is None:
        return None
    try:
        return CompatibilityLevel(row.compatibility)
    except ValueError:
        return None


def effective_level(subject: ConfigRow | None, global_: ConfigRow | None) -> CompatibilityLevel:
    return stored_level(subject) or stored_level(global_) or DEFAULT_LEVEL


def effective_normalize(subject: ConfigRow | None, global_: ConfigRow | None) -> bool:
    """Whether registrations normalize when the request does not ask to (Confluent's config ``normalize``)."""
    for row in (subject, global_):
        if row is not None and row.normalize is not None:
            return row.normalize
    return False
