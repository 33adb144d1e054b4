"""The dead-letter table of a typed table: the records that have no typed row, in the raw layout plus
``error`` (``layouts.DEAD_LETTER``, ``table_layout.dead_letter_schema``), named ``<table>_dlq``
(``storage/lake_config.dead_letter_table``, where the name is argued).

With ``strata.iceberg.invalid.record.action=drop`` no such table is written: the refused records are only
counted in the run's outcome.

Why exactly once, across two tables that no catalog commits together. The dead-letter table is committed
FIRST, with its own ``strata.offsets``: the offsets of the read the rows belong to (per partition, the
higher of what it held and the read's end). Its invariant: it holds every record below its offsets that
the writer refused when it committed them, and none at or above. Then the main table commits as in raw
mode. The cases:
- both commits land: each record is in exactly one table;
- the writer stops between the two (a crash, a failed main commit): the main table still ends where it
  did, so the next run reads the same records again and refuses the same ones (a refusal depends only on
  the record, the registry's schemas, the topic's lake configs and the main table's columns, and the last
  has not moved). The rows below the dead-letter table's own offsets are skipped, being there already;
  those at or above are appended;
- two writers: each loaded the dead-letter table before its commit, and the catalog's compare-and-set
  accepts one commit per snapshot, so the second one's dead-letter commit fails and it stops, as a lost
  main commit does; one that loaded it after the first's commit skips those rows.
A run with no dead letters to add leaves the table alone, so it is created by the first refusal only. A
run's letters are written a piece of the read at a time (``DeadLetterAppend``) and committed in one
snapshot, so the argument is the same as for one append.
The case that is not exactly once: the registry or the topic's configs changing between a run's two
commits (a schema registered after the run refused records for lacking it) turns the rerun's refusals
into typed rows, while they stay dead letters too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

from pipeline.lake.offsets import OFFSETS_PROPERTY, committed_offsets, encode_offsets
from storage.lake_config import dead_letter_table

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table


def unheld(held: Mapping[int, int], rows: pa.Table) -> pa.Table:
    """``rows`` (``layouts.DEAD_LETTER``) less those below the table's own committed offsets ``held``."""
    if not held:
        return rows
    partitions = rows.column("partition").to_pylist()
    offsets = rows.column("offset").to_pylist()
    keep = [i for i, (p, o) in enumerate(zip(partitions, offsets, strict=True)) if o >= held.get(p, 0)]
    return rows.take(pa.array(keep, pa.int64()))


class DeadLetterAppend:
    """One commit's dead letters, added a piece at a time (each written as data files at once, so the
    writer holds one piece's letters, not the commit's), then committed in one snapshot with the offsets
    the read reached."""

    def __init__(self, table: Table, read_end: Mapping[int, int]) -> None:
        from pipeline.lake.append import FileAppend

        self.table = table
        self._held, _ = committed_offsets(table)
        self._read_end = dict(read_end)
        self._transaction = table.transaction()
        self._files = FileAppend(table, self._transaction)
        self._columns = table.schema().as_arrow()

    def add(self, rows: pa.Table) -> None:
        """Write ``rows`` not held yet (``layouts.DEAD_LETTER``)."""
        self._files.write(unheld(self._held, rows).cast(self._columns))

    def commit(self) -> Table | None:
        """The rows added, with the offsets, in one snapshot: the table as committed, or None when there
        was nothing to add. Raises pyiceberg's CommitFailedException when another writer committed to it
        first."""
        if self._files.rows == 0:
            return None
        held, ends = self._held, self._read_end
        offsets = {p: max(held.get(p, 0), ends.get(p, 0)) for p in {*held, *ends}}
        self._files.append({OFFSETS_PROPERTY: encode_offsets(offsets)})
        return self._transaction.commit_transaction()


def purge_dead_letters(catalog: Catalog, table: str, topic: str, created_ms: int) -> bool:
    """Drop ``table``'s dead-letter table with its files, when it holds that topic's dead letters (a
    table of that name holding anything else is left alone): whether one was dropped."""
    from pyiceberg.exceptions import NoSuchTableError

    from pipeline.lake.table_properties import TOPIC_CREATED_PROPERTY, TOPIC_PROPERTY
    from pipeline.lake.writer import DEAD_LETTERS, LAYOUT_PROPERTY

    name = dead_letter_table(table)
    try:
        properties = catalog.load_table(name).properties
    except NoSuchTableError:
        return False
    mine = {TOPIC_PROPERTY: topic, TOPIC_CREATED_PROPERTY: str(created_ms), LAYOUT_PROPERTY: DEAD_LETTERS}
    if any(properties.get(k) != v for k, v in mine.items()):
        return False
    catalog.purge_table(name)
    return True
