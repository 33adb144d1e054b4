"""Migration 12: a schema may hold several ids, each given by an IMPORT (the registry's tables are migration
11's, storage/metadata/schema_registry.py).

Confluent's registry, in IMPORT mode, registers a schema under the id the request gives even when the same
schema already has another id (confluentinc/schema-registry 5c27a6c3, "Allow same schema w/diff ids during
IMPORT"): registries merged into one keep every id their records carry. ``sr_schemas`` then holds one row
per id, so ``fingerprint`` and ``guid`` stop being UNIQUE. What stays unique:
- ``duplicate`` marks the rows an IMPORT added for a schema that had a row already; among the other rows a
  fingerprint, and a guid, is still UNIQUE (partial unique indexes). A registration without an id finds
  the schema's first row or inserts one with ON CONFLICT DO NOTHING on those indexes, so two subjects
  registering one new schema at once still get one id, as before;
- ``fingerprint`` and ``guid`` keep plain indexes for the lookups, which now may meet several rows.

SQLite cannot drop a UNIQUE column constraint, so its table is rebuilt: copied aside, dropped, created again
and filled back. ``sr_versions`` and ``sr_references`` reference it; with their foreign keys deferred to
the commit, the rows filled back satisfy them again before it. AUTOINCREMENT's counter goes with the
dropped table, so it is saved first and put back (never lower than the highest id filled back), keeping
ids never handed out twice. PostgreSQL drops the two constraints, named by its default
``<table>_<column>_key``.
"""

from __future__ import annotations

_COLUMNS = "schema_id, schema_type, schema_text, canonical, fingerprint, guid, refs, created_ms"

_INDEXES = (
    "CREATE UNIQUE INDEX sr_schemas_one_per_fingerprint ON sr_schemas (fingerprint) WHERE NOT duplicate",
    "CREATE UNIQUE INDEX sr_schemas_one_per_guid ON sr_schemas (guid) WHERE NOT duplicate",
    "CREATE INDEX sr_schemas_by_fingerprint ON sr_schemas (fingerprint)",
    "CREATE INDEX sr_schemas_by_guid ON sr_schemas (guid)",
)


def v12_sqlite() -> tuple[str, ...]:
    return (
        # Reset at the commit; until then a parent row missing for a moment is no error.
        "PRAGMA defer_foreign_keys = ON",
        f"CREATE TABLE sr_schemas_v11 AS SELECT {_COLUMNS} FROM sr_schemas",
        "CREATE TABLE sr_schemas_v11_sequence AS SELECT seq FROM sqlite_sequence WHERE name = 'sr_schemas'",
        "DROP TABLE sr_schemas",
        """CREATE TABLE sr_schemas (
            schema_id INTEGER PRIMARY KEY AUTOINCREMENT CHECK (schema_id BETWEEN 1 AND 2147483647),
            schema_type TEXT NOT NULL CHECK (schema_type IN ('AVRO', 'JSON', 'PROTOBUF')),
            schema_text TEXT NOT NULL,
            canonical TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            guid TEXT NOT NULL,
            refs TEXT NOT NULL,
            created_ms INTEGER NOT NULL,
            duplicate INTEGER NOT NULL DEFAULT 0
        ) STRICT""",
        f"INSERT INTO sr_schemas ({_COLUMNS}) SELECT {_COLUMNS} FROM sr_schemas_v11 ORDER BY schema_id",
        "DROP TABLE sr_schemas_v11",
        "UPDATE sqlite_sequence SET seq = MAX(seq, (SELECT MAX(seq) FROM sr_schemas_v11_sequence))"
        " WHERE name = 'sr_schemas' AND EXISTS (SELECT 1 FROM sr_schemas_v11_sequence)",
        "INSERT INTO sqlite_sequence (name, seq) SELECT 'sr_schemas', seq FROM sr_schemas_v11_sequence"
        " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'sr_schemas')",
        "DROP TABLE sr_schemas_v11_sequence",
        *_INDEXES,
    )


def v12_postgres() -> tuple[str, ...]:
    return (
        "ALTER TABLE sr_schemas ADD COLUMN duplicate BOOLEAN NOT NULL DEFAULT FALSE",
        "ALTER TABLE sr_schemas DROP CONSTRAINT sr_schemas_fingerprint_key",
        "ALTER TABLE sr_schemas DROP CONSTRAINT sr_schemas_guid_key",
        *_INDEXES,
    )
