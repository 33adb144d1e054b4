"""The schema registry's operations over the metadata store (``SchemaStore``) and the formats: what the
HTTP routes call, with Confluent's semantics and the registry's errors (``registry.errors``).

Registration is one store transaction holding the subject's lock; what must be decided under it (the mode,
the compatibility check against the live versions) is ``_admit``, which the store calls there. ``_admit``
does no IO: the previous versions it checks against must be parsed already (the parse cache). One it has
not seen (another agent registered it a moment ago) makes it raise ``_Unprepared``; the transaction rolls
back, the version is parsed, and the registration runs again.

A registration of a schema that is already a live version of the subject is answered from a read, without
a write transaction, when the mode allows it: serializers register their schema on every start.

Messages follow Karapace's where its tests compare them (``Subject 'x' not found.``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

from registry import compatibility
from registry.configs import Configs
from registry.errors import (
    IncompatibleSchema,
    InvalidSchema,
    OperationNotPermitted,
    ReferenceExists,
    SchemaNotFound,
    StoreError,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotFound,
    VersionNotSoftDeleted,
    VersionSoftDeleted,
)
from registry.formats.base import ParsedSchema, Reference, SchemaFormat, SchemaType
from registry.formats.lazy import LazyFormats
from registry.levels import effective_level, effective_normalize
from registry.modes import Mode, effective_mode, require_registrable, require_writable
from registry.names import MAX_SCHEMA_ID, parse_version, validate_subject
from registry.parsing import Candidate, SchemaParser
from registry.views import CompatibilityResult, SchemaView, VersionView
from storage.metadata.schema_store import (
    DeleteOutcome,
    Deletion,
    ImportTarget,
    RegisterOutcome,
    Registration,
    RegistrationState,
    SchemaStore,
    VersionRow,
)

# A registration retried this often because versions kept appearing under it is reported as a store error.
_ATTEMPTS = 5
DEFAULT_CACHE_SIZE = 4096


def default_formats() -> Mapping[SchemaType, SchemaFormat]:
    """Every format this registry reads, by type, each imported on first use (registry/formats/lazy.py)."""
    return LazyFormats()


class _Unprepared(Exception):
    """Raised by ``_admit`` under the store's lock: these versions must be parsed first."""

    def __init__(self, rows: Sequence[VersionRow]) -> None:
        super().__init__(f"{len(rows)} version(s) not parsed yet")
        self.rows = tuple(rows)


def incompatible_message(level: compatibility.CompatibilityLevel, messages: Sequence[str]) -> str:
    # Karapace's wording (its tests compare the start), with the reasons cut as it cuts them.
    return f"Incompatible schema, compatibility_mode={level}. Incompatibilities: {', '.join(messages)[:300]}"


class SchemaRegistry(Configs):
    """Thread-safe: the store is, and the parse cache locks itself. Synchronous: async callers use a
    thread."""

    def __init__(
        self,
        store: SchemaStore,
        formats: Mapping[SchemaType, SchemaFormat],
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        super().__init__(store)
        self._parser = SchemaParser(store, formats, cache_size)

    # --- registration -----------------------------------------------------------------------------------
    def register(
        self,
        subject: str,
        text: str,
        schema_type: SchemaType = SchemaType.AVRO,
        references: Sequence[Reference] = (),
        *,
        normalize: bool = False,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> VersionView:
        """Register the schema under the subject (or find it there), as POST /subjects/{s}/versions.

        ``schema_id`` (and optionally ``version``) is IMPORT mode's: the schema keeps that id. Without an id
        a ``version`` is ignored. ``normalize`` stores the canonical form (the subject's or the global
        config may ask for it too). Raises InvalidSubject, InvalidSchema, IncompatibleSchema,
        OperationNotPermitted (mode, or an IMPORT id that holds another schema).
        """
        validate_subject(subject)
        import_as = None
        if schema_id is not None:
            if not 1 <= schema_id <= MAX_SCHEMA_ID:
                raise InvalidSchema(f"Invalid schema id {schema_id}")
            import_as = ImportTarget(schema_id, None if version is None else parse_version(version))
        normalize = normalize or effective_normalize(
            self._store.subject_config(subject), self._store.subject_config(None)
        )
        candidate = self._parser.candidate(text, schema_type, references, normalize)
        if import_as is None:
            found = self._store.find_subject_version(subject, candidate.new.fingerprint)
            if found is not None and self.effective_mode(subject) is Mode.READWRITE:
                return VersionView.of(found)
        registration = self._register(subject, candidate, import_as)
        row = self._store.subject_version(subject, registration.version, include_deleted=True)
        if row is None:  # permanently deleted between the commit and this read
            raise SchemaNotFound("Schema not found")
        return VersionView.of(row)

    def _register(self, subject: str, candidate: Candidate, import_as: ImportTarget | None) -> Registration:
        # The versions this registration parsed itself, so that its retries never depend on what the
        # shared cache still holds (a transitive subject may have more versions than the cache).
        prepared: dict[int, ParsedSchema] = {}
        admit = partial(self._admit, candidate, import_as is not None, prepared)
        for _ in range(_ATTEMPTS):
            try:
                registration = self._store.register_schema(subject, candidate.new, admit, import_as)
            except _Unprepared as unprepared:
                for row in unprepared.rows:
                    prepared[row.schema_id] = self._parser.parsed(row.schema)
                continue
            return _registered(subject, registration, import_as)
        raise StoreError(f"registering under {subject!r} kept meeting new versions; retry")

    def _admit(
        self, candidate: Candidate, with_id: bool, prepared: dict[int, ParsedSchema], state: RegistrationState
    ) -> None:
        """Under the subject's lock: refuse by raising. No IO (see the module docstring)."""
        require_registrable(state.subject, effective_mode(state.subject_mode, state.global_mode), with_id)
        if state.existing is not None or with_id:
            return  # a known schema is not checked again; IMPORT does not check (Confluent)
        level = effective_level(state.subject_config, state.global_config)
        previous = state.live if level.transitive else state.live[-1:]
        if level is compatibility.CompatibilityLevel.NONE or not previous:
            return
        parsed = [prepared.get(row.schema_id) or self._parser.cached(row.schema_id) for row in previous]
        unprepared = [row for row, p in zip(previous, parsed, strict=True) if p is None]
        if unprepared:
            raise _Unprepared(unprepared)
        messages = self._incompatibilities(level, candidate.parsed, [p for p in parsed if p is not None])
        if messages:
            raise IncompatibleSchema(incompatible_message(level, messages))

    def _incompatibilities(
        self, level: compatibility.CompatibilityLevel, new: ParsedSchema, previous: Sequence[ParsedSchema]
    ) -> list[str]:
        """``compatibility.check`` over the versions of the new schema's type; another type is a reason."""
        other = [p for p in previous if p.schema_type != new.schema_type]
        if other and level is not compatibility.CompatibilityLevel.NONE:
            return [f"Incompatible schema type: {other[-1].schema_type} becomes {new.schema_type}"]
        return compatibility.check(level, self._parser.format(new.schema_type), new, previous)

    # --- lookup and compatibility checks ----------------------------------------------------------------
    def lookup(
        self,
        subject: str,
        text: str,
        schema_type: SchemaType = SchemaType.AVRO,
        references: Sequence[Reference] = (),
        *,
        normalize: bool = False,
        include_deleted: bool = False,
    ) -> VersionView:
        """The latest version of the subject holding this schema (POST /subjects/{s}). Raises
        SubjectNotFound, InvalidSchema, SchemaNotFound."""
        validate_subject(subject)
        if not self._store.list_subject_versions(subject, include_deleted=include_deleted):
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        try:
            candidate = self._parser.candidate(text, schema_type, references, normalize)
        except InvalidSchema as exc:
            # Karapace's wording; the parser's reason stays on the exception's cause.
            raise InvalidSchema(f"Error while looking up schema under subject {subject}") from exc
        found = self._store.find_subject_version(subject, candidate.new.fingerprint, include_deleted)
        if found is None:
            raise SchemaNotFound("Schema not found")
        return VersionView.of(found)

    def check_compatibility(
        self,
        subject: str,
        version: str | int | None,
        text: str,
        schema_type: SchemaType = SchemaType.AVRO,
        references: Sequence[Reference] = (),
        *,
        normalize: bool = False,
    ) -> CompatibilityResult:
        """Whether the schema could be registered as the subject's level says, against one version
        (``version``: a number or ``latest``; VersionNotFound if it is not a live version) or, with None,
        against the live versions the level names (none: compatible). A transitive level checks every live
        version either way, as Karapace."""
        validate_subject(subject)
        wanted = None if version is None else parse_version(version)
        level = effective_level(self._store.subject_config(subject), self._store.subject_config(None))
        candidate = self._parser.candidate(text, schema_type, references, normalize)
        live = self._store.subject_version_rows(subject)
        if version is not None:
            chosen = [r for r in live if r.version == wanted] if wanted is not None else live[-1:]
            if not chosen:
                raise VersionNotFound(f"Version {version} not found.")
            if not level.transitive:
                live = chosen
        previous = live if level.transitive else live[-1:]
        parsed = [self._parser.parsed(row.schema) for row in previous]
        messages = self._incompatibilities(level, candidate.parsed, parsed) if parsed else []
        return CompatibilityResult(not messages, tuple(messages))

    # --- reads ------------------------------------------------------------------------------------------
    def schema(self, schema_id: int) -> SchemaView:
        """GET /schemas/ids/{id}, soft-deleted versions' ids included. Raises SchemaNotFound.

        The request's ``subject`` parameter names a context in Confluent's registry, where every id of
        the default context is found whatever the subject; this registry has the default context only,
        so the parameter changes nothing (confluent-kafka's deserializers send the subject their own
        strategy names, which need not be one the id was registered under)."""
        stored = self._store.schema_by_id(schema_id)
        if stored is None:
            raise SchemaNotFound(f"Schema {schema_id} not found")
        return SchemaView.of(stored)

    def schema_by_guid(self, guid: str) -> SchemaView:
        stored = self._store.schema_by_guid(guid)
        if stored is None:
            raise SchemaNotFound(f"Schema {guid} not found")
        return SchemaView.of(stored)

    def parsed(self, schema_id: int) -> ParsedSchema:
        """The schema parsed (``format=serialized`` needs the format's view of it). Raises SchemaNotFound."""
        stored = self._store.schema_by_id(schema_id)
        if stored is None:
            raise SchemaNotFound(f"Schema {schema_id} not found")
        return self._parser.parsed(stored)

    def max_schema_id(self) -> int:
        return self._store.max_schema_id()

    def schema_subjects(self, schema_id: int, include_deleted: bool = False) -> list[str]:
        """Subjects with a version using the id (GET /schemas/ids/{id}/subjects). Raises SchemaNotFound."""
        return list(dict.fromkeys(s for s, _ in self.schema_versions(schema_id, include_deleted)))

    def schema_versions(self, schema_id: int, include_deleted: bool = False) -> list[tuple[str, int]]:
        """(subject, version) using the id. Raises SchemaNotFound for an id that does not resolve."""
        if self._store.schema_by_id(schema_id) is None:
            raise SchemaNotFound(f"Schema {schema_id} not found")
        return self._store.schema_usages(schema_id, include_deleted)

    def subjects(
        self, prefix: str = "", include_deleted: bool = False, deleted_only: bool = False
    ) -> list[str]:
        return self._store.list_subjects(prefix, include_deleted, deleted_only)

    def schemas(
        self,
        prefix: str = "",
        include_deleted: bool = False,
        latest_only: bool = False,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[VersionView]:
        """GET /schemas: versions by subject and version. ``limit`` None (or negative): all."""
        rows = self._store.list_schema_versions(
            prefix,
            include_deleted,
            latest_only,
            max(offset, 0),
            None if limit is None or limit < 0 else limit,
        )
        return [VersionView.of(r) for r in rows]

    def versions(self, subject: str, include_deleted: bool = False, deleted_only: bool = False) -> list[int]:
        """Raises SubjectNotFound when there are none."""
        found = self._store.list_subject_versions(validate_subject(subject), include_deleted, deleted_only)
        if not found:
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        return found

    def version(self, subject: str, version: str | int, include_deleted: bool = False) -> VersionView:
        """One version (a number, ``latest`` or ``-1``). Raises InvalidVersion, SubjectNotFound (no version at
        all, or no live one for ``latest``), VersionNotFound."""
        wanted = parse_version(version)
        row = self._store.subject_version(validate_subject(subject), wanted, include_deleted)
        if row is not None:
            return VersionView.of(row)
        if wanted is None or not self._store.list_subject_versions(subject, include_deleted):
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        raise VersionNotFound(f"Version {version} not found.")

    def referenced_by(self, subject: str, version: str | int) -> list[int]:
        """Ids of the schemas referencing the (live) version."""
        return self._store.referenced_by(subject, self.version(subject, version).version)

    # --- deletes ----------------------------------------------------------------------------------------
    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """Soft, or permanent once soft: the versions deleted. Raises SubjectNotFound, SubjectSoftDeleted,
        SubjectNotSoftDeleted, ReferenceExists, OperationNotPermitted (read-only)."""
        require_writable(subject, self.effective_mode(validate_subject(subject)))
        deletion = self._store.delete_subject(subject, permanent)
        if deletion.outcome is DeleteOutcome.SOFT_DELETED:
            raise SubjectSoftDeleted(
                f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
            )
        if deletion.outcome is DeleteOutcome.NOT_SOFT_DELETED:
            raise SubjectNotSoftDeleted(
                f"Subject '{subject}' was not deleted first before being permanently deleted"
            )
        return list(_deleted(subject, deletion, None))

    def delete_version(self, subject: str, version: str | int, permanent: bool = False) -> int:
        """Soft-delete a live version, or permanently delete a soft-deleted one: its number. Raises
        InvalidVersion, SubjectNotFound, VersionNotFound, VersionSoftDeleted, VersionNotSoftDeleted,
        ReferenceExists, OperationNotPermitted (read-only)."""
        wanted = parse_version(version)
        require_writable(subject, self.effective_mode(validate_subject(subject)))
        deletion = self._store.delete_subject_version(subject, wanted, permanent)
        number = deletion.version
        if deletion.outcome is DeleteOutcome.SOFT_DELETED:
            raise VersionSoftDeleted(
                f"Subject '{subject}' Version {number} was soft deleted."
                " Set permanent=true to delete permanently"
            )
        if deletion.outcome is DeleteOutcome.NOT_SOFT_DELETED:
            raise VersionNotSoftDeleted(
                f"Subject '{subject}' Version {number} was not deleted first before being permanently deleted"
            )
        return _deleted(subject, deletion, version)[0]


def _registered(subject: str, registration: Registration, import_as: ImportTarget | None) -> Registration:
    """The registration, or the registry's error for a refusal the store reported as an outcome."""
    outcome = registration.outcome
    if outcome in (RegisterOutcome.REGISTERED, RegisterOutcome.EXISTING):
        return registration
    if outcome is RegisterOutcome.REFERENCE_MISSING and registration.reference is not None:
        ref = registration.reference
        raise InvalidSchema(
            f"Invalid reference {ref.name}: subject {ref.subject!r} has no version {ref.version}"
        )
    if outcome is RegisterOutcome.ID_CONFLICT and import_as is not None:
        # A schema that has another id gets this one too (Confluent since 5c27a6c3): only an id that holds
        # another schema is refused, with Confluent's OperationNotPermitted (checkIfSchemaWithIdExist).
        raise OperationNotPermitted(f"Overwrite new schema with id {import_as.schema_id} is not permitted.")
    if outcome is RegisterOutcome.VERSION_CONFLICT:
        raise OperationNotPermitted(
            f"Subject {subject} version {registration.version} holds schema id {registration.schema_id};"
            " an import cannot overwrite it"
        )
    raise StoreError(f"registration under {subject!r} ended with {outcome.value}")


def _deleted(subject: str, deletion: Deletion, asked: str | int | None) -> tuple[int, ...]:
    """The versions a delete removed, or the registry's error for the refusals both deletes share."""
    if deletion.outcome is DeleteOutcome.DELETED:
        return deletion.versions
    if deletion.outcome is DeleteOutcome.SUBJECT_NOT_FOUND:
        raise SubjectNotFound(f"Subject '{subject}' not found.")
    if deletion.outcome is DeleteOutcome.VERSION_NOT_FOUND:
        raise VersionNotFound(f"Version {asked} not found.")
    if deletion.outcome is DeleteOutcome.REFERENCED:
        raise ReferenceExists(
            "One or more references exist to the schema"
            f" {{magic=1,keytype=SCHEMA,subject={subject},version={deletion.version}}}."
        )
    raise StoreError(f"delete under {subject!r} ended with {deletion.outcome.value}")
