"""The schema registry's writes: registration and deletes (``SchemaStore``, storage/metadata/schema_store.py;
the tables are migration 11's, storage/metadata/schema_registry.py, with migration 12's duplicate rows,
schema_registry_ids.py). ``SchemaQueries`` is the whole role.

Locks, in the global order of ``core``: the global ``sr_mode`` row (FOR KEY SHARE: a registration, a
subject's mode change; FOR UPDATE: a global mode change), then ``sr_subjects`` rows one at a time in
code-point order: the subject written to FOR UPDATE (inserted first if absent, so that two agents
registering a subject's first schema queue on one row), the subjects its references name FOR KEY SHARE (so
that the versions referenced cannot be deleted before this commit). Every other registry row is written
only under its subject's row: ``sr_versions``, ``sr_config``, ``sr_mode``. An ``sr_schemas`` row is
inserted with ON CONFLICT DO NOTHING, so two subjects registering one schema at once both end up with the
row the first committed (at READ COMMITTED the loser's next statement sees it). An IMPORT whose id is new
but whose schema has a row already adds a ``duplicate`` row: the schema then has both ids, as in
Confluent; a registration without an id keeps finding the schema's first row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from storage.errors import StrataError
from storage.metadata.schema_store import (
    DeleteOutcome,
    Deletion,
    ImportTarget,
    NewSchema,
    RegisterOutcome,
    Registration,
    RegistrationState,
    SchemaRef,
    VersionRow,
)
from storage.metadata.sql.core import Tx
from storage.metadata.sql.schema_config import SchemaConfigQueries, config_row, mode_value
from storage.metadata.sql.schema_reads import SchemaReads, live_versions, refs_to_json

# Ids drawn from the sequence that an IMPORT took first are skipped; this many in a row means a bug.
_ID_DRAWS = 8


class SchemaQueries(SchemaConfigQueries, SchemaReads):
    def register_schema(
        self,
        subject: str,
        schema: NewSchema,
        check: Callable[[RegistrationState], None],
        import_as: ImportTarget | None = None,
    ) -> Registration:
        now_ms = self._clock.now_ms()

        def work(tx: Tx) -> Registration:
            global_mode = self._hold_subjects(tx, subject, {r.subject for r in schema.references}, now_ms)
            for ref in schema.references:
                if (
                    tx.one(
                        "SELECT 1 FROM sr_versions WHERE subject = ? AND version = ?",
                        (ref.subject, ref.version),
                    )
                    is None
                ):
                    return Registration(RegisterOutcome.REFERENCE_MISSING, reference=ref)
            live = live_versions(tx, subject)
            existing = _existing(live, schema, import_as)
            check(
                RegistrationState(
                    subject=subject,
                    live=live,
                    existing=existing,
                    subject_mode=mode_value(tx, subject),
                    global_mode=global_mode,
                    subject_config=config_row(tx, subject),
                    global_config=config_row(tx, None),
                )
            )
            if existing is not None:
                return Registration(RegisterOutcome.EXISTING, existing.schema_id, existing.version)
            if import_as is None:
                schema_id = self._schema_id(tx, schema, now_ms)
                version = self._next_version(tx, subject)
            else:
                refused, schema_id, version = self._imported_ids(tx, subject, schema, import_as, now_ms)
                if refused is not None:
                    return refused
            tx.execute(
                "INSERT INTO sr_versions (subject, version, schema_id, deleted, created_ms)"
                " VALUES (?, ?, ?, ?, ?)",
                (subject, version, schema_id, False, now_ms),
            )
            tx.execute(
                "UPDATE sr_subjects SET next_version = ? WHERE subject = ? AND next_version <= ?",
                (version + 1, subject, version),
            )
            return Registration(RegisterOutcome.REGISTERED, schema_id, version)

        return self._backend.run(work, write=True, what="register_schema")

    def _hold_subjects(self, tx: Tx, subject: str, referenced: set[str], now_ms: int) -> str | None:
        """Take the registration's locks (see the module docstring); returns the global mode."""
        row = tx.one(f"SELECT mode FROM sr_mode WHERE subject = ''{self._d.for_key_share}")
        for name in sorted(referenced | {subject}):
            if name == subject:
                self.hold_subject(tx, subject, now_ms)
            else:
                tx.all(f"SELECT 1 FROM sr_subjects WHERE subject = ?{self._d.for_key_share}", (name,))
        return None if row is None or row[0] is None else str(row[0])

    def _next_version(self, tx: Tx, subject: str) -> int:
        row = tx.one("SELECT next_version FROM sr_subjects WHERE subject = ?", (subject,))
        if row is None:
            raise StrataError(f"subject {subject!r} has no sr_subjects row under its own lock")
        return int(row[0])

    def _schema_id(self, tx: Tx, schema: NewSchema, now_ms: int) -> int:
        """The id of the schema with this fingerprint, inserting its row (and references) if there is none."""
        for _ in range(_ID_DRAWS):
            found = tx.one(
                "SELECT schema_id FROM sr_schemas WHERE fingerprint = ? AND NOT duplicate",
                (schema.fingerprint,),
            )
            if found is not None:
                return int(found[0])
            # Nothing inserted: either another registration inserted the same schema (found above on the next
            # turn) or the id drawn was taken by an IMPORT (the next turn draws another).
            inserted = tx.one(
                "INSERT INTO sr_schemas"
                " (schema_type, schema_text, canonical, fingerprint, guid, refs, created_ms)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING schema_id",
                _schema_values(schema, now_ms),
            )
            if inserted is not None:
                schema_id = int(inserted[0])
                _insert_references(tx, schema_id, schema.references)
                return schema_id
        raise StrataError(
            f"no schema id could be drawn for fingerprint {schema.fingerprint!r} in {_ID_DRAWS} tries:"
            " is its guid taken by another schema?"
        )

    def _imported_ids(
        self, tx: Tx, subject: str, schema: NewSchema, target: ImportTarget, now_ms: int
    ) -> tuple[Registration | None, int, int]:
        """IMPORT mode: (a refusal, or None; the schema id; the version), checked before anything is
        written, so that a refusal leaves nothing behind."""
        version = self._next_version(tx, subject) if target.version is None else target.version
        taken = tx.one(
            "SELECT schema_id FROM sr_versions WHERE subject = ? AND version = ?", (subject, version)
        )
        if taken is not None:
            if int(taken[0]) != target.schema_id:
                return Registration(RegisterOutcome.VERSION_CONFLICT, int(taken[0]), version), 0, 0
            held = tx.one("SELECT fingerprint FROM sr_schemas WHERE schema_id = ?", (target.schema_id,))
            if held is None or str(held[0]) != schema.fingerprint:
                # The version holds the id, and the id another schema: the import's schema is not it.
                return Registration(RegisterOutcome.ID_CONFLICT), 0, 0
            return Registration(RegisterOutcome.EXISTING, target.schema_id, version), 0, 0
        by_id = tx.one("SELECT fingerprint FROM sr_schemas WHERE schema_id = ?", (target.schema_id,))
        if by_id is not None:
            if str(by_id[0]) != schema.fingerprint:
                return Registration(RegisterOutcome.ID_CONFLICT), 0, 0
            return None, target.schema_id, version
        # The schema may have an id already: this one is then a second id of it (Confluent's IMPORT).
        known = tx.one("SELECT 1 FROM sr_schemas WHERE fingerprint = ? LIMIT 1", (schema.fingerprint,))
        inserted = tx.one(
            "INSERT INTO sr_schemas"
            " (schema_id, schema_type, schema_text, canonical, fingerprint, guid, refs, created_ms,"
            " duplicate) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING schema_id",
            (target.schema_id, *_schema_values(schema, now_ms), known is not None),
        )
        if inserted is None:  # a concurrent import took the id first, or gave the schema its first row
            return Registration(RegisterOutcome.ID_CONFLICT), 0, 0
        _insert_references(tx, target.schema_id, schema.references)
        if self._d.name == "postgres":
            # SQLite's AUTOINCREMENT counter follows an explicit rowid by itself; a PostgreSQL identity
            # sequence does not. setval is not transactional: a rollback leaves the sequence moved, which
            # only skips ids. It never moves back (GREATEST with the last value handed out).
            tx.all(
                "SELECT setval(q.seq, GREATEST(COALESCE(pg_sequence_last_value(q.seq), 0), ?))"
                " FROM (SELECT pg_get_serial_sequence('sr_schemas', 'schema_id')::regclass AS seq) AS q",
                (target.schema_id,),
            )
        return None, target.schema_id, version

    # --- deletes -------------------------------------------------------------------------------------------
    def delete_subject(self, subject: str, permanent: bool) -> Deletion:
        def work(tx: Tx) -> Deletion:
            rows = self._held_versions(tx, subject)
            if not rows:
                return Deletion(DeleteOutcome.SUBJECT_NOT_FOUND)
            live = tuple(v for v, deleted in rows if not deleted)
            if not permanent and not live:
                return Deletion(DeleteOutcome.SOFT_DELETED)
            if permanent and live:
                return Deletion(DeleteOutcome.NOT_SOFT_DELETED, version=live[0])
            targets = live if not permanent else tuple(v for v, _ in rows)
            # A schema of this subject referencing another of its versions goes with it (as Confluent).
            referenced = _referenced(tx, subject, targets, other_subjects_only=True)
            if referenced is not None:
                return Deletion(DeleteOutcome.REFERENCED, version=referenced)
            if permanent:
                self._drop_versions(tx, subject, targets)
            else:
                tx.execute(
                    "UPDATE sr_versions SET deleted = ? WHERE subject = ? AND NOT deleted", (True, subject)
                )
            return Deletion(DeleteOutcome.DELETED, targets)

        return self._backend.run(work, write=True, what="delete_subject")

    def delete_subject_version(self, subject: str, version: int | None, permanent: bool) -> Deletion:
        def work(tx: Tx) -> Deletion:
            rows = dict(self._held_versions(tx, subject))
            if not rows:
                return Deletion(DeleteOutcome.SUBJECT_NOT_FOUND)
            target = version
            if target is None:
                # "latest": of the live versions for a soft delete (none: the subject is not found, as
                # reading "latest" says), of every version for a permanent one.
                candidates = [v for v, deleted in rows.items() if permanent or not deleted]
                if not candidates:
                    return Deletion(DeleteOutcome.SUBJECT_NOT_FOUND)
                target = max(candidates)
            if target not in rows:
                return Deletion(DeleteOutcome.VERSION_NOT_FOUND, version=target)
            if not permanent and rows[target]:
                return Deletion(DeleteOutcome.SOFT_DELETED, version=target)
            if permanent and not rows[target]:
                return Deletion(DeleteOutcome.NOT_SOFT_DELETED, version=target)
            if _referenced(tx, subject, (target,), other_subjects_only=False) is not None:
                return Deletion(DeleteOutcome.REFERENCED, version=target)
            if permanent:
                self._drop_versions(tx, subject, (target,))
            else:
                tx.execute(
                    "UPDATE sr_versions SET deleted = ? WHERE subject = ? AND version = ?",
                    (True, subject, target),
                )
            return Deletion(DeleteOutcome.DELETED, (target,))

        return self._backend.run(work, write=True, what="delete_subject_version")

    def _held_versions(self, tx: Tx, subject: str) -> list[tuple[int, bool]]:
        """Lock the subject's row (if it has one) and read its (version, deleted) pairs, ascending."""
        if tx.one(f"SELECT 1 FROM sr_subjects WHERE subject = ?{self._d.for_update}", (subject,)) is None:
            return []
        rows = tx.all(
            "SELECT version, deleted FROM sr_versions WHERE subject = ? ORDER BY version", (subject,)
        )
        return [(int(r[0]), bool(r[1])) for r in rows]

    def _drop_versions(self, tx: Tx, subject: str, versions: Sequence[int]) -> None:
        """Permanently delete version rows; once none is left, the subject's numbering starts again at 1 and
        its config and mode go, as Confluent forgets a permanently deleted subject."""
        tx.executemany(
            "DELETE FROM sr_versions WHERE subject = ? AND version = ?", [(subject, v) for v in versions]
        )
        if tx.one("SELECT 1 FROM sr_versions WHERE subject = ? LIMIT 1", (subject,)) is None:
            tx.execute("UPDATE sr_subjects SET next_version = 1 WHERE subject = ?", (subject,))
            tx.execute("DELETE FROM sr_config WHERE subject = ?", (subject,))
            tx.execute("DELETE FROM sr_mode WHERE subject = ?", (subject,))


def _existing(
    live: Sequence[VersionRow], schema: NewSchema, import_as: ImportTarget | None
) -> VersionRow | None:
    """The live version that already holds the schema (the latest such), as the registration asks for it."""
    for row in reversed(live):
        if row.schema.fingerprint != schema.fingerprint:
            continue
        if import_as is None or (
            row.schema_id == import_as.schema_id and import_as.version in (None, row.version)
        ):
            return row
    return None


def _schema_values(schema: NewSchema, now_ms: int) -> tuple[str, str, str, str, str, str, int]:
    return (
        schema.schema_type,
        schema.text,
        schema.canonical,
        schema.fingerprint,
        schema.guid,
        refs_to_json(schema.references),
        now_ms,
    )


def _insert_references(tx: Tx, schema_id: int, refs: Sequence[SchemaRef]) -> None:
    tx.executemany(
        "INSERT INTO sr_references (schema_id, name, ref_subject, ref_version) VALUES (?, ?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        [(schema_id, r.name, r.subject, r.version) for r in refs],
    )


def _referenced(tx: Tx, subject: str, versions: Sequence[int], *, other_subjects_only: bool) -> int | None:
    """The lowest of ``versions`` that a schema with a version row (soft-deleted ones too, as Karapace
    refuses) references; with ``other_subjects_only``, a version row of another subject."""
    other = " AND v.subject <> ?" if other_subjects_only else ""
    for version in versions:
        row = tx.one(
            "SELECT 1 FROM sr_references r JOIN sr_versions v ON v.schema_id = r.schema_id"
            f" WHERE r.ref_subject = ? AND r.ref_version = ?{other} LIMIT 1",
            (subject, version, subject) if other_subjects_only else (subject, version),
        )
        if row is not None:
            return version
    return None
