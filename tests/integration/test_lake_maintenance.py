"""The lake's retention hold and table maintenance, end to end on a real agent (SQLite with a local directory,
and PostgreSQL with moto S3), read back by DuckDB and pyiceberg.

- Retention hold (planner/lake_hold.py): with a tiny ``retention.ms``, the log start does not pass what the
  table has committed until the hold has passed (retention's clock is injected); then it does, and the
  writer's next commit reports the gap in the table's status and in ``strata_lake_gap_records_total``. The
  table's rows stay those of the topic.
- Maintenance (pipeline/lake/maintenance.py): after several commits and a writer that crashed between its
  upload and its commit, the crashed writer's Parquet file is kept within the orphan grace and deleted
  after it; snapshot expiry then drops the snapshots and their files, keeps the one carrying
  ``strata.offsets``, and DuckDB's rows stay the same; the writer goes on from the same offsets.
- Small-file rewrite (pipeline/lake/rewrite.py): a closed partition's files become one, with the same rows
  and offsets; a rewrite that loses a commit race to the writer commits nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest

from pipeline.lake.maintenance import MaintenanceConfig
from pipeline.lake.offsets import OFFSETS_PROPERTY, committed_offsets
from pipeline.lake.rewrite import RewriteConfig, rewrite_partition, small_partitions
from pipeline.lake.round import LakeRound
from pipeline.lake.runs import COMMITTED, FAILED
from pipeline.lake.writer import LakeWriter
from planner.retention import Retention
from storage.clock import ManualClock, SystemClock
from storage.errors import Unavailable
from storage.lake_config import default_table
from tests.fixtures.metadata import isolated_postgres_schema
from tests.fixtures.server import RunningServer, local_settings, run_server, s3_postgres_settings
from tests.integration.lake_readers import duckdb_rows, pyiceberg_rows

pytestmark = pytest.mark.integration

HOLD_MS = 600_000
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
GAP_METRIC = "strata_lake_gap_records_total"


@dataclass
class Lake:
    server: RunningServer
    s3_endpoint: str | None

    @property
    def runtime(self) -> Any:
        return self.server.runtime

    def catalog(self) -> Any:
        return self.runtime.lake_round().writer().catalog

    def table(self, topic: str) -> Any:
        return self.catalog().load_table(default_table(topic))

    def run(self, topic: str) -> Any:
        (run,) = self.runtime.lake_round().run_once(topic, force=True).runs
        return run

    def produce(self, topic: str, values: list[str]) -> None:
        response = self.server.produce(topic, [{"key": v, "value": v} for v in values])
        assert response.status_code == 200, response.text

    def duck(self, topic: str) -> list[Any]:
        return duckdb_rows(self.table(topic).metadata_location, self.s3_endpoint)

    def log_start(self, topic: str) -> int:
        (state,) = self.runtime.metadata.partition_states(topic)
        return int(state.log_start_offset)

    def objects(self, topic: str) -> set[str]:
        """The object keys under the table's location."""
        location = self.table(topic).location().rstrip("/")
        name = location.rsplit("/", 2)
        prefix = f"lake/{name[-2]}/{name[-1]}/"
        return {o.key for o in self.runtime.store.list(prefix)}


@pytest.fixture(scope="module", params=["local-sqlite", "s3-postgres"])
def lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    tmp = tmp_path_factory.mktemp("lake-maintenance")
    with ExitStack() as stack:
        if request.param == "local-sqlite":
            settings, endpoint = local_settings(tmp), None
        else:
            endpoint = request.getfixturevalue("moto_server")
            bucket = f"strata-lake-{uuid.uuid4().hex[:16]}"
            request.getfixturevalue("moto_admin_client").create_bucket(Bucket=bucket)
            url = stack.enter_context(isolated_postgres_schema(request.getfixturevalue("postgres_url")))
            settings = s3_postgres_settings(tmp, endpoint, bucket, url)
        server = stack.enter_context(run_server(settings))
        yield Lake(server, endpoint)


def test_retention_waits_for_the_table_until_the_hold_passes(lake: Lake) -> None:
    topic = "held"
    configs = {
        "strata.iceberg.mode": "raw",
        "retention.ms": "1000",
        "strata.iceberg.max.retention.hold.ms": str(HOLD_MS),
    }
    lake.server.create_topic(topic, 1, **configs)
    start = SystemClock().now_ms()
    lake.produce(topic, [f"a{i}" for i in range(5)])
    assert lake.run(topic).outcome == COMMITTED  # the table has 0..4
    lake.produce(topic, [f"b{i}" for i in range(5)])
    chunks = [
        (c.chunk.base_offset, c.chunk.last_offset) for c in lake.runtime.metadata.partition_chunks(topic, 0)
    ]
    assert chunks == [(0, 4), (5, 9)]
    committed_rows = lake.duck(topic)

    # Every record is past retention.ms: the committed chunk goes, the uncommitted one is held.
    produced_b = SystemClock().now_ms()
    Retention(lake.runtime.metadata, ManualClock(produced_b + 5_000)).run_once()
    assert lake.log_start(topic) == 5
    assert lake.duck(topic) == committed_rows
    # b's hold ends HOLD_MS after its retention did, at the earliest start + 1000 + HOLD_MS.
    Retention(lake.runtime.metadata, ManualClock(start + HOLD_MS)).run_once()
    assert lake.log_start(topic) == 5
    run = lake.run(topic)
    assert (run.outcome, dict(run.offsets), run.rows, run.error) == (COMMITTED, {0: 10}, 5, None)
    rows = pyiceberg_rows(lake.table(topic))
    assert [(r[1], r[3]) for r in rows] == [(i, f"{'ab'[i // 5]}{i % 5}".encode()) for i in range(10)]
    assert lake.duck(topic) == rows

    # A table that stops committing: held until the hold has passed, then retention wins.
    before_c = SystemClock().now_ms()
    lake.produce(topic, [f"c{i}" for i in range(5)])
    produced_c = SystemClock().now_ms()
    before = lake.runtime.metrics.registry.get_sample_value(GAP_METRIC) or 0.0
    Retention(lake.runtime.metadata, ManualClock(produced_c + 5_000)).run_once()
    assert lake.log_start(topic) == 10
    Retention(lake.runtime.metadata, ManualClock(before_c + 1_000 + HOLD_MS - 1)).run_once()
    assert lake.log_start(topic) == 10
    Retention(lake.runtime.metadata, ManualClock(produced_c + 1_000 + HOLD_MS + 1)).run_once()
    assert lake.log_start(topic) == 15
    gapped = lake.run(topic)
    assert (gapped.outcome, dict(gapped.offsets), gapped.rows) == (COMMITTED, {0: 15}, 0)
    assert gapped.error == "records deleted before the table had them: partition 0 [10, 15)"
    assert gapped.gap_records == 5
    (row,) = [r for r in lake.runtime.metadata.lake_tables() if r.topic == topic]
    assert row.error == gapped.error
    assert lake.runtime.metrics.registry.get_sample_value(GAP_METRIC) == before + 5
    assert lake.duck(topic) == rows  # the table's rows are unchanged: the gap is only missing rows


class CrashBeforeCommit:
    def before_commit(self, topic: str, table: Any) -> None:
        raise Unavailable("injected: the writer stops between the upload and the catalog commit")

    def after_commit(self, topic: str, table: Any) -> None:
        pass


def maintenance_round(lake: Lake, now_ms: int, grace_ms: int = HOUR_MS, min_files: int = 8) -> Any:
    config = MaintenanceConfig(HOUR_MS, grace_ms, RewriteConfig(min_files=min_files))
    return LakeRound(
        lake.runtime.metadata,
        lake.runtime.store,
        lake.catalog,
        ManualClock(now_ms),
        "maintainer",
        maintenance=config,
    )


def data_files(table: Any) -> list[tuple[Any, str]]:
    """(partition, path) of the current snapshot's data files."""
    files = table.inspect.files().select(["content", "partition", "file_path"]).to_pylist()
    return sorted((str(f["partition"]), f["file_path"]) for f in files if f["content"] == 0)


def test_expiry_and_orphan_cleanup_keep_the_rows(lake: Lake) -> None:
    topic = "maintained"
    lake.server.create_topic(topic, 2, **{"strata.iceberg.mode": "raw"})
    registry = lake.runtime.metrics.registry
    for n in range(4):
        lake.produce(topic, [f"r{n}-{i}" for i in range(6)])
        assert lake.run(topic).outcome == COMMITTED
        if n == 0:  # the process's round maintained the new table after its first commit
            table_objects = registry.get_sample_value(
                "strata_lake_table_objects", {"table": "strata.maintained"}
            )
            assert table_objects == len(lake.objects(topic))
    before_crash = {k for k in lake.objects(topic) if k.endswith(".parquet")}
    lake.produce(topic, [f"r4-{i}" for i in range(6)])
    info = lake.runtime.metadata.get_topic(topic)
    crashed = LakeWriter(
        lake.runtime.metadata,
        lake.runtime.store,
        lake.catalog(),
        SystemClock(),
        "crashing",
        hook=CrashBeforeCommit(),
    ).run(info)
    assert crashed.outcome == FAILED
    orphans = {k for k in lake.objects(topic) if k.endswith(".parquet")} - before_crash
    assert orphans  # the crashed writer's upload, which no snapshot names
    assert lake.run(topic).outcome == COMMITTED
    table = lake.table(topic)
    rows = lake.duck(topic)
    assert len(rows) == 30
    offsets = committed_offsets(table)
    assert len(table.snapshots()) == 5
    objects = lake.objects(topic)
    now = SystemClock().now_ms()

    # Within the grace: nothing goes. The round maintains once per interval.
    round_ = maintenance_round(lake, now + 60_000)
    (result,) = round_.run_once(topic).maintained
    assert (result.snapshots_expired, result.orphans_deleted, result.error) == (0, 0, None)
    assert lake.objects(topic) == objects
    assert round_.run_once(topic).maintained == []

    # Past the grace: the crashed writer's files go, and nothing a snapshot names.
    (result,) = maintenance_round(lake, now + 2 * HOUR_MS).run_once(topic).maintained
    assert (result.snapshots_expired, result.error) == (0, None)
    assert result.orphans_deleted >= len(orphans)
    left = lake.objects(topic)
    assert not orphans & left
    assert len(objects - left) == result.orphans_deleted
    assert result.objects == len(left)
    assert result.bytes == sum(o.size for o in lake.runtime.store.list("lake/") if o.key in left)
    assert lake.duck(topic) == rows

    # A snapshot that carries no offsets on top (another tool's): expiry keeps the one that does.
    table = lake.table(topic)
    table.append(table.scan(row_filter="offset < 0").to_arrow())
    table = lake.table(topic)
    assert table.current_snapshot().summary.get(OFFSETS_PROPERTY) is None
    assert committed_offsets(table)[0] == offsets[0]

    # Past the snapshot retention (7 days): the snapshots and their files go, the rows stay.
    (result,) = maintenance_round(lake, now + 8 * DAY_MS).run_once(topic).maintained
    assert (result.snapshots_expired, result.error) == (4, None)
    table = lake.table(topic)
    assert len(table.snapshots()) == 2
    assert committed_offsets(table) == offsets
    assert len(lake.objects(topic)) < len(left)
    assert lake.duck(topic) == rows
    assert sorted(pyiceberg_rows(table)) == rows

    # The writer goes on from the same offsets.
    lake.produce(topic, [f"r5-{i}" for i in range(6)])
    run = lake.run(topic)
    assert run.outcome == COMMITTED
    assert run.rows == 6
    assert len(lake.duck(topic)) == 36


def test_small_files_of_closed_partitions_are_rewritten_with_the_offsets(lake: Lake) -> None:
    topic = "rewritten"
    lake.server.create_topic(topic, 2, **{"strata.iceberg.mode": "raw"})
    for n in range(6):
        lake.produce(topic, [f"r{n}-{i}" for i in range(4)])
        assert lake.run(topic).outcome == COMMITTED
    table = lake.table(topic)
    small = data_files(table)
    partitions = {p for p, _ in small}
    assert len(small) == 6
    rows = lake.duck(topic)
    offsets = committed_offsets(table)
    now = SystemClock().now_ms()

    # Today's partition is still open: left alone.
    (result,) = maintenance_round(lake, now, min_files=4).run_once(topic).maintained
    assert (result.partitions_rewritten, result.error) == (0, None)
    assert data_files(lake.table(topic)) == small

    # Two days on, it is closed: one file per partition, the same rows and offsets.
    (result,) = maintenance_round(lake, now + 2 * DAY_MS, min_files=4).run_once(topic).maintained
    assert (result.partitions_rewritten, result.error) == (len(partitions), None)
    table = lake.table(topic)
    rewritten = data_files(table)
    assert {p for p, _ in rewritten} == partitions
    assert len(rewritten) == len(partitions)
    assert table.current_snapshot().summary.get(OFFSETS_PROPERTY) is not None
    assert committed_offsets(table)[0] == offsets[0]
    assert lake.duck(topic) == rows

    # The writer goes on; once the old snapshots expire, the small files are deleted.
    lake.produce(topic, [f"r6-{i}" for i in range(4)])
    run = lake.run(topic)
    assert (run.outcome, run.rows) == (COMMITTED, 4)
    assert len(lake.duck(topic)) == len(rows) + 4
    (result,) = maintenance_round(lake, now + 9 * DAY_MS, min_files=4).run_once(topic).maintained
    assert result.error is None
    assert result.snapshots_expired > 0
    left = lake.objects(topic)
    assert not {path.rsplit("/", 1)[-1] for _, path in small} & {k.rsplit("/", 1)[-1] for k in left}
    assert len(lake.duck(topic)) == len(rows) + 4


def test_a_table_whose_snapshot_has_no_files_is_maintained(lake: Lake) -> None:
    """A topic enabled before its first record: the first run commits an empty snapshot carrying the
    starting offsets (no manifests at all), and maintenance of that table succeeds, today and once the
    day is closed."""
    topic = "empty-first"
    lake.server.create_topic(topic, 2, **{"strata.iceberg.mode": "raw"})
    assert lake.run(topic).outcome == COMMITTED
    table = lake.table(topic)
    assert table.current_snapshot() is not None
    assert not table.current_snapshot().manifests(table.io)
    now = SystemClock().now_ms()
    for at in (now, now + 2 * DAY_MS):
        (result,) = maintenance_round(lake, at, min_files=1).run_once(topic).maintained
        assert (result.error, result.partitions_rewritten) == (None, 0)
    lake.produce(topic, ["a", "b"])
    assert lake.run(topic).outcome == COMMITTED
    (result,) = maintenance_round(lake, now, min_files=1).run_once(topic).maintained
    assert result.error is None
    assert len(lake.duck(topic)) == 2


def test_a_rewrite_that_loses_to_a_writer_commits_nothing(lake: Lake) -> None:
    """The rewrite reads the partition at the snapshot it loaded and may commit only on that snapshot: a
    writer's commit in between makes it fail, and the writer's rows are neither lost nor doubled."""
    from pyiceberg.exceptions import CommitFailedException

    topic = "rewrite-raced"
    lake.server.create_topic(topic, 1, **{"strata.iceberg.mode": "raw"})
    for n in range(2):
        lake.produce(topic, [f"r{n}-{i}" for i in range(3)])
        assert lake.run(topic).outcome == COMMITTED
    stale = lake.table(topic)
    (span,) = small_partitions(stale, SystemClock().now_ms() + 2 * DAY_MS, RewriteConfig(min_files=2))
    lake.produce(topic, [f"r2-{i}" for i in range(3)])
    assert lake.run(topic).outcome == COMMITTED
    rows = lake.duck(topic)
    with pytest.raises(CommitFailedException):
        rewrite_partition(stale, *span)
    assert lake.duck(topic) == rows
    assert [r[1] for r in rows] == list(range(9))
    assert len(data_files(lake.table(topic))) == 3
