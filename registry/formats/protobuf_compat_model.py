"""The vocabulary of the Protobuf compatibility check: Confluent's difference types, which of them are
compatible, a difference found at a path, the types two schemas declare, and the walk's context.

The difference types and the compatible set are those of Confluent's ``SchemaDiff`` (``Difference.Type``
and ``SchemaDiff.COMPATIBLE_CHANGES``), so a verbose answer names the same changes Confluent names. A path
is ``#/`` then the names walked: messages, a oneof, a field's number (``#/Order/2``,
``#/Order/payment/7``), an enum constant's number.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from hashlib import sha256

from google.protobuf import descriptor_pb2

from registry.formats.protobuf_print import syntax_of

FileProto = descriptor_pb2.FileDescriptorProto
MessageProto = descriptor_pb2.DescriptorProto
EnumProto = descriptor_pb2.EnumDescriptorProto


class DiffType(StrEnum):
    PACKAGE_CHANGED = "PACKAGE_CHANGED"
    MESSAGE_ADDED = "MESSAGE_ADDED"
    MESSAGE_REMOVED = "MESSAGE_REMOVED"
    MESSAGE_MOVED = "MESSAGE_MOVED"
    ENUM_ADDED = "ENUM_ADDED"
    ENUM_REMOVED = "ENUM_REMOVED"
    ENUM_CONST_ADDED = "ENUM_CONST_ADDED"
    ENUM_CONST_CHANGED = "ENUM_CONST_CHANGED"
    ENUM_CONST_REMOVED = "ENUM_CONST_REMOVED"
    FIELD_ADDED = "FIELD_ADDED"
    FIELD_REMOVED = "FIELD_REMOVED"
    FIELD_NAME_CHANGED = "FIELD_NAME_CHANGED"
    FIELD_KIND_CHANGED = "FIELD_KIND_CHANGED"
    FIELD_SCALAR_KIND_CHANGED = "FIELD_SCALAR_KIND_CHANGED"
    FIELD_NAMED_TYPE_CHANGED = "FIELD_NAMED_TYPE_CHANGED"
    FIELD_NUMERIC_LABEL_CHANGED = "FIELD_NUMERIC_LABEL_CHANGED"
    FIELD_STRING_OR_BYTES_LABEL_CHANGED = "FIELD_STRING_OR_BYTES_LABEL_CHANGED"
    REQUIRED_FIELD_ADDED = "REQUIRED_FIELD_ADDED"
    REQUIRED_FIELD_REMOVED = "REQUIRED_FIELD_REMOVED"
    ONEOF_ADDED = "ONEOF_ADDED"
    ONEOF_REMOVED = "ONEOF_REMOVED"
    ONEOF_FIELD_ADDED = "ONEOF_FIELD_ADDED"
    ONEOF_FIELD_REMOVED = "ONEOF_FIELD_REMOVED"
    ONEOF_FIELD_MOVED_TO_TOP_LEVEL = "ONEOF_FIELD_MOVED_TO_TOP_LEVEL"
    MULTIPLE_FIELDS_MOVED_TO_ONEOF = "MULTIPLE_FIELDS_MOVED_TO_ONEOF"
    FIELD_MOVED_TO_EXISTING_ONEOF = "FIELD_MOVED_TO_EXISTING_ONEOF"


COMPATIBLE = frozenset(
    {
        DiffType.MESSAGE_ADDED,
        DiffType.MESSAGE_MOVED,
        DiffType.ENUM_ADDED,
        DiffType.ENUM_REMOVED,
        DiffType.ENUM_CONST_ADDED,
        DiffType.ENUM_CONST_CHANGED,
        DiffType.ENUM_CONST_REMOVED,
        DiffType.FIELD_ADDED,
        DiffType.FIELD_REMOVED,
        DiffType.FIELD_NAME_CHANGED,
        DiffType.FIELD_STRING_OR_BYTES_LABEL_CHANGED,
        DiffType.ONEOF_ADDED,
        DiffType.ONEOF_REMOVED,
        DiffType.ONEOF_FIELD_ADDED,
        DiffType.ONEOF_FIELD_MOVED_TO_TOP_LEVEL,
    }
)


@dataclass(frozen=True, slots=True)
class Difference:
    """One change from the original schema (the writer's) to the update (the reader's)."""

    type: DiffType
    path: str
    detail: str = ""

    @property
    def compatible(self) -> bool:
        return self.type in COMPATIBLE

    def __str__(self) -> str:
        return f"{self.type} {self.path}" + (f": {self.detail}" if self.detail else "")


@dataclass(frozen=True, slots=True)
class TypeInfo:
    """A message or enum one side declares, in its own file or in an import."""

    full_name: str  # without the leading dot
    package: str
    file: str
    syntax: str  # of its file: "proto2", "proto3" or "editions"
    own: bool  # declared in the schema's own file, not an import
    message: MessageProto | None = None
    enum: EnumProto | None = None

    @property
    def is_map(self) -> bool:
        return self.message is not None and self.message.options.map_entry

    @property
    def local_name(self) -> str:
        """The name inside its package (``Outer.Inner``): Confluent compares these, so a type that keeps
        its name but moves to another package's file is the same type."""
        if self.package and self.full_name.startswith(self.package + "."):
            return self.full_name[len(self.package) + 1 :]
        return self.full_name


class TypeIndex:
    """Every message and enum of one side (the schema's own file and its imports) by full name."""

    def __init__(self, files: Sequence[FileProto]) -> None:
        self.own = files[-1]
        self.types: dict[str, TypeInfo] = {}
        self.closures: dict[str, bytes] = {}
        by_name = {file.name: file for file in files}
        for file in files:
            self._closure(file, by_name)
            self._collect(file, file.package, file.message_type, file.enum_type, own=file is self.own)

    def get(self, type_name: str) -> TypeInfo | None:
        return self.types.get(type_name.removeprefix("."))

    def _closure(self, file: FileProto, by_name: dict[str, FileProto]) -> bytes:
        """A digest of ``file`` and everything it imports: two sides' files that agree on it declare the
        same types, so comparing them can find nothing."""
        if file.name not in self.closures:
            digest = sha256(file.SerializeToString(deterministic=True))
            for name in file.dependency:
                imported = by_name.get(name)
                digest.update(self._closure(imported, by_name) if imported is not None else name.encode())
            self.closures[file.name] = digest.digest()
        return self.closures[file.name]

    def _collect(
        self,
        file: FileProto,
        scope: str,
        messages: Sequence[MessageProto],
        enums: Sequence[EnumProto],
        *,
        own: bool,
    ) -> None:
        syntax = syntax_of(file)
        for message in messages:
            name = f"{scope}.{message.name}" if scope else message.name
            self.types[name] = TypeInfo(name, file.package, file.name, syntax, own, message=message)
            self._collect(file, name, message.nested_type, message.enum_type, own=own)
        for enum in enums:
            name = f"{scope}.{enum.name}" if scope else enum.name
            self.types[name] = TypeInfo(name, file.package, file.name, syntax, own, enum=enum)


@dataclass
class Context:
    """The walk's state: both sides' types, where it is, the messages being compared (so that a
    recursive type is compared once), and what it found."""

    original: TypeIndex
    update: TypeIndex
    path: list[str] = field(default_factory=list)
    comparing: set[str] = field(default_factory=set)
    differences: list[Difference] = field(default_factory=list)

    def add(self, kind: DiffType, detail: str = "") -> None:
        self.differences.append(Difference(kind, "#/" + "/".join(self.path), detail))

    @contextmanager
    def at(self, *parts: str) -> Iterator[None]:
        self.path.extend(parts)
        try:
            yield
        finally:
            del self.path[len(self.path) - len(parts) :]

    def detached(self, path: list[str]) -> Context:
        """A context for a type declared in an import, with paths from that type's own name."""
        return Context(self.original, self.update, list(path), set(self.comparing))
