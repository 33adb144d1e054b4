"""The schema registry's reads (``SchemaStore``, storage/metadata/schema_store.py), and the row mappers the
registry's writes share.

Each read is one read transaction and takes no lock. Subjects sort in code-point order, as Python sorts
(the dialect's binary collation). A subject prefix is matched with ``substr``, not LIKE, whose case
folding and wildcards differ between the dialects.
"""

from __future__ import annotations

import json

from storage.metadata.schema_store import SchemaRef, StoredSchema, VersionRow
from storage.metadata.sql.core import Param, Row, SqlBase, Tx

# Aliases s (sr_schemas) and v (sr_versions).
SCHEMA_COLUMNS = (
    "s.schema_id, s.schema_type, s.schema_text, s.canonical, s.fingerprint, s.guid, s.refs, s.created_ms"
)
VERSION_COLUMNS = "v.subject, v.version, v.deleted, " + SCHEMA_COLUMNS
VERSIONS_JOIN = "sr_versions v JOIN sr_schemas s ON s.schema_id = v.schema_id"
# No LIMIT clause both dialects accept means "all": SQLite needs one before OFFSET, PostgreSQL refuses -1.
_NO_LIMIT = 2**62


def refs_to_json(refs: tuple[SchemaRef, ...]) -> str:
    return json.dumps(
        [{"name": r.name, "subject": r.subject, "version": r.version} for r in refs], separators=(",", ":")
    )


def refs_from_json(text: str) -> tuple[SchemaRef, ...]:
    return tuple(SchemaRef(str(r["name"]), str(r["subject"]), int(r["version"])) for r in json.loads(text))


def stored_schema(r: Row) -> StoredSchema:
    return StoredSchema(
        schema_id=int(r[0]),
        schema_type=str(r[1]),
        text=str(r[2]),
        canonical=str(r[3]),
        fingerprint=str(r[4]),
        guid=str(r[5]),
        references=refs_from_json(str(r[6])),
        created_ms=int(r[7]),
    )


def version_row(r: Row) -> VersionRow:
    return VersionRow(subject=str(r[0]), version=int(r[1]), deleted=bool(r[2]), schema=stored_schema(r[3:]))


def live_versions(tx: Tx, subject: str) -> tuple[VersionRow, ...]:
    rows = tx.all(
        f"SELECT {VERSION_COLUMNS} FROM {VERSIONS_JOIN}"
        " WHERE v.subject = ? AND NOT v.deleted ORDER BY v.version",
        (subject,),
    )
    return tuple(version_row(r) for r in rows)


def _prefix(column: str, prefix: str) -> tuple[str, list[Param]]:
    """A condition (with its leading AND) matching ``column`` values that start with ``prefix``."""
    if not prefix:
        return "", []
    return f" AND substr({column}, 1, length(?)) = ?", [prefix, prefix]


def _deleted_filter(column: str, include_deleted: bool, deleted_only: bool = False) -> str:
    if deleted_only:
        return f" AND {column}"
    return "" if include_deleted else f" AND NOT {column}"


class SchemaReads(SqlBase):
    def _read_schema(self, where: str, key: Param, what: str) -> StoredSchema | None:
        # An id resolves while a version row (soft-deleted or not) uses it.
        row = self._backend.run(
            lambda tx: tx.one(
                f"SELECT {SCHEMA_COLUMNS} FROM sr_schemas s WHERE {where}"
                " AND EXISTS (SELECT 1 FROM sr_versions v WHERE v.schema_id = s.schema_id)"
                # A guid names every id of a schema (migration 12): the first one answers.
                " ORDER BY s.duplicate, s.schema_id LIMIT 1",
                (key,),
            ),
            write=False,
            what=what,
        )
        return None if row is None else stored_schema(row)

    def schema_by_id(self, schema_id: int) -> StoredSchema | None:
        return self._read_schema("s.schema_id = ?", schema_id, "schema_by_id")

    def schema_by_guid(self, guid: str) -> StoredSchema | None:
        return self._read_schema("s.guid = ?", guid, "schema_by_guid")

    def max_schema_id(self) -> int:
        row = self._backend.run(
            lambda tx: tx.one("SELECT MAX(schema_id) FROM sr_schemas"), write=False, what="max_schema_id"
        )
        return 0 if row is None or row[0] is None else int(row[0])

    def schema_usages(self, schema_id: int, include_deleted: bool = False) -> list[tuple[str, int]]:
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT v.subject, v.version FROM sr_versions v WHERE v.schema_id = ?"
                f"{_deleted_filter('v.deleted', include_deleted)}"
                f" ORDER BY v.subject{self._d.binary_collation}, v.version",
                (schema_id,),
            ),
            write=False,
            what="schema_usages",
        )
        return [(str(r[0]), int(r[1])) for r in rows]

    def list_subjects(
        self, prefix: str = "", include_deleted: bool = False, deleted_only: bool = False
    ) -> list[str]:
        condition, params = _prefix("subject", prefix)
        live = "MAX(CASE WHEN deleted THEN 0 ELSE 1 END)"
        having = f" HAVING {live} = 0" if deleted_only else "" if include_deleted else f" HAVING {live} = 1"
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT subject FROM sr_versions WHERE 1 = 1{condition} GROUP BY subject{having}"
                f" ORDER BY subject{self._d.binary_collation}",
                params,
            ),
            write=False,
            what="list_subjects",
        )
        return [str(r[0]) for r in rows]

    def list_subject_versions(
        self, subject: str, include_deleted: bool = False, deleted_only: bool = False
    ) -> list[int]:
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT version FROM sr_versions WHERE subject = ?"
                f"{_deleted_filter('deleted', include_deleted, deleted_only)} ORDER BY version",
                (subject,),
            ),
            write=False,
            what="list_subject_versions",
        )
        return [int(r[0]) for r in rows]

    def subject_version_rows(self, subject: str, include_deleted: bool = False) -> list[VersionRow]:
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT {VERSION_COLUMNS} FROM {VERSIONS_JOIN} WHERE v.subject = ?"
                f"{_deleted_filter('v.deleted', include_deleted)} ORDER BY v.version",
                (subject,),
            ),
            write=False,
            what="subject_version_rows",
        )
        return [version_row(r) for r in rows]

    def _one_version(
        self, where: str, params: list[Param], include_deleted: bool, what: str
    ) -> VersionRow | None:
        row = self._backend.run(
            lambda tx: tx.one(
                f"SELECT {VERSION_COLUMNS} FROM {VERSIONS_JOIN} WHERE {where}"
                f"{_deleted_filter('v.deleted', include_deleted)} ORDER BY v.version DESC LIMIT 1",
                params,
            ),
            write=False,
            what=what,
        )
        return None if row is None else version_row(row)

    def subject_version(
        self, subject: str, version: int | None, include_deleted: bool = False
    ) -> VersionRow | None:
        if version is None:
            return self._one_version("v.subject = ?", [subject], include_deleted, "subject_version")
        return self._one_version(
            "v.subject = ? AND v.version = ?", [subject, version], include_deleted, "subject_version"
        )

    def find_subject_version(
        self, subject: str, fingerprint: str, include_deleted: bool = False
    ) -> VersionRow | None:
        return self._one_version(
            "v.subject = ? AND s.fingerprint = ?",
            [subject, fingerprint],
            include_deleted,
            "find_subject_version",
        )

    def list_schema_versions(
        self,
        prefix: str = "",
        include_deleted: bool = False,
        latest_only: bool = False,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[VersionRow]:
        condition, params = _prefix("v.subject", prefix)
        deleted = _deleted_filter("v.deleted", include_deleted)
        if latest_only:
            condition += (
                " AND v.version = (SELECT MAX(w.version) FROM sr_versions w WHERE w.subject = v.subject"
                f"{_deleted_filter('w.deleted', include_deleted)})"
            )
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT {VERSION_COLUMNS} FROM {VERSIONS_JOIN} WHERE 1 = 1{condition}{deleted}"
                f" ORDER BY v.subject{self._d.binary_collation}, v.version LIMIT ? OFFSET ?",
                [*params, _NO_LIMIT if limit is None else limit, offset],
            ),
            write=False,
            what="list_schema_versions",
        )
        return [version_row(r) for r in rows]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT DISTINCT r.schema_id FROM sr_references r"
                " WHERE r.ref_subject = ? AND r.ref_version = ?"
                " AND EXISTS (SELECT 1 FROM sr_versions v WHERE v.schema_id = r.schema_id)"
                " ORDER BY r.schema_id",
                (subject, version),
            ),
            write=False,
            what="referenced_by",
        )
        return [int(r[0]) for r in rows]
