"""Migration 11: the schema registry's tables, so that every agent serves the registry from the metadata
store (no leader, no ``_schemas`` topic) and registrations serialise in the database.

- ``sr_schemas``: one row per distinct schema. ``schema_id`` is the global id clients put in front of their
  records: database-assigned and never handed out twice (AUTOINCREMENT, an identity column), and settable
  in IMPORT mode (hence BY DEFAULT on PostgreSQL; the importer moves the sequence past it). ``fingerprint``
  (a hash of type, canonical form and references, computed by the registry) is UNIQUE, so one schema has
  one id whatever subjects register it; ``guid`` names the schema too (the header wire format). The row
  outlives its versions: a schema registered again after a permanent delete gets its old id back, while
  an id resolves only while some version row uses it. ``refs`` keeps the references as registered (JSON
  ``[{name, subject, version}]``, in order); ``sr_references`` indexes them.
- ``sr_subjects``: one row per subject ever registered to. The row is the lock every registration, delete
  and mode change of the subject takes; ``next_version`` is the number the next registration gets, so a
  version number is never handed out twice while the subject has any version row left (soft deletes
  included). Whether a subject is soft-deleted (versions, none live) is read from ``sr_versions`` rather
  than kept in a flag that every delete would have to keep right.
- ``sr_versions``: (subject, version) -> schema id, soft-deleted or not. A permanent delete removes the row.
- ``sr_references``: which schema references which (subject, version): ``referencedby``, and the refusal
  to delete a version that a schema with a version row left still references.
- ``sr_config`` and ``sr_mode``: per subject, and global under the subject ``''`` (no subject may have
  that name). A NULL value is "not set". The global mode row always exists: a global mode change locks
  it, and every registration reads it under a share lock, so switching the whole registry to IMPORT
  (only while no subject has a live version) cannot race a registration.
"""

from __future__ import annotations

from typing import Protocol

from storage.metadata import schema_transactions


class Types(schema_transactions.Types, Protocol):
    """The dialect's column types (schema._Types): migration 9's, and two more."""

    @property
    def settable_id_pk(self) -> str: ...
    @property
    def false(self) -> str: ...


def v11(t: Types) -> tuple[str, ...]:
    return (
        # Ids are 4-byte signed integers on the wire (magic byte 0, then the id big-endian).
        f"""CREATE TABLE sr_schemas (
            schema_id {t.settable_id_pk} CHECK (schema_id BETWEEN 1 AND 2147483647),
            schema_type TEXT NOT NULL CHECK (schema_type IN ('AVRO', 'JSON', 'PROTOBUF')),
            schema_text TEXT NOT NULL,
            canonical TEXT NOT NULL,
            fingerprint TEXT NOT NULL UNIQUE,
            guid TEXT NOT NULL UNIQUE,
            refs TEXT NOT NULL,
            created_ms {t.big} NOT NULL
        ){t.table_options}""",
        f"""CREATE TABLE sr_subjects (
            subject TEXT PRIMARY KEY,
            next_version {t.small} NOT NULL CHECK (next_version >= 1),
            created_ms {t.big} NOT NULL
        ){t.table_options}""",
        f"""CREATE TABLE sr_versions (
            subject TEXT NOT NULL REFERENCES sr_subjects (subject),
            version {t.small} NOT NULL CHECK (version >= 1),
            schema_id {t.big} NOT NULL REFERENCES sr_schemas (schema_id),
            deleted {t.boolean} NOT NULL DEFAULT {t.false},
            created_ms {t.big} NOT NULL,
            PRIMARY KEY (subject, version)
        ){t.table_options}""",
        # Which subjects and versions use an id; whether an id resolves at all.
        "CREATE INDEX sr_versions_by_schema ON sr_versions (schema_id)",
        f"""CREATE TABLE sr_references (
            schema_id {t.big} NOT NULL REFERENCES sr_schemas (schema_id),
            name TEXT NOT NULL,
            ref_subject TEXT NOT NULL,
            ref_version {t.small} NOT NULL,
            PRIMARY KEY (schema_id, name)
        ){t.table_options}""",
        "CREATE INDEX sr_references_by_target ON sr_references (ref_subject, ref_version)",
        f"""CREATE TABLE sr_config (
            subject TEXT PRIMARY KEY,
            compatibility TEXT,
            normalize {t.boolean},
            updated_ms {t.big} NOT NULL
        ){t.table_options}""",
        f"""CREATE TABLE sr_mode (
            subject TEXT PRIMARY KEY,
            mode TEXT,
            updated_ms {t.big} NOT NULL
        ){t.table_options}""",
        "INSERT INTO sr_mode (subject, mode, updated_ms) VALUES ('', NULL, 0)",
    )
