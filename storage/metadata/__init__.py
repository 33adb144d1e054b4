"""The metadata store (see ``base`` for its roles), opened by URL.

- ``sqlite:///relative/path.db`` (relative to the working directory), ``sqlite:////abs/path.db``: the
  embedded SQLite database; its parent directory is created.
- ``postgresql://...`` or ``postgres://...``: libpq URL syntax, including query parameters such as
  ``options=-csearch_path%3Dmyschema`` to keep the tables in a schema of their own.
"""

from __future__ import annotations

from pathlib import Path

from storage.errors import SettingsError
from storage.metadata.base import (
    AdminStore,
    CompactionCatalog,
    FileCatalog,
    IdempotencyConflict,
    LogStore,
    MetadataStore,
    StatsReader,
    TopicReader,
    UnknownJob,
)
from storage.metadata.rows import (
    FILE_LIVE,
    FILE_OBSOLETE,
    JOB_ACTIVE_STATES,
    JOB_DONE,
    JOB_FAILED,
    JOB_FINAL_STATES,
    JOB_LEASED,
    JOB_PENDING,
    LEVEL_INGEST,
    ChunkRow,
    CleanedUpTo,
    CompactionOutput,
    DirtySample,
    FileChunk,
    FileRow,
    FileState,
    FlushResult,
    GroupOffset,
    IdempotencyEntry,
    Job,
    JobRemoval,
    JobReport,
    NewChunk,
    NewCompactedChunk,
    NewFile,
    PartitionDetail,
    PartitionState,
    PartitionStats,
    TopicInfo,
    TopicSummary,
    TopicVolume,
)

__all__ = [
    "FILE_LIVE",
    "FILE_OBSOLETE",
    "JOB_ACTIVE_STATES",
    "JOB_DONE",
    "JOB_FAILED",
    "JOB_FINAL_STATES",
    "JOB_LEASED",
    "JOB_PENDING",
    "LEVEL_INGEST",
    "AdminStore",
    "ChunkRow",
    "CleanedUpTo",
    "CompactionCatalog",
    "CompactionOutput",
    "DirtySample",
    "FileCatalog",
    "FileChunk",
    "FileRow",
    "FileState",
    "FlushResult",
    "GroupOffset",
    "IdempotencyConflict",
    "IdempotencyEntry",
    "Job",
    "JobRemoval",
    "JobReport",
    "LogStore",
    "MetadataStore",
    "NewChunk",
    "NewCompactedChunk",
    "NewFile",
    "PartitionDetail",
    "PartitionState",
    "PartitionStats",
    "StatsReader",
    "TopicInfo",
    "TopicReader",
    "TopicSummary",
    "TopicVolume",
    "UnknownJob",
    "open_metadata_store",
    "sqlite_path",
]


def sqlite_path(url: str) -> Path:
    """The file a ``sqlite:`` URL names (SQLAlchemy's convention: three slashes, then the path)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        raise SettingsError(f"expected sqlite:///relative/path or sqlite:////absolute/path, got {url!r}")
    path = url[len(prefix) :]
    # No query parameters: a '?' would otherwise silently become part of the file name.
    if not path or path.endswith("/") or "?" in path or "#" in path:
        raise SettingsError(f"{url!r} does not name a database file (and query parameters are not supported)")
    return Path(path)


def open_metadata_store(url: str) -> MetadataStore:
    """Open the store ``url`` names, creating or migrating its schema. Raises SettingsError, Unavailable."""
    scheme = url.partition(":")[0].lower()
    if scheme == "sqlite":
        from storage.metadata.sqlite import open_sqlite_store

        path = sqlite_path(url)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SettingsError(f"cannot create the directory of {path}: {exc}") from exc
        return open_sqlite_store(path, url=url)
    if scheme in ("postgresql", "postgres"):
        from storage.metadata.postgres import open_postgres_store

        return open_postgres_store(url)
    raise SettingsError(f"unknown metadata store URL scheme {scheme!r}: use sqlite:/// or postgresql://")
