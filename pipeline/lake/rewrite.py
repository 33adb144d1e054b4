"""The rewrite of a lake table's small files: each closed time partition holding many small data files is
read and written back as few large ones, in one snapshot that carries ``strata.offsets`` forward.

A writer committing every minute leaves one data file per partition per commit: a day-partitioned table
gets 1440 files a day, which every reader opens. pyiceberg 0.12 has no ``rewrite_data_files``, so the rewrite
is an ``overwrite`` filtered on the partition's time range, with the rows read from it: the same rows, in
fewer files. It is a plain Iceberg overwrite, so readers see either the old files or the new ones.

Why it loses and duplicates nothing:
- the rows are read from the snapshot the table was loaded at, and the overwrite commits on top of that
  same snapshot only: the catalog's compare-and-set refuses it if anything committed in between (pyiceberg
  would not retry: lake tables set ``commit.retry.num-retries=0``), and the next maintenance tries again;
- the filter is the partition's exact time range on the column the partition is derived from, so the files
  it drops hold exactly the rows that were read (whole files: every row of a file in the partition matches);
- the new snapshots carry the offsets the loaded snapshot had (``offsets.committed_offsets``), unchanged,
  so the writer goes on where it was.

Which partitions: tables whose spec is one time transform of ``timestamp`` (the default ``(day(timestamp))``,
or hour, month, year); other specs are left as they are. A partition is closed once its time range ended
``CLOSED_AFTER_MS`` ago (a record with an old timestamp can still land in it later: that is one more file,
and a later rewrite takes it). It is rewritten when it has at least ``min_files`` data files, and at most
``max_bytes`` of them, which bounds the memory a rewrite holds (the rows are read into Arrow at once).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from pipeline.lake.offsets import OFFSETS_PROPERTY, committed_offsets, encode_offsets

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger("strata.lake")

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
CLOSED_AFTER_MS = HOUR_MS


@dataclass(frozen=True, slots=True)
class RewriteConfig:
    min_files: int = 8
    max_bytes: int = 64 * 1024 * 1024  # of Parquet; the rows are held in Arrow at once, several times that
    max_partitions: int = 4  # per table per maintenance: one commit each, bounded work per round


def _range_ms(transform: str, value: int) -> tuple[int, int] | None:
    """[start, end) of a time partition's value, in milliseconds; None for another transform."""
    if transform == "hour":
        return value * HOUR_MS, (value + 1) * HOUR_MS
    if transform == "day":
        return value * DAY_MS, (value + 1) * DAY_MS
    if transform in ("month", "year"):
        months = value if transform == "month" else value * 12
        span = 1 if transform == "month" else 12

        def at(m: int) -> int:
            return int(datetime(1970 + m // 12, m % 12 + 1, 1, tzinfo=UTC).timestamp() * 1000)

        return at(months), at(months + span)
    return None


def _time_field(table: Table) -> tuple[str, str] | None:
    """(partition field name, transform) of a spec that is one time transform of ``timestamp``."""
    spec = table.spec()
    if len(spec.fields) != 1:
        return None
    field = spec.fields[0]
    transform = str(field.transform)
    if table.schema().find_column_name(field.source_id) != "timestamp" or _range_ms(transform, 0) is None:
        return None
    return field.name, transform


def _ordinal(value: object) -> int | None:
    """A time partition's value as the transform's count since the epoch (Arrow shows days as dates)."""
    if isinstance(value, datetime):
        return None  # not a partition value any time transform gives
    if isinstance(value, date):
        return (value - date(1970, 1, 1)).days
    return value if isinstance(value, int) else None


def small_partitions(table: Table, now_ms: int, config: RewriteConfig) -> list[tuple[int, int]]:
    """The [start, end) ranges (ms) of the closed partitions worth rewriting, oldest first."""
    found = _time_field(table)
    current = table.current_snapshot()
    # A snapshot without manifests (a table's first run, before any record: it carries only the offsets)
    # has no files to rewrite, and pyiceberg's ``inspect.files`` fails on it (it concatenates no tables).
    if found is None or current is None or not current.manifests(table.io):
        return []
    name, transform = found
    files = table.inspect.files().select(["content", "partition", "file_size_in_bytes"]).to_pylist()
    counts: dict[int, list[int]] = defaultdict(list)
    for f in files:
        value = _ordinal((f["partition"] or {}).get(name))
        if f["content"] == 0 and value is not None:
            counts[value].append(int(f["file_size_in_bytes"]))
    ranges = []
    for value, sizes in sorted(counts.items()):
        span = _range_ms(transform, value)
        if span is None or span[1] + CLOSED_AFTER_MS > now_ms:
            continue
        if len(sizes) >= config.min_files and sum(sizes) <= config.max_bytes:
            ranges.append(span)
    return ranges[: config.max_partitions]


def rewrite_partition(table: Table, start_ms: int, end_ms: int) -> Table:
    """Write the rows of the partition [start_ms, end_ms) back in one overwrite carrying the offsets."""

    def iso(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat()

    where = f"timestamp >= '{iso(start_ms)}' AND timestamp < '{iso(end_ms)}'"
    offsets, _ = committed_offsets(table)
    rows = table.scan(row_filter=where).to_arrow()  # at the loaded snapshot: the overwrite commits on it
    transaction = table.transaction()
    transaction.overwrite(
        rows, overwrite_filter=where, snapshot_properties={OFFSETS_PROPERTY: encode_offsets(offsets)}
    )
    return transaction.commit_transaction()


def rewrite_small_files(table: Table, now_ms: int, config: RewriteConfig) -> tuple[Table, int]:
    """Rewrite the table's small closed partitions: (the table after, how many were rewritten)."""
    done = 0
    for start, end in small_partitions(table, now_ms, config):
        table = rewrite_partition(table, start, end)
        done += 1
        log.info("lake table %s: rewrote the small files of [%d, %d) ms", ".".join(table.name()), start, end)
    return table, done
