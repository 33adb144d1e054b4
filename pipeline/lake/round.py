"""One lake round: a job for every lake-enabled topic that is due, and the tables of deleted topics dropped.

The worker role runs it after each compaction round (``strata/loop.py``), and ``strata lake run`` runs one
by hand. Every step is safe with any number of processes doing the same: the jobs are leased per table,
and the commit itself is a compare-and-set (``pipeline/lake/writer.py``).

When a topic is due (``due_at``), so that under steady load the table lags by about its commit interval,
as the commit interval of Kafka Connect's Iceberg sink and Redpanda's Iceberg lag target are meant:
- once ``strata.iceberg.commit.interval.ms`` has passed since its table's last run BEGAN (the row's
  ``last_run_ms``), not since it ended: a commit that takes a while does not push the next one later;
- at once when the last run is behind: it committed, and the byte cap (``lake_max_bytes_per_commit``) cut
  its read short. Such a run records the offsets it left for later as its lag (``LakeRun.lag_records``; a
  read that was not cut short leaves none, since it reads up to the LSO it found), and no error. So a table
  with more to commit than one commit takes commits back to back until it has caught up, whatever its
  interval;
- at once when a commit was asked for (``LakeStore.request_lake_commit``), or when it has never run.
``force`` runs every topic. ``next_due_ms`` says when the next topic is due by its row, so that the loops
running rounds (``strata/loop.py``, ``strata lake run --loop``) start the next round then rather than a
whole worker interval later (its doc says what it leaves to them).

A commit asked for (``commit_requested``, set by ``POST /v1/topics/{topic}/lake/commit-now``) makes the topic
due at the next round; the request is cleared by the first run begun after it that brings the table up to
date (a commit, or nothing to commit), and stays after a failed one, which is retried at the next round.

With an observer (``pipeline/lake/metrics.py``) each run is reported with its duration, each table's
maintenance with its result, and at the end of the round the lag of every lake-enabled topic it looked at
(``storage/lake_status.py``), whether it was due or not.

What the lake costs. The round's catalog counts pyiceberg's requests into the round's meter
(``meter.py``), and the round opens a scope per topic around each step that reaches the topic's tables
(its writer's run, its table's maintenance, the drop of a deleted topic's tables); at the end of each it
records the scope's requests and the objects it wrote in the topic's ``lake_tables`` row and the totals
(``LakeStore.record_lake_usage``), where every agent reads them. When the row's stored figures are unknown
after a commit (a new table, or a table the topic has just moved to), the round measures them by listing
(``footprint.py``), in a scope of their own, so the status shows them from the first commit on.

A ``lake_tables`` row whose topic is gone (deleted, or deleted and created again) is handled under the
row's lease: the table (and its state table, if any) is purged when the old topic had
``strata.iceberg.delete.with.topic=true``, and the row forgotten. A topic whose mode went back to
``disabled`` keeps its table (it goes on from the offsets in it if enabled again); only its row goes.

After the jobs, each lake-enabled topic's table gets its maintenance (``maintenance.py``: small-file
rewrite, snapshot expiry, orphan-file cleanup) when this process has not maintained it for
``MaintenanceConfig.interval_ms`` (``--lake-maintenance-interval-ms``). The
times are this process's own, so a restarted worker maintains its tables at its first round, and several
workers each maintain every table: each step is safe to repeat and to run beside a writer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pipeline.lake.footprint import companion_tables, measure_tables
from pipeline.lake.hooks import CommitHook
from pipeline.lake.maintenance import MaintenanceConfig, MaintenanceResult, maintain_table
from pipeline.lake.meter import LakeMeter
from pipeline.lake.runs import COMMITTED, LakeRun, LakeWriterConfig
from storage.clock import Clock
from storage.errors import ClaimRefused
from storage.lake_config import LakeTopicConfig
from storage.lake_status import status_of
from storage.metadata.base import MetadataStore
from storage.metadata.lake_state import LakeClaim, LakeFootprint, LakeRunResult, LakeTableRow
from storage.metadata.rows import TopicInfo
from storage.objectstore.base import ObjectStore

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from pipeline.lake.metrics import LakeObserver
    from pipeline.lake.writer import LakeWriter

log = logging.getLogger("strata.lake")

DROPPED = "dropped with its topic"
REFUSED = "refused"
FORGOTTEN = "forgotten"


@dataclass(frozen=True, slots=True)
class LakeRoundResult:
    runs: list[LakeRun]
    removed: list[tuple[str, str]]  # (topic, DROPPED or FORGOTTEN)
    maintained: list[MaintenanceResult] = field(default_factory=list)


class LakeRound:
    """Runs the lake's jobs. ``open_catalog`` is called once, on the first round that has work; the round
    makes the catalog count its requests (``LakeMeter.attach``)."""

    def __init__(
        self,
        metadata: MetadataStore,
        store: ObjectStore,
        open_catalog: Callable[[], Catalog],
        clock: Clock,
        owner: str,
        config: LakeWriterConfig = LakeWriterConfig(),
        hook: CommitHook | None = None,
        maintenance: MaintenanceConfig | None = None,
        observer: LakeObserver | None = None,
    ) -> None:
        self.metadata = metadata
        self.observer = observer
        self.store = store
        self.clock = clock
        self.owner = owner
        self.config = config
        self.hook = hook
        self.maintenance = maintenance or MaintenanceConfig()
        self.meter = LakeMeter()
        # One round at a time: the meter's scope is the round's, and a second caller (a test beside the
        # worker loop) waits rather than mixing its requests with the first one's.
        self._running = threading.Lock()
        self._open_catalog = open_catalog
        self._writer: LakeWriter | None = None
        self._maintained_ms: dict[str, int] = {}  # topic -> when this process last maintained its table

    def writer(self) -> LakeWriter:
        if self._writer is None:
            from pipeline.lake.writer import LakeWriter

            catalog = self._open_catalog()
            self.meter.attach(catalog)
            self._writer = LakeWriter(
                self.metadata, self.store, catalog, self.clock, self.owner, self.config, self.hook
            )
        return self._writer

    def next_due_ms(self, topic: str | None = None) -> int | None:
        """When the first lake-enabled topic (or ``topic``) is due by its row (``due_at``, clock ms; 0: at
        once), or None when none is. Rows that have not run (a topic new or refused), and rows another writer
        holds, are left to the loops' interval, and a commit asked for wakes the loop itself: none of them
        makes a loop spin on a run that failed."""
        topics = [t for t in self.metadata.lake_topics() if topic is None or t.name == topic]
        if not topics:
            return None
        rows = {r.topic: r for r in self.metadata.lake_tables()}
        now = self.clock.now_ms()
        times = []
        for info in topics:
            row = rows.get(info.name)
            if row is None or row.last_run_ms is None:
                continue
            if row.lease_owner is not None and (row.lease_expires_ms or 0) > now:
                continue  # in flight elsewhere
            times.append(due_at(info, row))
        return min(times, default=None)

    def run_once(self, topic: str | None = None, force: bool = False) -> LakeRoundResult:
        with self._running:
            return self._round(topic, force)

    def _round(self, topic: str | None, force: bool) -> LakeRoundResult:
        topics = {t.name: t for t in self.metadata.lake_topics() if topic is None or t.name == topic}
        rows = {r.topic: r for r in self.metadata.lake_tables() if topic is None or r.topic == topic}
        # Rows of topics that are gone first: a topic deleted and created again must not find its
        # predecessor's row (the writer's lease would take it over).
        removed = []
        for name, row in sorted(rows.items()):
            info = topics.get(name)
            if info is None or info.created_ms != row.topic_created_ms:
                outcome = self._remove(row, self._topic_exists(name, row))
                if outcome is not None:
                    removed.append((name, outcome))
                    del rows[name]
        now = self.clock.now_ms()
        runs = [
            self._run(info)
            for name, info in sorted(topics.items())
            if force or _due(info, rows.get(name), now)
        ]
        if self.observer is not None:
            self._observe_lag(self.observer, list(topics.values()), every_topic=topic is None)
        maintained = [m for name, info in sorted(topics.items()) if (m := self._maintain(info)) is not None]
        return LakeRoundResult(runs, removed, maintained)

    def _run(self, info: TopicInfo) -> LakeRun:
        """The writer's run on the topic, metered; the table's measure when it committed and its stored
        figures are unknown."""
        table = LakeTopicConfig.from_overrides(info.name, info.configs).table
        started = self.clock.monotonic()
        with self._metered(info.name, info.created_ms, table) as metered:
            try:
                run = self.writer().run(info)
            except ClaimRefused as exc:
                log.warning("lake table of %s: %s", info.name, exc.message)
                run = LakeRun(info.name, REFUSED, error=exc.message)
        if self.observer is not None:
            self.observer.observe_run(run, self.clock.monotonic() - started)
        if run.outcome == COMMITTED and metered.stored is None:
            self._measure(info, table)
        return run

    def _measure(self, info: TopicInfo, table: str) -> None:
        """List the locations of the topic's tables, and record what they hold."""
        from pipeline.lake.writer import lake_failures

        with self._metered(info.name, info.created_ms, table) as metered:
            now = self.clock.now_ms()
            try:
                found = measure_tables(self.writer().catalog, self.store, (table, *companion_tables(table)))
            except lake_failures() as exc:
                log.warning("measuring the lake table %s failed: %s", table, exc)
                found = None
            if found is not None:
                metered.footprint = LakeFootprint(found[0], found[1], now)

    def _maintain(self, info: TopicInfo) -> MaintenanceResult | None:
        """The table's maintenance, if this process has not done it for the interval; None if not due or
        the table does not exist yet."""
        now = self.clock.now_ms()
        last = self._maintained_ms.get(info.name)
        if last is not None and now - last < self.maintenance.interval_ms:
            return None
        table = LakeTopicConfig.from_overrides(info.name, info.configs).table
        with self._metered(info.name, info.created_ms, table) as metered:
            result = maintain_table(self.writer().catalog, self.store, self.clock, self.maintenance, info)
            if result is not None and result.objects is not None and result.bytes is not None:
                metered.footprint = LakeFootprint(result.objects, result.bytes, self.clock.now_ms())
        if result is not None:
            self._maintained_ms[info.name] = now
            if self.observer is not None:
                self.observer.observe_maintenance(result)
        return result

    @contextmanager
    def _metered(self, topic: str, topic_created_ms: int, table: str) -> Iterator[_Metered]:
        """A meter scope for the topic; at its end (an error's too: the requests were sent) what it counted,
        and a footprint the block set, are recorded in the topic's row and told to the observer."""
        metered = _Metered()
        with self.meter.scope() as scope:
            try:
                yield metered
            finally:
                usage = replace(scope.usage(), footprint=metered.footprint)
                if not usage.empty:
                    now = self.clock.now_ms()
                    metered.stored = self.metadata.record_lake_usage(topic, topic_created_ms, now, usage)
                    if self.observer is not None:
                        self.observer.observe_usage(topic, table, usage, metered.stored)

    def _observe_lag(self, observer: LakeObserver, topics: list[TopicInfo], every_topic: bool) -> None:
        # No lake-enabled topic: nothing to read (the observer still drops the series of tables gone).
        rows = {r.topic: r for r in self.metadata.lake_tables()} if topics else {}
        now = self.clock.now_ms()
        observer.observe_lag([status_of(self.metadata, info, rows, now) for info in topics], every_topic)

    def _topic_exists(self, name: str, row: LakeTableRow) -> bool:
        """Whether the row's own topic (the incarnation created at ``row.topic_created_ms``) still exists,
        with its lake disabled."""
        from storage.errors import UnknownTopic

        try:
            return self.metadata.get_topic(name).created_ms == row.topic_created_ms
        except UnknownTopic:
            return False

    def _remove(self, row: LakeTableRow, topic_exists: bool) -> str | None:
        """Drop the table of a deleted topic (if it asked for that) and forget the row, under its lease."""
        claim = LakeClaim(
            row.topic, row.table_identifier, row.mode, row.delete_with_topic, row.topic_created_ms
        )
        if (
            self.metadata.lease_lake_table(claim, self.owner, self.clock.now_ms(), self.config.lease_ms)
            is None
        ):
            return None
        outcome = FORGOTTEN
        if row.delete_with_topic and not topic_exists:
            with self._metered(row.topic, row.topic_created_ms, row.table_identifier):
                error = self._drop(row)
            if error is not None:
                log.warning("dropping the lake table %s failed: %s", row.table_identifier, error)
                self.metadata.finish_lake_run(
                    row.topic, self.owner, self.clock.now_ms(), LakeRunResult(None, None, None, 0, error)
                )
                return None
            outcome = DROPPED
        self.metadata.forget_lake_table(row.topic, row.topic_created_ms)
        return outcome

    def _drop(self, row: LakeTableRow) -> str | None:
        """Purge the row's table, its dead-letter and state tables; the error, if it failed."""
        from pyiceberg.exceptions import NoSuchTableError

        from pipeline.lake.dead_letters import purge_dead_letters
        from pipeline.lake.state_writer import state_table_name
        from pipeline.lake.writer import lake_failures

        catalog = self.writer().catalog
        try:
            purge_dead_letters(catalog, row.table_identifier, row.topic, row.topic_created_ms)
            # The state table too (a topic with upsert on has one; for others there is none).
            for identifier in (row.table_identifier, state_table_name(row.table_identifier)):
                try:
                    catalog.purge_table(identifier)
                except NoSuchTableError:
                    pass
        except lake_failures() as exc:
            return str(exc)
        return None

    def close(self) -> None:
        if self._writer is not None:
            engine = getattr(self._writer.catalog, "engine", None)
            if engine is not None:
                engine.dispose()
            self._writer = None


@dataclass(slots=True)
class _Metered:
    """A meter scope's extras: the footprint its block measured, and the stored figures recorded after."""

    footprint: LakeFootprint | None = None
    stored: LakeFootprint | None = None


def _due(info: TopicInfo, row: LakeTableRow | None, now: int) -> bool:
    if row is None or row.last_run_ms is None or row.commit_requested:
        return True
    return due_at(info, row) <= now


def due_at(info: TopicInfo, row: LakeTableRow) -> int:
    """When the topic of a row that has run is due by its interval (clock ms; 0: at once, behind), the
    module's doc says why."""
    if row.last_run_ms is None or behind(row):
        return 0
    return row.last_run_ms + LakeTopicConfig.from_overrides(info.name, info.configs).commit_interval_ms


def behind(row: LakeTableRow) -> bool:
    """Whether the row's last run left more than one commit takes: a lag, which only a read the byte cap
    cut short leaves, and no error (a failed run keeps the lag it found, and waits for its interval). A run
    that lost its commit race counts too: the winner committed what it read, and no more."""
    return row.lag_records > 0 and row.error is None
