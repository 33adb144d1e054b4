"""What a lake run is given and what it ends with: ``LakeWriterConfig`` and ``LakeRun``. Kept apart from
the writer so that the worker's loop can hold a lake round without importing pyarrow until it has work."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# What a run ends with (``LakeRun.outcome``).
COMMITTED = "committed"
UP_TO_DATE = "up to date"
LOST_RACE = "lost the commit race"
LEASED_ELSEWHERE = "leased by another writer"
FAILED = "failed"


@dataclass(frozen=True, slots=True)
class LakeWriterConfig:
    max_bytes_per_commit: int = 256 * 1024 * 1024
    lease_ms: int = 60_000


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
