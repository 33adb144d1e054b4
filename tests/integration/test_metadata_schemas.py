"""The schema registry's tables in the metadata store, on SQLite and PostgreSQL: one id per schema across
subjects and agents, version numbers never handed out twice, soft and permanent deletes, references that
block deletes, IMPORT mode's given ids, config and mode rows, and the reads the registry's API serves.

The store keeps opaque text: these tests give it made-up schemas (the registry's formats derive the real
canonical forms and fingerprints; tests/unit/test_registry_service.py runs them through it).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from storage.metadata import MetadataStore, open_metadata_store, schema, sqlite_path
from storage.metadata.postgres import PostgresBackend
from storage.metadata.schema_store import (
    ConfigRow,
    DeleteOutcome,
    Deletion,
    ImportTarget,
    NewSchema,
    RegisterOutcome,
    Registration,
    RegistrationState,
    SchemaRef,
)
from storage.metadata.sql import SqlMetadataStore, Tx
from storage.metadata.sqlite import SqliteBackend

pytestmark = pytest.mark.integration

NOW = 1_700_000_000_000


def new_schema(text: str, refs: tuple[SchemaRef, ...] = ()) -> NewSchema:
    fingerprint = hashlib.sha256(repr(("AVRO", text, refs)).encode()).hexdigest()
    return NewSchema("AVRO", text, text.upper(), fingerprint, "guid-" + fingerprint[:32], refs)


def accept(_: RegistrationState) -> None:
    pass


def register(
    store: MetadataStore,
    subject: str,
    text: str,
    refs: tuple[SchemaRef, ...] = (),
    check: Callable[[RegistrationState], None] = accept,
    import_as: ImportTarget | None = None,
) -> Registration:
    return store.register_schema(subject, new_schema(text, refs), check, import_as)


class Refused(Exception):
    pass


def test_one_id_per_schema_and_versions_per_subject(metadata_store: MetadataStore) -> None:
    store = metadata_store
    first = register(store, "a", "s1")
    assert (first.outcome, first.version) == (RegisterOutcome.REGISTERED, 1)
    assert first.schema_id is not None
    again = register(store, "a", "s1")
    assert again == Registration(RegisterOutcome.EXISTING, first.schema_id, 1)
    elsewhere = register(store, "b", "s1")
    assert elsewhere == Registration(RegisterOutcome.REGISTERED, first.schema_id, 1)
    second = register(store, "a", "s2")
    assert second.outcome is RegisterOutcome.REGISTERED
    assert second.version == 2
    assert second.schema_id is not None
    assert second.schema_id > first.schema_id
    assert store.list_subject_versions("a") == [1, 2]
    assert store.schema_usages(first.schema_id) == [("a", 1), ("b", 1)]
    stored = store.schema_by_id(first.schema_id)
    assert stored is not None
    assert (stored.schema_type, stored.text, stored.canonical) == ("AVRO", "s1", "S1")
    assert store.schema_by_guid(stored.guid) == stored
    assert store.max_schema_id() == second.schema_id
    assert store.schema_by_id(second.schema_id + 1) is None


def test_check_sees_the_state_and_refuses_by_raising(metadata_store: MetadataStore) -> None:
    store = metadata_store
    store.set_subject_config(None, "FULL", None)
    store.set_subject_config("a", None, True)
    store.set_subject_mode("a", "READWRITE")
    register(store, "a", "s1")
    register(store, "a", "s2")
    assert store.delete_subject_version("a", 1, permanent=False).outcome is DeleteOutcome.DELETED
    seen: list[RegistrationState] = []

    def refuse(state: RegistrationState) -> None:
        seen.append(state)
        raise Refused

    with pytest.raises(Refused):
        register(store, "a", "s3", check=refuse)
    (state,) = seen
    assert [v.version for v in state.live] == [2]
    assert state.live[0].schema.text == "s2"
    assert state.existing is None
    assert (state.subject_mode, state.global_mode) == ("READWRITE", None)
    assert state.subject_config == ConfigRow(None, True)
    assert state.global_config == ConfigRow("FULL", None)
    assert store.list_subject_versions("a", include_deleted=True) == [1, 2]  # nothing written
    assert store.list_subjects(include_deleted=True) == ["a"]
    # A read-only mode refuses a schema that is registered already, too: check runs with ``existing``.
    with pytest.raises(Refused):
        register(store, "a", "s2", check=refuse)
    assert seen[-1].existing is not None
    assert seen[-1].existing.version == 2


def test_version_numbers_survive_soft_deletes_and_restart_after_permanent_ones(
    metadata_store: MetadataStore,
) -> None:
    store = metadata_store
    s1 = register(store, "a", "s1").schema_id
    register(store, "a", "s2")
    assert store.delete_subject("a", permanent=False) == Deletion(DeleteOutcome.DELETED, (1, 2))
    assert store.list_subjects() == []
    assert store.list_subjects(include_deleted=True) == ["a"]
    assert store.list_subject_versions("a") == []
    assert store.subject_version("a", None) is None
    assert store.subject_version("a", None, include_deleted=True) is not None
    # Soft-deleted: the schema registers again as a new version, with its old id.
    assert register(store, "a", "s1") == Registration(RegisterOutcome.REGISTERED, s1, 3)
    assert store.delete_subject("a", permanent=True) == Deletion(DeleteOutcome.NOT_SOFT_DELETED, version=3)
    assert store.delete_subject_version("a", None, permanent=False) == Deletion(DeleteOutcome.DELETED, (3,))
    assert store.delete_subject("a", permanent=False) == Deletion(DeleteOutcome.SOFT_DELETED)
    store.set_subject_config("a", "NONE", None)
    store.set_subject_mode("a", "READONLY")
    assert store.delete_subject("a", permanent=True) == Deletion(DeleteOutcome.DELETED, (1, 2, 3))
    assert store.delete_subject("a", permanent=True) == Deletion(DeleteOutcome.SUBJECT_NOT_FOUND)
    assert s1 is not None
    assert store.schema_by_id(s1) is None
    assert store.subject_config("a") is None
    assert store.subject_mode("a") is None
    # Gone for good: numbering starts again, and the schema gets its id back.
    assert register(store, "a", "s1") == Registration(RegisterOutcome.REGISTERED, s1, 1)


def test_version_deletes(metadata_store: MetadataStore) -> None:
    store = metadata_store
    s1 = register(store, "a", "s1").schema_id
    register(store, "a", "s2")
    register(store, "b", "s1")
    assert store.delete_subject_version("a", 1, permanent=True) == Deletion(
        DeleteOutcome.NOT_SOFT_DELETED, version=1
    )
    assert store.delete_subject_version("a", None, permanent=False) == Deletion(DeleteOutcome.DELETED, (2,))
    assert store.delete_subject_version("a", 2, permanent=False) == Deletion(
        DeleteOutcome.SOFT_DELETED, version=2
    )
    assert store.delete_subject_version("a", 9, permanent=False) == Deletion(
        DeleteOutcome.VERSION_NOT_FOUND, version=9
    )
    assert store.delete_subject_version("nope", 1, permanent=False).outcome is DeleteOutcome.SUBJECT_NOT_FOUND
    assert store.delete_subject_version("a", 1, permanent=False) == Deletion(DeleteOutcome.DELETED, (1,))
    # Every version soft-deleted: "latest" names no version for a soft delete.
    assert store.delete_subject_version("a", None, permanent=False).outcome is DeleteOutcome.SUBJECT_NOT_FOUND
    assert s1 is not None
    assert store.schema_by_id(s1) is not None
    assert store.schema_usages(s1) == [("b", 1)]
    assert store.schema_usages(s1, include_deleted=True) == [("a", 1), ("b", 1)]
    assert store.delete_subject_version("a", None, permanent=True) == Deletion(DeleteOutcome.DELETED, (2,))
    assert store.delete_subject_version("a", 1, permanent=True) == Deletion(DeleteOutcome.DELETED, (1,))
    assert store.schema_by_id(s1) is not None  # subject b still uses it
    assert register(store, "a", "s3").version == 1  # the last row went: numbering starts again


def test_references_block_deletes_while_their_referrer_has_a_version(metadata_store: MetadataStore) -> None:
    store = metadata_store
    base = register(store, "base", "b1")
    ref = SchemaRef("b.avsc", "base", 1)
    user = register(store, "user", "u1", (ref,))
    assert user.outcome is RegisterOutcome.REGISTERED
    assert user.schema_id is not None
    stored = store.schema_by_id(user.schema_id)
    assert stored is not None
    assert stored.references == (ref,)
    assert store.referenced_by("base", 1) == [user.schema_id]
    assert store.delete_subject_version("base", 1, permanent=False) == Deletion(
        DeleteOutcome.REFERENCED, version=1
    )
    assert store.delete_subject("base", permanent=False) == Deletion(DeleteOutcome.REFERENCED, version=1)
    # A soft-deleted referrer still blocks (Karapace's tests pin this); a permanently deleted one no more.
    assert store.delete_subject_version("user", 1, permanent=False).outcome is DeleteOutcome.DELETED
    assert store.delete_subject_version("base", 1, permanent=False).outcome is DeleteOutcome.REFERENCED
    assert store.referenced_by("base", 1) == [user.schema_id]
    assert store.delete_subject_version("user", 1, permanent=True).outcome is DeleteOutcome.DELETED
    assert store.referenced_by("base", 1) == []
    assert store.delete_subject_version("base", 1, permanent=False).outcome is DeleteOutcome.DELETED
    assert base.schema_id is not None
    # A reference to a version that has no row (any more) is refused, writing nothing.
    assert store.delete_subject_version("base", 1, permanent=True).outcome is DeleteOutcome.DELETED
    missing = register(store, "user", "u2", (ref,))
    assert missing == Registration(RegisterOutcome.REFERENCE_MISSING, reference=ref)
    assert store.list_subject_versions("user", include_deleted=True) == []


def test_references_within_a_subject_go_with_it(metadata_store: MetadataStore) -> None:
    store = metadata_store
    register(store, "a", "s1")
    register(store, "a", "s2", (SchemaRef("s1", "a", 1),))
    assert store.delete_subject_version("a", 1, permanent=False).outcome is DeleteOutcome.REFERENCED
    assert store.delete_subject("a", permanent=False) == Deletion(DeleteOutcome.DELETED, (1, 2))
    assert store.delete_subject("a", permanent=True) == Deletion(DeleteOutcome.DELETED, (1, 2))


def test_import_keeps_given_ids_and_moves_the_sequence(metadata_store: MetadataStore) -> None:
    store = metadata_store
    imported = register(store, "a", "s1", import_as=ImportTarget(100, 5))
    assert imported == Registration(RegisterOutcome.REGISTERED, 100, 5)
    assert register(store, "a", "s1", import_as=ImportTarget(100, 5)).outcome is RegisterOutcome.EXISTING
    assert register(store, "a", "s1", import_as=ImportTarget(100)).outcome is RegisterOutcome.EXISTING
    # The same schema as another version of the subject: allowed when the version is given.
    assert register(store, "a", "s1", import_as=ImportTarget(100, 2)) == Registration(
        RegisterOutcome.REGISTERED, 100, 2
    )
    assert register(store, "a", "s2", import_as=ImportTarget(100)) == Registration(
        RegisterOutcome.ID_CONFLICT
    )
    assert register(store, "a", "s3", import_as=ImportTarget(101, 5)) == Registration(
        RegisterOutcome.VERSION_CONFLICT, 100, 5
    )
    assert store.schema_by_id(101) is None
    assert store.list_subject_versions("a") == [2, 5]
    # The next version follows the highest imported one, and the next drawn id the highest imported id.
    after = register(store, "a", "s4")
    assert after.version == 6
    assert after.schema_id is not None
    assert after.schema_id > 100
    assert register(store, "a", "s5", import_as=ImportTarget(50)) == Registration(
        RegisterOutcome.REGISTERED, 50, 7
    )
    assert register(store, "a", "s6").schema_id == after.schema_id + 1


def test_config_rows(metadata_store: MetadataStore) -> None:
    store = metadata_store
    assert store.subject_config(None) is None
    assert store.subject_config("a") is None
    assert store.set_subject_config(None, "FULL", None) == ConfigRow("FULL", None)
    assert store.set_subject_config(None, None, True) == ConfigRow("FULL", True)  # None keeps what is set
    assert store.set_subject_config("a", "NONE", False) == ConfigRow("NONE", False)
    assert store.subject_config("a") == ConfigRow("NONE", False)
    assert store.subject_config(None) == ConfigRow("FULL", True)
    assert store.delete_subject_config("a") == ConfigRow("NONE", False)
    assert store.delete_subject_config("a") is None
    assert store.delete_subject_config(None) == ConfigRow("FULL", True)
    assert store.subject_config(None) is None


def test_mode_rows_and_their_check(metadata_store: MetadataStore) -> None:
    store = metadata_store
    seen: list[tuple[str | None, str | None, bool]] = []

    def check_for(scope: str | None) -> Callable[[str | None, bool], None]:
        def check(current: str | None, live: bool) -> None:
            seen.append((scope, current, live))

        return check

    assert store.subject_mode(None) is None
    assert store.subject_mode("a") is None
    store.set_subject_mode("a", "IMPORT", check_for("a"))
    register(store, "b", "s1")
    store.set_subject_mode("a", "READONLY", check_for("a"))
    store.set_subject_mode(None, "READONLY_OVERRIDE", check_for(None))
    assert seen == [("a", None, False), ("a", "IMPORT", False), (None, None, True)]
    assert (store.subject_mode("a"), store.subject_mode(None)) == ("READONLY", "READONLY_OVERRIDE")

    def refuse(current: str | None, live: bool) -> None:
        raise Refused

    with pytest.raises(Refused):
        store.set_subject_mode("b", "IMPORT", refuse)
    assert store.subject_mode("b") is None
    assert store.delete_subject_mode("a") == "READONLY"
    assert store.delete_subject_mode("a") is None
    assert store.delete_subject_mode(None) == "READONLY_OVERRIDE"
    assert store.subject_mode(None) is None
    store.set_subject_mode(None, "READWRITE")
    assert store.subject_mode(None) == "READWRITE"


def test_listings(metadata_store: MetadataStore) -> None:
    store = metadata_store
    for subject, texts in (("orders-value", ["o1", "o2"]), ("orders-key", ["k1"]), ("users", ["u1", "u2"])):
        for text in texts:
            register(store, subject, text)
    register(store, "ordersx", "o1")
    store.delete_subject("orders-key", permanent=False)
    store.delete_subject_version("users", 2, permanent=False)
    assert store.list_subjects() == ["orders-value", "ordersx", "users"]
    assert store.list_subjects("orders") == ["orders-value", "ordersx"]
    assert store.list_subjects("orders", include_deleted=True) == ["orders-key", "orders-value", "ordersx"]
    assert store.list_subjects(deleted_only=True) == ["orders-key"]
    assert store.list_subjects("ORDERS") == []  # prefixes are case-sensitive on both dialects
    assert store.list_subject_versions("users", deleted_only=True) == [2]
    assert [(v.version, v.deleted) for v in store.subject_version_rows("users")] == [(1, False)]
    rows = store.subject_version_rows("users", include_deleted=True)
    assert [(v.version, v.deleted, v.schema.text) for v in rows] == [(1, False, "u1"), (2, True, "u2")]
    assert store.subject_version("users", None) is not None
    latest = store.subject_version("users", None)
    assert latest is not None
    assert latest.version == 1
    deleted = store.subject_version("users", 2, include_deleted=True)
    assert deleted is not None
    assert deleted.deleted
    assert deleted.schema.text == "u2"
    assert store.subject_version("users", 2) is None
    found = store.find_subject_version("orders-value", new_schema("o1").fingerprint)
    assert found is not None
    assert found.version == 1
    assert store.find_subject_version("orders-key", new_schema("k1").fingerprint) is None
    assert (
        store.find_subject_version("orders-key", new_schema("k1").fingerprint, include_deleted=True)
        is not None
    )

    def listed(**kwargs: object) -> list[tuple[str, int]]:
        return [(v.subject, v.version) for v in store.list_schema_versions(**kwargs)]  # type: ignore[arg-type]

    assert listed() == [("orders-value", 1), ("orders-value", 2), ("ordersx", 1), ("users", 1)]
    assert listed(prefix="orders-", include_deleted=True) == [
        ("orders-key", 1),
        ("orders-value", 1),
        ("orders-value", 2),
    ]
    assert listed(latest_only=True) == [("orders-value", 2), ("ordersx", 1), ("users", 1)]
    assert listed(latest_only=True, include_deleted=True) == [
        ("orders-key", 1),
        ("orders-value", 2),
        ("ordersx", 1),
        ("users", 2),
    ]
    assert listed(offset=1, limit=2) == [("orders-value", 2), ("ordersx", 1)]
    assert listed(offset=3) == [("users", 1)]


def test_concurrent_registrations_of_one_schema_get_one_id(metadata_url: str) -> None:
    """Two agents (two stores on one database), four threads each: the same schema under one subject and
    under two others at once, for a few rounds. One id per schema, one version per subject, whoever wins."""
    stores = [open_metadata_store(metadata_url), open_metadata_store(metadata_url)]
    subjects = ["shared", "shared", "shared", "shared", "x", "x", "y", "y"]
    barrier = threading.Barrier(len(subjects))

    def run(i: int, text: str) -> Registration:
        barrier.wait()
        return register(stores[i % 2], subjects[i], text)

    try:
        with ThreadPoolExecutor(len(subjects)) as pool:
            for round_ in range(1, 6):
                text = f"schema {round_}"
                results = list(pool.map(run, range(len(subjects)), [text] * len(subjects)))
                assert len({r.schema_id for r in results}) == 1
                assert {r.version for r in results} == {round_}
                for subject in ("shared", "x", "y"):
                    outcomes = [r.outcome for s, r in zip(subjects, results, strict=True) if s == subject]
                    assert outcomes.count(RegisterOutcome.REGISTERED) == 1
                    assert stores[round_ % 2].list_subject_versions(subject) == list(range(1, round_ + 1))
                schema_id = results[0].schema_id
                assert schema_id is not None
                assert stores[1].schema_usages(schema_id) == [
                    ("shared", round_),
                    ("x", round_),
                    ("y", round_),
                ]
    finally:
        for store in stores:
            store.close()


def test_concurrent_registrations_of_new_schemas_number_versions_densely(metadata_url: str) -> None:
    stores = [open_metadata_store(metadata_url), open_metadata_store(metadata_url)]
    threads = 6
    barrier = threading.Barrier(threads)

    def run(i: int) -> Registration:
        barrier.wait()
        return register(stores[i % 2], "s", f"schema {i}")

    try:
        with ThreadPoolExecutor(threads) as pool:
            results = list(pool.map(run, range(threads)))
        assert sorted(r.version or 0 for r in results) == list(range(1, threads + 1))
        assert len({r.schema_id for r in results}) == threads
    finally:
        for store in stores:
            store.close()


def test_migration_11_applies_to_a_version_10_database(metadata_url: str) -> None:
    backend = (
        SqliteBackend(sqlite_path(metadata_url))
        if metadata_url.startswith("sqlite:")
        else PostgresBackend(metadata_url)
    )
    dialect = backend.dialect.name

    def version_10(tx: Tx) -> list[int]:
        applied = schema.migrate_to(tx, dialect, NOW, 10)
        tx.execute(
            "INSERT INTO topics (name, partitions, configs, created_ms) VALUES ('t', 1, '{}', ?)", (NOW,)
        )
        return applied

    try:
        assert backend.run(version_10, write=True, what="test setup") == list(range(1, 11))
    finally:
        backend.close()
    store = open_metadata_store(metadata_url)
    try:
        assert isinstance(store, SqlMetadataStore)
        assert store.applied_migrations == tuple(range(11, schema.latest_version(dialect) + 1))
        assert store.list_topics() == ["t"]
        assert register(store, "a", "s1").version == 1
        assert store.subject_mode(None) is None
    finally:
        store.close()
    reopened = open_metadata_store(metadata_url)
    try:
        assert isinstance(reopened, SqlMetadataStore)
        assert reopened.applied_migrations == ()
        assert reopened.list_subjects() == ["a"]
    finally:
        reopened.close()
