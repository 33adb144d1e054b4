"""One commit's data files, written as the rows come and appended in one snapshot: ``FileAppend``.

Why not ``Transaction.append`` per piece: each call is a snapshot of its own (a manifest list and a
manifest each, and snapshots without the commit's ``strata.offsets`` in the table's history); and one call
with the whole commit's rows holds them all in memory, which is what the writer must not do
(``source.py``: the commit is read in pieces). Why not pyiceberg's streaming append of a
``RecordBatchReader``: 0.12 refuses it on partitioned tables (every lake table is partitioned by default),
and its ``write_file`` hands the tasks to ``ThreadPoolExecutor.map``, which takes the whole stream before
writing anything.

So each piece's rows become data files at once, through ``pyiceberg.io.pyarrow._dataframe_to_data_files``:
the function ``Transaction.append`` itself calls, which splits by the table's partition spec and target
file size, projects the rows onto the table's schema (nulls for the columns a piece lacks) and computes
each file's statistics. It is private, which the exact pin of pyiceberg (``pyproject.toml``) makes safe;
an upgrade must check it. The files are written against the transaction's metadata at that moment, so
a schema evolved earlier in the same transaction (typed tables) applies to the rows after it. ``append``
then adds every file in one fast append carrying the snapshot properties: data and offsets in one
snapshot, as with ``Transaction.append``, whose default (``commit.manifest-merge.enabled`` false) is that
fast append too. An append with no file still makes a snapshot, which is how a commit carries offsets
without rows.

File names: one ``write_uuid`` per commit and one counter across its pieces, as pyiceberg names the files
of one append (``00000-<task>-<uuid>.parquet``), so no two files of a commit share a name. Files written by
a commit that never lands are orphans, which table maintenance deletes after its grace.
"""

from __future__ import annotations

import itertools
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table, Transaction


class FileAppend:
    """The data files of one commit to ``table`` through ``transaction``."""

    def __init__(self, table: Table, transaction: Transaction) -> None:
        self._table = table
        self._transaction = transaction
        self._uuid = uuid.uuid4()
        self._counter = itertools.count(0)
        self.files: list[DataFile] = []
        self.rows = 0

    def write(self, rows: pa.Table) -> None:
        """``rows`` as data files now (their columns a subset of the table's, by name). Raises ValueError
        when they do not fit the table's schema."""
        from pyiceberg.io.pyarrow import _check_pyarrow_schema_compatible, _dataframe_to_data_files

        if rows.num_rows == 0:
            return
        metadata = self._transaction.table_metadata
        _check_pyarrow_schema_compatible(
            metadata.schema(), provided_schema=rows.schema, format_version=metadata.format_version
        )
        written = _dataframe_to_data_files(
            table_metadata=metadata,
            df=rows,
            io=self._table.io,
            write_uuid=self._uuid,
            counter=self._counter,
        )
        self.files.extend(written)
        self.rows += rows.num_rows

    def append(self, properties: dict[str, str]) -> None:
        """Every file written, in one snapshot of the transaction carrying ``properties``."""
        with self._transaction.update_snapshot(snapshot_properties=properties).fast_append() as append:
            for data_file in self.files:
                append.append_data_file(data_file)
