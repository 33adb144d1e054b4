"""Prometheus metrics of the lake writer (``strata_lake_*``), recorded by the lake round of the process that
runs it (a worker, or ``--role all``) on the process's one registry, and scraped at ``/metrics``.

- ``strata_lake_commits_total{topic}``: snapshots committed;
- ``strata_lake_records_total{topic}``: rows committed;
- ``strata_lake_bytes_total{topic}``: the topic's bytes those rows were read from (chunk bytes, as stored
  in the log: compressed batches count compressed);
- ``strata_lake_commit_seconds{topic}``: the time of each run that committed, read, write and commit;
- ``strata_lake_errors_total{topic}``: runs that failed or were refused (their message is in the status);
- ``strata_lake_lag_records{topic}``, ``strata_lake_lag_seconds{topic}``: the lag as
  ``storage/lake_status.py`` defines it, set for every lake-enabled topic at the end of each round (not only
  for the topics that were due), so it grows between commits; a topic whose lake is gone loses its series.

Labels are topic names only: no table location, bucket, or error text (which may name either) is a label.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from pipeline.lake.round import REFUSED
from pipeline.lake.runs import COMMITTED, FAILED, LakeRun
from storage.lake_status import LakeStatus

# What counts as an error: a run that ended without learning or moving the table's offsets (REFUSED: its
# table is claimed by another topic).
ERROR_OUTCOMES = frozenset({FAILED, REFUSED})


class RunObserver(Protocol):
    def observe_run(self, run: LakeRun, seconds: float) -> None:
        """One writer run, and how long it took."""
        ...

    def observe_lag(self, statuses: Sequence[LakeStatus], every_topic: bool) -> None:
        """The lag of the topics in ``statuses``; ``every_topic``: they are all the lake-enabled topics."""
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
        self.lag_records = Gauge(
            "strata_lake_lag_records", "Offsets below the LSO not in the lake table", ["topic"], registry=r
        )
        self.lag_seconds = Gauge(
            "strata_lake_lag_seconds", "Age of the oldest record not in the lake table", ["topic"], registry=r
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
