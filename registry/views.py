"""What the registry's service answers: plain frozen values, built from the store's rows, that the HTTP
routes turn into Confluent's JSON (``schemaType`` omitted for Avro, and so on, is theirs to decide)."""

from __future__ import annotations

from dataclasses import dataclass

from registry.compatibility import CompatibilityLevel
from registry.formats.base import Reference, SchemaType
from storage.metadata.schema_store import StoredSchema, VersionRow


@dataclass(frozen=True, slots=True)
class SchemaView:
    schema_id: int
    schema_type: SchemaType
    text: str  # as stored: as registered, or its canonical form when registered with normalize
    references: tuple[Reference, ...]
    guid: str

    @classmethod
    def of(cls, stored: StoredSchema) -> SchemaView:
        return cls(
            schema_id=stored.schema_id,
            schema_type=SchemaType(stored.schema_type),
            text=stored.text,
            references=tuple(Reference(r.name, r.subject, r.version) for r in stored.references),
            guid=stored.guid,
        )


@dataclass(frozen=True, slots=True)
class VersionView:
    subject: str
    version: int
    deleted: bool
    schema: SchemaView

    @property
    def schema_id(self) -> int:
        return self.schema.schema_id

    @classmethod
    def of(cls, row: VersionRow) -> VersionView:
        return cls(
            subject=row.subject, version=row.version, deleted=row.deleted, schema=SchemaView.of(row.schema)
        )


@dataclass(frozen=True, slots=True)
class CompatibilityResult:
    """``messages``: why not, when not (the routes show them with ``verbose``)."""

    is_compatible: bool
    messages: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ConfigView:
    compatibility: CompatibilityLevel
    normalize: bool | None = None
