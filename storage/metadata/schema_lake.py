"""Migration 13: the lake's tables. Topics kept as Iceberg tables (``pipeline/lake``) need two things of the
metadata database:

- **pyiceberg's SQL catalog**, ``iceberg_tables`` and ``iceberg_namespace_properties``, created here with
  exactly the DDL pyiceberg 0.12's ``SqlCatalog`` emits (its ``create_tables``, the "v1" layout with
  ``iceberg_type``), which is also the layout of Java's ``JdbcCatalog``. Created by the migration rather than
  by pyiceberg on first use, so that the schema has one owner and every process finds the tables there.
  Plain SQL types (VARCHAR), so no STRICT on SQLite: pyiceberg's DDL is kept as it is. A table's current
  metadata file is swapped by pyiceberg's one compare-and-set UPDATE on ``iceberg_tables``.
- **``lake_tables``**: one row per lake-enabled topic, the writer's lease and its last status. The lease
  (``lease_owner``, ``lease_expires_ms``) makes one writer per table at a time, as jobs are leased. The
  status (``committed_offsets``, ``last_snapshot_id``, ``lag_records``, ``error``) is for display only:
  the source of truth of what a table holds is its current snapshot's summary (``strata.offsets``).
  ``table_identifier`` is UNIQUE, so two topics can never write one table. ``delete_with_topic`` and
  ``topic_created_ms`` are copied from the topic when the row is written, because the writer must still
  know them after the topic is gone (or deleted and created again).
"""

from __future__ import annotations

from typing import Protocol


class Types(Protocol):
    """The dialect's column types (schema._Types)."""

    @property
    def big(self) -> str: ...
    @property
    def boolean(self) -> str: ...
    @property
    def false(self) -> str: ...
    @property
    def small(self) -> str: ...
    @property
    def table_options(self) -> str: ...


# pyiceberg 0.12's DDL (pyiceberg/catalog/sql.py, IcebergTables and IcebergNamespaceProperties), as
# SQLAlchemy compiles it for both SQLite and PostgreSQL, less its trailing blanks. A test compares it with
# pyiceberg's own.
ICEBERG_TABLES_DDL = """CREATE TABLE iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
)"""
ICEBERG_NAMESPACE_PROPERTIES_DDL = """CREATE TABLE iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000) NOT NULL,
    PRIMARY KEY (catalog_name, namespace, property_key)
)"""


# The request kinds counted (storage/objectstore/base.py's REQUEST_KINDS), as column name prefixes.
REQUEST_COLUMNS = ("put_requests", "get_requests", "head_requests", "list_requests", "delete_requests")


def v14(t: Types) -> tuple[str, ...]:
    counters = ", ".join(f"{c} {t.big} NOT NULL DEFAULT 0" for c in REQUEST_COLUMNS)
    return (
        *(f"ALTER TABLE lake_tables ADD COLUMN {c} {t.big} NOT NULL DEFAULT 0" for c in REQUEST_COLUMNS),
        f"ALTER TABLE lake_tables ADD COLUMN stored_objects {t.big}",
        f"ALTER TABLE lake_tables ADD COLUMN stored_bytes {t.big}",
        f"ALTER TABLE lake_tables ADD COLUMN stored_measured_ms {t.big}",
        f"""CREATE TABLE lake_request_totals (
            id {t.small} PRIMARY KEY CHECK (id = 1),
            {counters},
            updated_ms {t.big} NOT NULL DEFAULT 0
        ){t.table_options}""",
        "INSERT INTO lake_request_totals (id) VALUES (1)",
    )


def v13(t: Types) -> tuple[str, ...]:
    return (
        ICEBERG_TABLES_DDL,
        ICEBERG_NAMESPACE_PROPERTIES_DDL,
        f"""CREATE TABLE lake_tables (
            topic TEXT PRIMARY KEY,
            table_identifier TEXT NOT NULL UNIQUE,
            mode TEXT NOT NULL,
            delete_with_topic {t.boolean} NOT NULL,
            topic_created_ms {t.big} NOT NULL,
            committed_offsets TEXT NOT NULL,
            last_snapshot_id {t.big},
            last_commit_ms {t.big},
            last_run_ms {t.big},
            lag_records {t.big} NOT NULL DEFAULT 0,
            error TEXT,
            lease_owner TEXT,
            lease_expires_ms {t.big},
            commit_requested {t.boolean} NOT NULL DEFAULT {t.false},
            created_ms {t.big} NOT NULL,
            updated_ms {t.big} NOT NULL
        ){t.table_options}""",
    )
