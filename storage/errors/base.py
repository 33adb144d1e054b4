"""The base of every Strata error, and the kinds that tell a caller what to do (see the package doc)."""

from __future__ import annotations

from enum import Enum
from typing import ClassVar


class ErrorKind(Enum):
    INVALID = "invalid"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    UNAVAILABLE = "unavailable"
    CORRUPT = "corrupt"
    INTERNAL = "internal"


class StrataError(Exception):
    """Base of every error Strata raises on purpose; raised itself only for internal errors (bugs)."""

    kind: ClassVar[ErrorKind] = ErrorKind.INTERNAL
    code: ClassVar[int] = 50001
    retriable: ClassVar[bool] = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
