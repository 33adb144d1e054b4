"""What every schema format gives the registry: a parsed schema and a compatibility check, sans IO.

A format module (``avro``, ``jsonschema``, ``protobuf``) exposes a ``FORMAT`` object implementing
``SchemaFormat``. The registry's service resolves references first (a reference names a subject and a
version; its schema is loaded from the store), in dependency order: every ``Resolved`` comes after the
references it uses itself, so a format can parse them front to back.

Invariants:
- ``parse`` raises ``registry.errors.InvalidSchema`` (42201) with the parser's own message for anything it
  cannot read, and never another exception type.
- ``ParsedSchema.canonical`` is deterministic: two schemas that mean the same get the same text, which the
  registry fingerprints (with the type and the references) to give one id to one schema.
- ``compatibility(reader, writer)`` returns the reasons the reader cannot read data written with the writer;
  an empty list means compatible. A difference the checker does not understand is a reason (conservative).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class SchemaType(StrEnum):
    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"


@dataclass(frozen=True, slots=True)
class Reference:
    """A reference as registered: ``name`` is how the schema names it (an Avro full name, a JSON ``$ref``
    URL, a Protobuf import path); ``subject`` and ``version`` say where its schema is registered."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class Resolved:
    """A referenced schema, loaded: its reference name and its text as registered, of the same type."""

    name: str
    schema_type: SchemaType
    text: str


class ParsedSchema(Protocol):
    @property
    def schema_type(self) -> SchemaType: ...

    @property
    def text(self) -> str:
        """The schema as registered (for Protobuf: ``.proto`` text, whichever form arrived)."""
        ...

    def canonical(self) -> str:
        """The normalized text (``normalize=true`` stores it; fingerprints hash it)."""
        ...

    def record_names(self) -> Sequence[str]:
        """The full names RecordNameStrategy can use: an Avro record's name, the Protobuf messages in
        declaration order (index paths flattened), a JSON schema's ``title``; empty if there are none."""
        ...


class SchemaFormat(Protocol):
    @property
    def schema_type(self) -> SchemaType: ...

    def parse(self, text: str, references: Sequence[Resolved]) -> ParsedSchema: ...

    def compatibility(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]: ...
