"""What the payload codecs of every format share: the error a payload that does not fit its schema raises, and
the result of decoding one.

Validation on produce and typed HTTP produce and fetch use these; a codec never raises anything else for
bad client bytes or a bad client value, so a door can turn every failure into one answer (INVALID_RECORD on
the Kafka door, a stable code over HTTP) without knowing the format.
"""

from __future__ import annotations

from dataclasses import dataclass


class InvalidPayload(ValueError):
    """A payload (bytes or a JSON value) that its schema does not accept; the message says why."""


@dataclass(frozen=True, slots=True)
class Decoded:
    """One payload decoded: ``value`` as the format's library returns it, ``consumed`` bytes read.

    ``complete`` is false when bytes were left over after the value: a payload with trailing bytes is not
    what the schema describes, and validation on produce refuses it."""

    value: object
    consumed: int
    size: int

    @property
    def complete(self) -> bool:
        return self.consumed == self.size
