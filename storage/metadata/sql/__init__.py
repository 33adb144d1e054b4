"""The SQL implementation of every metadata role, shared by SQLite and PostgreSQL.

``core`` holds the backend interface, the dialect, the statement helpers and the global lock order; one
module per role holds its queries; ``store`` combines them into ``SqlMetadataStore``.
"""

from __future__ import annotations

from storage.metadata.rows import FileState
from storage.metadata.sql.core import BATCH_ROWS, Backend, Dialect, Param, Row, Tx, batches
from storage.metadata.sql.store import SqlMetadataStore

__all__ = [
    "BATCH_ROWS",
    "Backend",
    "Dialect",
    "FileState",
    "Param",
    "Row",
    "SqlMetadataStore",
    "Tx",
    "batches",
]
