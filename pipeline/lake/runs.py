"""What a lake run is given and what it ends with: ``LakeWriterConfig`` and ``LakeRun``. Kept apart from
the writer so that the worker's loop can hold a lake round without importing pyarrow until it has work."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.lake.upsert import UpsertResult

# What a run ends with (``LakeRun.outcome``).
COMMITTED = "committed"
UP_TO_DATE = "up to date"
LOST_RACE = "lost the commit race"
LEASED_ELSEWHERE = "leased by another writer"
FAILED = "failed"


@dataclass(frozen=True, slots=True)
class LakeWriterConfig:
    """``max_bytes_per_commit``: chunk bytes one commit reads at most (``lake_max_bytes_per_commit``);
    ``write_buffer_bytes``: decoded bytes the writer holds at once, a piece of a commit
    (``lake_write_buffer_bytes``, ``source.py``), which bounds its memory whatever the cap."""

    max_bytes_per_commit: int = 256 * 1024 * 1024
    lease_ms: int = 60_000
    write_buffer_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LakeRun:
    topic: str
    outcome: str
    offsets: Mapping[int, int] = field(default_factory=dict)  # the table's, after the run
    snapshot_id: int | None = None
    rows: int = 0
    chunk_bytes: int = 0
    lag_records: int = 0
    error: str | None = None
    # Typed tables: records that have no typed row (in the dead-letter table, or dropped).
    invalid_records: int = 0
    # Offsets the run had to skip: deleted (by retention past its hold, or DeleteRecords) before the table
    # had them. Counted by ``strata_lake_gap_records_total``.
    gap_records: int = 0
    state: StateRun | None = None  # the state table's part of the run, for topics with upsert on


@dataclass(frozen=True, slots=True)
class StateRun:
    """The state table's part of a run (``pipeline/lake/state_writer.py``): its outcome and offsets, and
    what its commit rewrote against the table's bucket count."""

    table: str
    outcome: str
    buckets: int = 0
    offsets: Mapping[int, int] = field(default_factory=dict)
    snapshot_id: int | None = None
    upsert: UpsertResult | None = None
    error: str | None = None

    def describe(self) -> str:
        """One line for logs and ``strata lake run``."""
        text = f"state table {self.table}: {self.outcome}"
        if self.upsert is not None:
            u = self.upsert
            text += (
                f", {u.keys_changed} keys changed, {u.buckets_rewritten} of {self.buckets} buckets"
                f" rewritten ({u.buckets_emptied} emptied), {u.rows_written} rows, {u.bytes_written} bytes"
            )
        return text + (f", error: {self.error}" if self.error else "")
