"""A schema under several ids (storage/metadata/schema_registry_ids.py, migration 12), on SQLite and
PostgreSQL: IMPORT gives a schema that has an id a second one, as Confluent's registry does; a registration
without an id keeps the first; and the migration keeps a version 11 database's rows, references and id
sequence."""

from __future__ import annotations

import pytest

from storage.metadata import MetadataStore, open_metadata_store, schema, sqlite_path
from storage.metadata.postgres import PostgresBackend
from storage.metadata.schema_store import (
    DeleteOutcome,
    ImportTarget,
    RegisterOutcome,
    Registration,
    SchemaRef,
)
from storage.metadata.sql import SqlMetadataStore, Tx
from storage.metadata.sqlite import SqliteBackend
from tests.integration.test_metadata_schemas import NOW, new_schema, register

pytestmark = pytest.mark.integration


def test_import_gives_a_registered_schema_another_id(metadata_store: MetadataStore) -> None:
    store = metadata_store
    first = register(store, "a", "s1", import_as=ImportTarget(100))
    assert first == Registration(RegisterOutcome.REGISTERED, 100, 1)
    # Another subject, another id: the schema has both (Confluent's testImportModeWithSameSchemaDifferentId
    # and ...DifferentIdAndSubject).
    assert register(store, "b", "s1", import_as=ImportTarget(7)) == Registration(
        RegisterOutcome.REGISTERED, 7, 1
    )
    # The same subject again, a third id: a new version.
    assert register(store, "a", "s1", import_as=ImportTarget(200)) == Registration(
        RegisterOutcome.REGISTERED, 200, 2
    )
    assert register(store, "b", "s1", import_as=ImportTarget(7)).outcome is RegisterOutcome.EXISTING
    by_id = {i: store.schema_by_id(i) for i in (7, 100, 200)}
    assert {s.fingerprint for s in by_id.values() if s is not None} == {new_schema("s1").fingerprint}
    assert None not in by_id.values()
    # Each subject finds the schema at its own id; the guid and an id-less registration, at the first.
    fingerprint = new_schema("s1").fingerprint
    found = store.find_subject_version("b", fingerprint)
    assert found is not None
    assert (found.schema_id, found.version) == (7, 1)
    latest = store.find_subject_version("a", fingerprint)
    assert latest is not None
    assert (latest.schema_id, latest.version) == (200, 2)
    guid = store.schema_by_guid(new_schema("s1").guid)
    assert guid is not None
    assert guid.schema_id == 100
    assert register(store, "c", "s1") == Registration(RegisterOutcome.REGISTERED, 100, 1)
    # An id holding another schema is still refused.
    assert register(store, "d", "s2", import_as=ImportTarget(7)) == Registration(RegisterOutcome.ID_CONFLICT)
    # Drawn ids stay past every imported one.
    fresh = register(store, "e", "s3")
    assert fresh.schema_id is not None
    assert fresh.schema_id > 200


def test_migration_12_applies_to_a_version_11_database(metadata_url: str) -> None:
    backend = (
        SqliteBackend(sqlite_path(metadata_url))
        if metadata_url.startswith("sqlite:")
        else PostgresBackend(metadata_url)
    )
    dialect = backend.dialect.name
    s1, referrer = new_schema("s1"), new_schema("s2", (SchemaRef("r", "a", 1),))

    def version_11(tx: Tx) -> list[int]:
        """A version 11 database as version 11's code left it: two schemas, one referencing a version of
        the other, and an id drawn past the highest row (a row since gone)."""
        applied = schema.migrate_to(tx, dialect, NOW, 11)
        insert = (
            "INSERT INTO sr_schemas (schema_id, schema_type, schema_text, canonical, fingerprint, guid, refs,"
            " created_ms) VALUES (?, 'AVRO', ?, ?, ?, ?, ?, ?)"
        )
        for schema_id, new, refs in (
            (50, s1, "[]"),
            (60, referrer, '[{"name": "r", "subject": "a", "version": 1}]'),
        ):
            tx.execute(insert, (schema_id, new.text, new.canonical, new.fingerprint, new.guid, refs, NOW))
        for subject, schema_id in (("a", 50), ("b", 60)):
            tx.execute(
                "INSERT INTO sr_subjects (subject, next_version, created_ms) VALUES (?, 2, ?)", (subject, NOW)
            )
            tx.execute(
                "INSERT INTO sr_versions (subject, version, schema_id, deleted, created_ms)"
                " VALUES (?, 1, ?, ?, ?)",
                (subject, schema_id, False, NOW),
            )
        tx.execute(
            "INSERT INTO sr_references (schema_id, name, ref_subject, ref_version) VALUES (60, 'r', 'a', 1)"
        )
        if dialect == "sqlite":
            tx.execute(insert, (80, "gone", "GONE", "fp-gone", "guid-gone", "[]", NOW))
            tx.execute("DELETE FROM sr_schemas WHERE schema_id = 80")
        else:
            tx.all("SELECT setval(pg_get_serial_sequence('sr_schemas', 'schema_id'), 80)")
        return applied

    try:
        assert backend.run(version_11, write=True, what="test setup") == list(range(1, 12))
    finally:
        backend.close()
    store = open_metadata_store(metadata_url)
    try:
        assert isinstance(store, SqlMetadataStore)
        assert store.applied_migrations == tuple(range(12, schema.latest_version(dialect) + 1))
        kept = store.schema_by_id(60)
        assert kept is not None
        assert (kept.fingerprint, kept.references) == (referrer.fingerprint, (SchemaRef("r", "a", 1),))
        # The reference still holds (a, 1); the schema keeps its id; drawn ids go on past the sequence.
        assert store.delete_subject_version("a", 1, permanent=False).outcome is DeleteOutcome.REFERENCED
        assert register(store, "c", "s1") == Registration(RegisterOutcome.REGISTERED, 50, 1)
        assert register(store, "d", "fresh").schema_id == 81
        assert register(store, "e", "s1", import_as=ImportTarget(90)) == Registration(
            RegisterOutcome.REGISTERED, 90, 1
        )
    finally:
        store.close()
    if dialect == "sqlite":
        check = SqliteBackend(sqlite_path(metadata_url))
        try:
            assert check.run(lambda tx: tx.all("PRAGMA foreign_key_check"), write=False, what="test") == []
        finally:
            check.close()
