"""Modes: what writes a subject (or the whole registry) accepts.

- READWRITE (the default): registrations, deletes and config changes.
- READONLY: none of them (42205); READONLY_OVERRIDE as the global mode makes every subject read-only,
  whatever its own mode says.
- IMPORT: registrations must give the schema's id (and may give its version), as a migration from another
  registry does; compatibility is not checked; a schema that has an id already gets the given one too
  (Confluent). A scope may enter IMPORT only while it has no live version, unless forced, so that
  imported ids cannot meet ids this registry handed out in the same subject.

The mode of a subject is its own, else the global one, else READWRITE; a global READONLY_OVERRIDE wins.
"""

from __future__ import annotations

from enum import StrEnum

from registry.errors import InvalidMode, OperationNotPermitted


class Mode(StrEnum):
    READWRITE = "READWRITE"
    READONLY = "READONLY"
    READONLY_OVERRIDE = "READONLY_OVERRIDE"
    IMPORT = "IMPORT"

    @property
    def read_only(self) -> bool:
        return self in (Mode.READONLY, Mode.READONLY_OVERRIDE)


DEFAULT_MODE = Mode.READWRITE


def parse_mode(text: str) -> Mode:
    """A mode by name, case-insensitively. Raises InvalidMode."""
    try:
        return Mode(text.upper())
    except ValueError:
        raise InvalidMode(
            f"Invalid mode {text!r}. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and IMPORT"
        ) from None


def stored_mode(text: str | None) -> Mode | None:
    """The mode a row sets, if any (a name this registry does not know is ignored: only ``parse_mode``
    writes the column)."""
    if text is None:
        return None
    try:
        return Mode(text)
    except ValueError:
        return None


def effective_mode(subject: str | None, global_: str | None) -> Mode:
    mode_global = stored_mode(global_)
    if mode_global is Mode.READONLY_OVERRIDE:
        return mode_global
    return stored_mode(subject) or mode_global or DEFAULT_MODE


def require_writable(subject: str, mode: Mode) -> None:
    """Deletes and config changes: refused in a read-only mode."""
    if mode.read_only:
        raise OperationNotPermitted(f"Subject {subject} is in read-only mode")


def require_registrable(subject: str, mode: Mode, with_id: bool) -> None:
    """A registration with a given id needs IMPORT mode; one without needs READWRITE (Confluent)."""
    require_writable(subject, mode)
    if with_id and mode is not Mode.IMPORT:
        raise OperationNotPermitted(f"Subject {subject} is not in import mode")
    if not with_id and mode is not Mode.READWRITE:
        raise OperationNotPermitted(f"Subject {subject} is not in read-write mode")
