"""Subject names and version numbers as the registry's API takes them.

A subject name is any non-empty string without control characters (Karapace's tests register names with
quotes, braces, colons and slashes); ``__GLOBAL`` and ``__EMPTY`` are Confluent's reserved context names.
A version is ``1`` .. ``2^31 - 1``, or ``latest`` / ``-1`` for the latest one.
"""

from __future__ import annotations

import unicodedata

from registry.errors import InvalidSubject, InvalidVersion

MAX_VERSION = 2**31 - 1
MAX_SCHEMA_ID = 2**31 - 1
_RESERVED = frozenset({"__GLOBAL", "__EMPTY"})


def validate_subject(subject: str) -> str:
    """The subject, or InvalidSubject (42208)."""
    if not subject or subject in _RESERVED:
        raise InvalidSubject(f"The specified subject {subject!r} is not a valid subject name")
    if any(unicodedata.category(ch) == "Cc" for ch in subject):
        raise InvalidSubject(f"The specified subject {subject!r} contains control characters")
    return subject


def parse_version(version: str | int) -> int | None:
    """A version number, or None for the latest. Raises InvalidVersion (42202)."""
    text = str(version).strip()
    if text == "latest" or text == "-1":
        return None
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not 1 <= number <= MAX_VERSION or (isinstance(version, str) and not text.isdigit()):
        raise InvalidVersion(
            f"The specified version '{version}' is not a valid version id. Allowed values are between"
            ' [1, 2^31-1] and the string "latest"'
        )
    return number
