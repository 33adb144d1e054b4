"""The lake's Prometheus metrics (``strata_lake_*``): ``LakeMetrics``, the one observer the lake round
reports to (``LakeObserver``), on the process's one registry (the composition root, ``strata/runtime.py``),
scraped at ``/metrics`` where the process has an HTTP door.

What it is told, and what it records:
- each writer run and how long it took (``observe_run``):
  ``strata_lake_commits_total{topic}`` (snapshots committed), ``strata_lake_records_total{topic}`` (rows),
  ``strata_lake_bytes_total{topic}`` (the topic's bytes those rows were read from, as stored in the log:
  compressed batches count compressed), ``strata_lake_commit_seconds{topic}`` (runs that committed: read,
  write and commit), ``strata_lake_errors_total{topic}`` (runs that failed or were refused; the message is
  in the status), and ``strata_lake_gap_records_total``: offsets a table skipped because they were deleted
  (by retention past its hold, ``planner/lake_hold.py``, or DeleteRecords) before it committed them,
  counted where the gap is certain, the run that skips them (``LakeRun.gap_records``), not by retention,
  which judges by a lower bound of the table's offsets;
- the lag of the lake-enabled topics at the end of each round (``observe_lag``):
  ``strata_lake_lag_records{topic}`` and ``strata_lake_lag_seconds{topic}``, as ``storage/lake_status.py``
  defines them, set for every lake-enabled topic (not only those that were due), so they grow between
  commits; a topic whose lake is gone loses its series;
- each table's maintenance (``observe_maintenance``): ``strata_lake_orphans_deleted_total`` and
  ``strata_lake_snapshots_expired_total``;
- what the lake sent and holds (``observe_usage``, after each run, maintenance or drop):
  ``strata_lake_requests_total{topic,kind,store="lake"}``, the requests this process's pyiceberg sent for
  the topic's tables (``meter.py``; kinds as ``strata_object_store_requests_total``'s, which never counts
  them: ``store="lake"`` says whose they are), and ``strata_lake_table_objects{table}`` and
  ``strata_lake_table_bytes{table}``, what the table (with its ``_dlq`` and ``_state`` tables) holds, as
  the topic's ``lake_tables`` row says after the record: the whole cluster's figure, not this process's
  share. Unknown (never listed yet): not set.

Labels are topic and table names and request kinds only: no location, bucket or error text (which may name
either) is a label.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from pipeline.lake.maintenance import MaintenanceResult
from pipeline.lake.round import REFUSED
from pipeline.lake.runs import COMMITTED, FAILED, LakeRun
from storage.lake_status import LakeStatus
from storage.metadata.lake_state import LakeFootprint, LakeUsage

# What counts as an error: a run that ended without learning or moving the table's offsets (REFUSED: its
# table is claimed by another topic).
ERROR_OUTCOMES = frozenset({FAILED, REFUSED})
LAKE_STORE = "lake"


class LakeObserver(Protocol):
    def observe_run(self, run: LakeRun, seconds: float) -> None:
        """One writer run, and how long it took."""
        ...

    def observe_lag(self, statuses: Sequence[LakeStatus], every_topic: bool) -> None:
        """The lag of the topics in ``statuses``; ``every_topic``: they are all the lake-enabled topics."""
        ...

    def observe_maintenance(self, result: MaintenanceResult) -> None:
        """One table's maintenance."""
        ...

    def observe_usage(self, topic: str, table: str, usage: LakeUsage, stored: LakeFootprint | None) -> None:
        """What the lake sent for ``topic`` in one scope; what its tables hold after (None: unknown)."""
        ...


class LakeMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.commits = Counter("strata_lake_commits", "Lake snapshots committed", ["topic"], registry=r)
        self.records = Counter("strata_lake_records", "Rows committed to lake tables", ["topic"], registry=r)
        self.bytes = Counter(
            "strata_lake_bytes", "Log bytes read into committed lake rows", ["topic"], registry=r
        )
        self.commit_seconds = Histogram(
            "strata_lake_commit_seconds",
            "Time of a lake run that committed (read, write, commit)",
            ["topic"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=r,
        )
        self.errors = Counter(
            "strata_lake_errors", "Lake runs that failed or were refused", ["topic"], registry=r
        )
        self.gap_records = Counter(
            "strata_lake_gap_records",
            "Offsets lake tables skipped: deleted before the table committed them",
            registry=r,
        )
        self.lag_records = Gauge(
            "strata_lake_lag_records", "Offsets below the LSO not in the lake table", ["topic"], registry=r
        )
        self.lag_seconds = Gauge(
            "strata_lake_lag_seconds", "Age of the oldest record not in the lake table", ["topic"], registry=r
        )
        self.orphans = Counter(
            "strata_lake_orphans_deleted", "Unreferenced lake files deleted by maintenance", registry=r
        )
        self.expired = Counter(
            "strata_lake_snapshots_expired", "Lake table snapshots expired by maintenance", registry=r
        )
        self.requests = Counter(
            "strata_lake_requests",
            "Object-store requests the lake's pyiceberg sent for a topic's tables, by kind",
            ["topic", "kind", "store"],
            registry=r,
        )
        self.table_objects = Gauge(
            "strata_lake_table_objects",
            "Objects under a lake table's location (with its _dlq and _state tables)",
            ["table"],
            registry=r,
        )
        self.table_bytes = Gauge(
            "strata_lake_table_bytes",
            "Bytes under a lake table's location (with its _dlq and _state tables)",
            ["table"],
            registry=r,
        )
        self._lagging: set[str] = set()

    def observe_run(self, run: LakeRun, seconds: float) -> None:
        if run.outcome == COMMITTED:
            self.commits.labels(run.topic).inc()
            self.records.labels(run.topic).inc(run.rows)
            self.bytes.labels(run.topic).inc(run.chunk_bytes)
            self.commit_seconds.labels(run.topic).observe(seconds)
        elif run.outcome in ERROR_OUTCOMES:
            self.errors.labels(run.topic).inc()
        if run.gap_records:
            self.gap_records.inc(run.gap_records)

    def observe_lag(self, statuses: Sequence[LakeStatus], every_topic: bool) -> None:
        shown = {s.topic for s in statuses if s.enabled}
        for status in statuses:
            if status.enabled:
                self.lag_records.labels(status.topic).set(status.lag_records)
                self.lag_seconds.labels(status.topic).set(status.lag_seconds)
        gone = (self._lagging - shown) if every_topic else {s.topic for s in statuses if not s.enabled}
        for topic in gone & self._lagging:
            self.lag_records.remove(topic)
            self.lag_seconds.remove(topic)
        self._lagging = (self._lagging - gone) | shown

    def observe_maintenance(self, result: MaintenanceResult) -> None:
        self.orphans.inc(result.orphans_deleted)
        self.expired.inc(result.snapshots_expired)

    def observe_usage(self, topic: str, table: str, usage: LakeUsage, stored: LakeFootprint | None) -> None:
        for kind, n in usage.requests.items():
            if n:
                self.requests.labels(topic, kind, LAKE_STORE).inc(n)
        if stored is not None:
            self.table_objects.labels(table).set(stored.objects)
            self.table_bytes.labels(table).set(stored.bytes)
