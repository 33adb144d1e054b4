"""The metadata role the schema registry keeps its state in (``SchemaStore``), and its rows.

The store knows nothing of schema formats or of the registry's rules: it keeps text it is given, finds it
by fingerprint, and answers with facts (rows, None, an outcome). Where a decision must be taken under the
subject's lock (the mode, the compatibility check), the registry passes a callable that refuses by
raising; the write transaction then rolls back and the exception propagates unchanged. Part of
``storage.metadata.base``'s roles.

Vocabulary:
- a *schema* has a global id, a type (``AVRO``, ``JSON``, ``PROTOBUF``), its text, a canonical form, a
  fingerprint and a guid; one fingerprint, one id, forever (a permanent delete only makes the id stop
  resolving until the schema is registered again), except that IMPORT mode may give a schema more ids,
  as Confluent does (storage/metadata/schema_registry_ids.py): a registration without an id keeps
  getting the first;
- a *version* is a subject's n-th registration of a schema; *live* unless soft-deleted;
- the *global* config and mode are those of the subject ``None``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol


@dataclass(frozen=True, slots=True)
class SchemaRef:
    """A reference as registered: the name the schema uses and the (subject, version) it points at."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class NewSchema:
    """A schema to register, with everything the registry derived from it."""

    schema_type: str
    text: str
    canonical: str
    fingerprint: str
    guid: str
    references: tuple[SchemaRef, ...] = ()


@dataclass(frozen=True, slots=True)
class StoredSchema:
    schema_id: int
    schema_type: str
    text: str
    canonical: str
    fingerprint: str
    guid: str
    references: tuple[SchemaRef, ...]
    created_ms: int


@dataclass(frozen=True, slots=True)
class VersionRow:
    subject: str
    version: int
    deleted: bool
    schema: StoredSchema

    @property
    def schema_id(self) -> int:
        return self.schema.schema_id


@dataclass(frozen=True, slots=True)
class ConfigRow:
    """A subject's (or the global) config as set; None is "not set"."""

    compatibility: str | None
    normalize: bool | None


@dataclass(frozen=True, slots=True)
class RegistrationState:
    """What a registration's ``check`` sees, read under the subject's lock.

    ``live`` are the subject's live versions, oldest first. ``existing`` is the live version holding the
    same schema (same fingerprint, and the given id in IMPORT mode), if any: the registration then returns
    it unless ``check`` refuses (a read-only mode refuses even that, as Confluent).
    """

    subject: str
    live: tuple[VersionRow, ...]
    existing: VersionRow | None
    subject_mode: str | None
    global_mode: str | None
    subject_config: ConfigRow | None
    global_config: ConfigRow | None


class RegisterOutcome(Enum):
    REGISTERED = "registered"  # a new version
    EXISTING = "existing"  # the schema was a live version of the subject already
    REFERENCE_MISSING = "reference missing"  # a referenced (subject, version) has no row (any more)
    ID_CONFLICT = "id conflict"  # IMPORT: the id holds another schema
    VERSION_CONFLICT = "version conflict"  # IMPORT: the version holds another schema


@dataclass(frozen=True, slots=True)
class Registration:
    """What a registration did. ``schema_id`` and ``version``: the version registered or found; for
    VERSION_CONFLICT, the id the version holds. ``reference``: the missing one."""

    outcome: RegisterOutcome
    schema_id: int | None = None
    version: int | None = None
    reference: SchemaRef | None = None


class DeleteOutcome(Enum):
    DELETED = "deleted"
    SUBJECT_NOT_FOUND = "subject not found"  # no version row at all
    VERSION_NOT_FOUND = "version not found"
    SOFT_DELETED = "soft-deleted already"  # a soft delete of what is soft-deleted
    NOT_SOFT_DELETED = "not soft-deleted"  # a permanent delete of what is live
    REFERENCED = "referenced"  # a schema with a version row references the version


@dataclass(frozen=True, slots=True)
class Deletion:
    """``versions``: the versions deleted, ascending; ``version``: the one a refusal is about."""

    outcome: DeleteOutcome
    versions: tuple[int, ...] = ()
    version: int | None = None


@dataclass(frozen=True, slots=True)
class ImportTarget:
    """IMPORT mode: the id the schema must have, and the version it must get (None: the next one)."""

    schema_id: int
    version: int | None = None


class SchemaStore(Protocol):
    """The schema registry's subjects, versions, schemas, configs and modes.

    Subjects passed here are non-empty (the registry validates names); ``None`` names the global config
    and mode. Every method is one transaction.
    """

    def register_schema(
        self,
        subject: str,
        schema: NewSchema,
        check: Callable[[RegistrationState], None],
        import_as: ImportTarget | None = None,
    ) -> Registration:
        """One write transaction holding the subject's row (inserted if absent): ``check`` gets the
        subject's state and refuses by raising (nothing written, the exception propagates). Then, unless
        the schema is an ``existing`` live version: the schema row is found by fingerprint or inserted
        (one id per schema, whatever the subject), and the subject's next version is inserted; version
        numbers are never handed out twice while the subject has a version row. Every reference must name
        an existing version row (soft-deleted ones included), held until the commit so that it cannot be
        deleted meanwhile. ``import_as`` gives the id and version (IMPORT mode): an id holding another
        schema, or a version holding another id, is an outcome; a schema that has another id already gets
        this one too; the id sequence moves past the id."""
        ...

    def schema_by_id(self, schema_id: int) -> StoredSchema | None:
        """The schema, while some version row (soft-deleted included) uses the id."""
        ...

    def schema_by_guid(self, guid: str) -> StoredSchema | None:
        """As ``schema_by_id``; of a schema with several ids, the first that resolves."""
        ...

    def max_schema_id(self) -> int:
        """The highest id ever given (0 when none)."""
        ...

    def schema_usages(self, schema_id: int, include_deleted: bool = False) -> list[tuple[str, int]]:
        """(subject, version) of the versions using the id, by subject (code-point order) and version."""
        ...

    def list_subjects(
        self, prefix: str = "", include_deleted: bool = False, deleted_only: bool = False
    ) -> list[str]:
        """Subjects with a live version (``include_deleted``: or only soft-deleted ones; ``deleted_only``:
        only those whose versions are all soft-deleted) whose name starts with ``prefix``, in code-point
        order."""
        ...

    def list_subject_versions(
        self, subject: str, include_deleted: bool = False, deleted_only: bool = False
    ) -> list[int]:
        """The subject's version numbers, ascending: live ones, or with (only) the soft-deleted ones."""
        ...

    def subject_version_rows(self, subject: str, include_deleted: bool = False) -> list[VersionRow]:
        """The subject's versions with their schemas, ascending: live ones, or all."""
        ...

    def subject_version(
        self, subject: str, version: int | None, include_deleted: bool = False
    ) -> VersionRow | None:
        """One version (``None``: the latest), live unless ``include_deleted``."""
        ...

    def find_subject_version(
        self, subject: str, fingerprint: str, include_deleted: bool = False
    ) -> VersionRow | None:
        """The latest version of the subject holding the schema with this fingerprint."""
        ...

    def list_schema_versions(
        self,
        prefix: str = "",
        include_deleted: bool = False,
        latest_only: bool = False,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[VersionRow]:
        """Versions of the subjects starting with ``prefix``, by subject (code-point order) and version:
        live ones (or all), only each subject's latest of those with ``latest_only``; then the page."""
        ...

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the schemas that reference the version and still have a version row, ascending."""
        ...

    def delete_subject(self, subject: str, permanent: bool) -> Deletion:
        """Soft: every live version is marked deleted (refused when there is none, or a version is
        referenced from another subject). Permanent: every version row goes, once all are soft-deleted
        (the same reference rule); then the subject's config and mode go too, and its version numbers
        start again at 1."""
        ...

    def delete_subject_version(self, subject: str, version: int | None, permanent: bool) -> Deletion:
        """One version (``None``: the latest live one for a soft delete, the latest for a permanent one):
        soft-delete a live one, or permanently delete a soft-deleted one; refused if any schema with a
        version row references it. A permanent delete of the last row is a permanent subject delete."""
        ...

    def subject_config(self, subject: str | None) -> ConfigRow | None: ...

    def set_subject_config(
        self, subject: str | None, compatibility: str | None, normalize: bool | None
    ) -> ConfigRow:
        """Set the fields given (None keeps what is set); returns the row as it now is."""
        ...

    def delete_subject_config(self, subject: str | None) -> ConfigRow | None:
        """Forget the config; returns what was set."""
        ...

    def subject_mode(self, subject: str | None) -> str | None: ...

    def set_subject_mode(
        self, subject: str | None, mode: str, check: Callable[[str | None, bool], None] | None = None
    ) -> None:
        """Set the mode. ``check`` gets, under the scope's lock, the mode set there now and whether any
        live version exists in the scope (the subject's, or any subject's for the global mode), and
        refuses by raising."""
        ...

    def delete_subject_mode(self, subject: str | None) -> str | None:
        """Forget the mode; returns what was set."""
        ...
