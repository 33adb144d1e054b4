"""The lake benchmark's arithmetic, apart from its processes so that it can be tested alone: commits seen by
polling a table's status, the steady rate and CPU cost between them, the lag over a window, the files one
commit wrote by kind, and the share of key buckets a commit of ``k`` random keys is expected to touch.

Why commits, not the window's edges: a writer commits once per ``strata.iceberg.commit.interval.ms``, so
bytes committed inside a fixed window swing by a whole commit with where its edges fall. Measured from one
commit to a later one, the records are exactly those the commits in between added, and the writer's CPU
between the two sightings is exactly the work of those commits (plus its idle rounds, which it pays for in
production too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

MiB = 1024 * 1024

# The files an Iceberg commit writes, by kind, as pyiceberg names them.
DATA, MANIFEST, MANIFEST_LIST, METADATA, OTHER = "data", "manifest", "manifest list", "metadata", "other"
KINDS = (DATA, MANIFEST, MANIFEST_LIST, METADATA, OTHER)


@dataclass(frozen=True, slots=True)
class Sample:
    """One poll of a table's status (``GET /v1/topics/{t}/lake``) with the writer's CPU at that moment."""

    at_s: float  # wall clock, seconds since the epoch
    lag_records: int
    lag_seconds: float
    committed: int  # the sum of the table's committed offsets over the partitions
    snapshot: str | None  # the last commit's snapshot id
    last_commit_ms: int | None
    writer_cpu_s: float


@dataclass(frozen=True, slots=True)
class Commit:
    """A commit as the polls saw it: when the writer recorded it, what the table then held, and the
    writer's CPU at the first poll that saw it."""

    at_s: float
    committed: int
    writer_cpu_s: float


def commits_seen(samples: Sequence[Sample]) -> list[Commit]:
    """Each new snapshot in ``samples``, at the time its writer recorded it (``last_commit_ms``)."""
    out = []
    previous: str | None = None
    for s in samples:
        if s.snapshot is not None and s.snapshot != previous and s.last_commit_ms is not None:
            out.append(Commit(s.last_commit_ms / 1000, s.committed, s.writer_cpu_s))
        previous = s.snapshot
    return out


@dataclass(frozen=True, slots=True)
class Steady:
    """What the commits inside a window did, from the first of them to the last."""

    commits: int  # commits inside the window; the figures span commits - 1 intervals between them
    seconds: float
    records: int
    writer_cpu_s: float

    def records_s(self) -> float | None:
        return self.records / self.seconds if self.seconds > 0 else None

    def mib_s(self, record_bytes: int) -> float | None:
        rate = self.records_s()
        return None if rate is None else rate * record_bytes / MiB

    def mib_per_cpu_s(self, record_bytes: int) -> float | None:
        if self.writer_cpu_s <= 0:
            return None
        return self.records * record_bytes / MiB / self.writer_cpu_s


def steady(commits: Sequence[Commit], start_s: float, end_s: float) -> Steady | None:
    """The commits recorded inside [start_s, end_s]: None with fewer than two (no interval to measure)."""
    inside = [c for c in commits if start_s <= c.at_s <= end_s]
    if len(inside) < 2:
        return None
    first, last = inside[0], inside[-1]
    return Steady(
        len(inside),
        last.at_s - first.at_s,
        last.committed - first.committed,
        last.writer_cpu_s - first.writer_cpu_s,
    )


def lag_summary(samples: Sequence[Sample], start_s: float, end_s: float) -> dict[str, float | None]:
    """The lag over the polls inside [start_s, end_s]: its mean, its largest and its last value."""
    inside = [s for s in samples if start_s <= s.at_s <= end_s]
    if not inside:
        return {k: None for k in ("records_mean", "records_max", "records_last", "s_mean", "s_max", "s_last")}
    return {
        "records_mean": sum(s.lag_records for s in inside) / len(inside),
        "records_max": max(s.lag_records for s in inside),
        "records_last": inside[-1].lag_records,
        "s_mean": sum(s.lag_seconds for s in inside) / len(inside),
        "s_max": max(s.lag_seconds for s in inside),
        "s_last": inside[-1].lag_seconds,
    }


# --- files --------------------------------------------------------------------------------------------------
def file_kind(name: str) -> str:
    """What an Iceberg file is, by pyiceberg's names: ``*.parquet`` data, ``snap-*.avro`` a manifest list,
    other ``*.avro`` a manifest, ``*.metadata.json`` a table metadata file."""
    if name.endswith(".parquet"):
        return DATA
    if name.endswith(".metadata.json"):
        return METADATA
    if name.endswith(".avro"):
        return MANIFEST_LIST if name.startswith("snap-") else MANIFEST
    return OTHER


def new_files(before: Iterable[str], after: Iterable[str]) -> dict[str, dict[str, int]]:
    """The files in ``after`` and not in ``before`` (paths under the warehouse, ``<namespace>/<table>/...``),
    counted by table and kind. Every one is an object written: a PUT on S3 (one that pyarrow splits into a
    multipart upload is several requests), a file created on a local directory."""
    out: dict[str, dict[str, int]] = {}
    for path in sorted(set(after) - set(before)):
        parts = PurePosixPath(path).parts
        table = "/".join(parts[:2]) if len(parts) > 2 else "."
        kinds = out.setdefault(table, dict.fromkeys(KINDS, 0))
        kinds[file_kind(parts[-1])] += 1
    return out


def total_files(counted: Mapping[str, Mapping[str, int]]) -> int:
    return sum(sum(kinds.values()) for kinds in counted.values())


def describe_files(counted: Mapping[str, Mapping[str, int]]) -> str:
    """``"12 (data 8, manifest 1, manifest list 1, metadata 2)"``: the total and each kind that occurs."""
    by_kind = {k: sum(t.get(k, 0) for t in counted.values()) for k in KINDS}
    parts = ", ".join(f"{k} {n}" for k, n in by_kind.items() if n)
    return f"{total_files(counted)} ({parts})" if parts else "0"


# --- buckets ------------------------------------------------------------------------------------------------
def expected_bucket_share(buckets: int, keys: int) -> float:
    """The expected share of ``buckets`` that ``keys`` keys drawn uniformly touch: 1 - (1 - 1/B)^k."""
    return 1.0 - (1.0 - 1.0 / buckets) ** keys


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def rounded(value: Any, digits: int = 1) -> Any:
    """``value`` rounded to ``digits`` (an int for 0); None stays None."""
    if value is None:
        return None
    return round(value) if digits == 0 else round(value, digits)
