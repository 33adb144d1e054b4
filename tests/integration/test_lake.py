"""Topics as Iceberg tables, end to end (pipeline/lake): records produced over Kafka (confluent-kafka, with
compressed batches) and HTTP, committed by the lake writer, and read back by three independent Iceberg
readers (DuckDB, iceberg-rust through DataFusion, pyiceberg), which must each give exactly the rows of
``read_topic`` (Strata's Spark reader) over the committed offsets. On SQLite with a local directory, and on
PostgreSQL with moto S3.

A commit larger than the writer's write buffer is read and written in pieces, and is still one snapshot.

Exactly once: a failure after the Parquet upload and before the catalog commit, a commit whose success the
writer never learns, and two writers racing for one table each leave count(*) equal to the count of
distinct (partition, offset), with no gap; so does a writer process killed between the two, after its lease
ran out and ``strata lake run`` took over.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Producer

from pipeline import read_topic
from pipeline.lake.offsets import committed_offsets
from pipeline.lake.round import DROPPED
from pipeline.lake.runs import COMMITTED, FAILED, LOST_RACE, UP_TO_DATE, LakeWriterConfig
from pipeline.lake.writer import LakeWriter
from storage.clock import SystemClock
from storage.errors import Unavailable
from storage.lake_catalog import open_catalog
from storage.lake_config import default_table
from strata.cli import main as cli_main
from strata.settings import Settings
from tests.fixtures.metadata import isolated_postgres_schema
from tests.fixtures.server import RunningServer, local_settings, run_server, s3_postgres_settings
from tests.integration.lake_readers import (
    Row,
    datafusion_rows,
    duckdb_counts,
    duckdb_rows,
    pyiceberg_rows,
    rows_of,
)

pytestmark = pytest.mark.integration


@dataclass
class Lake:
    server: RunningServer
    settings: Settings
    s3_endpoint: str | None

    @property
    def runtime(self) -> Any:
        return self.server.runtime

    def catalog(self) -> Any:
        return self.runtime.lake_round().writer().catalog

    def table(self, topic: str) -> Any:
        return self.catalog().load_table(default_table(topic))

    def create_topic(self, name: str, partitions: int, **configs: str) -> None:
        self.server.create_topic(name, partitions, **{"strata.iceberg.mode": "raw", **configs})

    def run(self, topic: str) -> Any:
        """One forced lake round for ``topic``: its one run."""
        (run,) = self.runtime.lake_round().run_once(topic, force=True).runs
        return run


@pytest.fixture(scope="module", params=["local-sqlite", "s3-postgres"])
def lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    """One agent per backend pair for the whole module; each test uses topics of its own."""
    tmp = tmp_path_factory.mktemp("lake")
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
        yield Lake(server, settings, endpoint)


def produce_both_doors(lake: Lake, topic: str, partitions: int, round_: int) -> None:
    """Keys, null keys and values, headers (one with a null value), every partition, compressed batches
    (each codec in turn) over Kafka, and plain records over HTTP."""
    for codec in ("lz4", "gzip", "zstd", "snappy"):
        producer = Producer(
            {"bootstrap.servers": lake.server.kafka_bootstrap, "compression.type": codec, "linger.ms": 20}
        )
        for i in range(30):
            partition = i % partitions
            key = None if i % 7 == 0 else f"k{round_}-{i % 5}".encode()
            value = None if i % 11 == 0 else f"{codec}-{round_}-{i}".encode() * (1 + i % 3)
            headers = [("source", b"kafka"), ("n", str(i).encode())] if i % 2 else [("empty", None)]
            producer.produce(topic, value=value, key=key, partition=partition, headers=headers)
        assert producer.flush(30) == 0
    records: list[dict[str, Any]] = [
        {"key": None if i % 4 == 0 else f"http-{i}", "value": f"v{round_}-{i}", "partition": i % partitions}
        for i in range(20)
    ]
    records[1]["headers"] = [{"name": "trace", "value": "abc"}]
    records[2]["value"] = None
    response = lake.server.produce(topic, records)
    assert response.status_code == 200, response.text


def topic_rows(spark: Any, lake: Lake, topic: str, offsets: dict[int, int]) -> list[Row]:
    """``read_topic`` over [0, offsets) of each partition: the oracle."""
    df = read_topic(
        spark,
        lake.settings.metadata_url,
        lake.settings.bucket_url,
        assign=json.dumps({topic: sorted(offsets)}),
        startingOffsets=json.dumps({topic: {str(p): -2 for p in offsets}}),
        endingOffsets=json.dumps({topic: {str(p): o for p, o in offsets.items()}}),
        includeHeaders="true",
    )
    return rows_of(df.toArrow())


def stable_offsets(lake: Lake, topic: str) -> dict[int, int]:
    return {s.partition: s.last_stable_offset for s in lake.runtime.metadata.partition_states(topic)}


def assert_readers_agree(lake: Lake, topic: str, expected: list[Row]) -> None:
    table = lake.table(topic)
    assert duckdb_rows(table.metadata_location, lake.s3_endpoint) == expected
    assert datafusion_rows(table, s3=lake.s3_endpoint is not None) == expected
    assert pyiceberg_rows(table) == expected


def assert_exactly_once(lake: Lake, topic: str) -> None:
    """count(*) = distinct (partition, offset), and each partition's offsets are the topic's, no gap."""
    table = lake.table(topic)
    total, distinct = duckdb_counts(table.metadata_location, lake.s3_endpoint)
    assert total == distinct
    offsets, _ = committed_offsets(table)
    rows = pyiceberg_rows(table)
    for partition, end in offsets.items():
        # Plain producers: no holes in these topics, so the offsets are exactly 0..end-1.
        assert [r[1] for r in rows if r[0] == partition] == list(range(end))


def test_the_raw_table_equals_the_topic(lake: Lake, spark: Any) -> None:
    topic = "orders.raw-1"
    spec = "(day(timestamp))" if lake.s3_endpoint is None else "(hour(timestamp), bucket(4, key))"
    lake.create_topic(topic, 3, **{"strata.iceberg.partition.spec": spec})
    for round_ in (1, 2):
        produce_both_doors(lake, topic, 3, round_)
        run = lake.run(topic)
        assert run.outcome == COMMITTED, run.error
        stable = stable_offsets(lake, topic)
        assert dict(run.offsets) == stable
        assert run.lag_records == 0
        table = lake.table(topic)
        assert committed_offsets(table)[0] == stable
        expected = topic_rows(spark, lake, topic, stable)
        assert len(expected) == sum(stable.values()) == 140 * round_
        assert_readers_agree(lake, topic, expected)
    assert len(table.snapshots()) == 2
    assert table.properties["commit.retry.num-retries"] == "0"
    assert lake.run(topic).outcome == UP_TO_DATE  # nothing new: no snapshot
    assert len(lake.table(topic).snapshots()) == 2
    (row,) = [r for r in lake.runtime.metadata.lake_tables() if r.topic == topic]
    assert (row.table_identifier, dict(row.committed_offsets), row.error) == (
        "strata.orders_raw_1",
        stable,
        None,
    )


def test_the_table_holds_committed_transactions_up_to_the_lso(lake: Lake, spark: Any) -> None:
    topic = "txn-raw"
    lake.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": lake.server.kafka_bootstrap, "transactional.id": "lake-txn"})
    producer.init_transactions(30)
    for values, end in ((["a1", "b1"], "commit"), (["aborted"], "abort"), (["b2"], "commit"), (["open"], "")):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, key=b"k", value=value.encode(), partition=0)
        producer.flush(30)
        if end == "commit":
            producer.commit_transaction(30)
        elif end == "abort":
            producer.abort_transaction(30)
    # 0, 1 committed, marker 2; 3 aborted, marker 4; 5 committed, marker 6; 7 open: the LSO is 7.
    run = lake.run(topic)
    assert (run.outcome, dict(run.offsets), run.rows) == (COMMITTED, {0: 7}, 3)
    assert pyiceberg_rows(lake.table(topic)) == topic_rows(spark, lake, topic, {0: 7})
    producer.commit_transaction(30)
    run = lake.run(topic)
    assert (run.outcome, dict(run.offsets), run.rows) == (COMMITTED, {0: 9}, 1)
    expected = topic_rows(spark, lake, topic, {0: 9})
    assert [(r[1], r[3]) for r in expected] == [(0, b"a1"), (1, b"b1"), (5, b"b2"), (7, b"open")]
    assert_readers_agree(lake, topic, expected)


def test_from_now_and_a_byte_cap_still_commit_each_record_once(lake: Lake) -> None:
    # from_now: what the topic held before the first commit stays out; that start is committed at once.
    topic = "from-now"
    lake.create_topic(topic, 2, **{"strata.iceberg.backfill": "from_now"})
    produce_both_doors(lake, topic, 2, 1)
    before = stable_offsets(lake, topic)
    first = lake.run(topic)
    assert (first.outcome, first.rows, dict(first.offsets)) == (COMMITTED, 0, before)
    produce_both_doors(lake, topic, 2, 2)
    assert lake.run(topic).rows == 140
    rows = pyiceberg_rows(lake.table(topic))
    assert [r[1] for r in rows if r[0] == 0] == list(range(before[0], stable_offsets(lake, topic)[0]))
    # A cap below one chunk: one chunk per commit, partitions in turn, until the table is up to date.
    capped = "capped"
    lake.create_topic(capped, 2)
    produce_both_doors(lake, capped, 2, 1)  # five sends (four codecs, HTTP): several chunks per partition
    info = lake.runtime.metadata.get_topic(capped)
    small = LakeWriter(
        lake.runtime.metadata,
        lake.runtime.store,
        lake.catalog(),
        SystemClock(),
        "small",
        LakeWriterConfig(max_bytes_per_commit=1),
    )
    outcomes = []
    while not outcomes or outcomes[-1] != UP_TO_DATE:
        run = small.run(info)
        outcomes.append(run.outcome)
        assert len(outcomes) < 100, "the capped writer makes no progress"
    assert outcomes.count(COMMITTED) > 2
    assert dict(run.offsets) == stable_offsets(lake, capped)
    assert_exactly_once(lake, capped)
    assert len(pyiceberg_rows(lake.table(capped))) == 140


def test_a_commit_larger_than_the_write_buffer_is_one_snapshot_of_several_files(
    lake: Lake, spark: Any
) -> None:
    topic = "pieces"
    lake.create_topic(topic, 3)
    produce_both_doors(lake, topic, 3, 1)  # five sends (four codecs, HTTP): several objects to read
    info = lake.runtime.metadata.get_topic(topic)
    # A write buffer of one byte: each span of the read (one object's chunks) is a piece of its own,
    # written as data files before the next one is read.
    tiny = LakeWriter(
        lake.runtime.metadata,
        lake.runtime.store,
        lake.catalog(),
        SystemClock(),
        "tiny",
        LakeWriterConfig(write_buffer_bytes=1),
    )
    run = tiny.run(info)
    assert run.outcome == COMMITTED, run.error
    stable = stable_offsets(lake, topic)
    assert (dict(run.offsets), run.rows, run.lag_records) == (stable, 140, 0)
    table = lake.table(topic)
    (snapshot,) = table.snapshots()  # one commit, one snapshot, however many pieces
    files = list(table.scan().plan_files())
    assert len(files) > 3
    assert int(snapshot.summary["added-data-files"]) == len(files)
    assert committed_offsets(table) == (stable, snapshot.snapshot_id)
    expected = topic_rows(spark, lake, topic, stable)
    assert len(expected) == 140
    assert_readers_agree(lake, topic, expected)
    assert_exactly_once(lake, topic)


def test_records_deleted_before_the_table_had_them_are_reported(lake: Lake) -> None:
    topic = "gapped"
    lake.create_topic(topic, 1)
    assert lake.server.produce(topic, [{"value": f"v{i}"} for i in range(5)]).status_code == 200
    assert lake.run(topic).outcome == COMMITTED  # the table has 0..4
    assert lake.server.produce(topic, [{"value": f"w{i}"} for i in range(5)]).status_code == 200
    deleted = lake.server.client.delete(
        f"/v1/topics/{topic}/partitions/0/records", params={"before_offset": 7}
    )
    assert deleted.status_code == 200, deleted.text
    run = lake.run(topic)
    assert (run.outcome, dict(run.offsets), run.rows) == (COMMITTED, {0: 10}, 3)
    assert run.error == "records deleted before the table had them: partition 0 [5, 7)"
    (row,) = [r for r in lake.runtime.metadata.lake_tables() if r.topic == topic]
    assert row.error == run.error
    assert [r[1] for r in pyiceberg_rows(lake.table(topic))] == [0, 1, 2, 3, 4, 7, 8, 9]


class FailingHook:
    """Fails the run at one point of the commit: ``before`` (files uploaded, catalog not yet committed) or
    ``after`` (committed, but the writer never learns it)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def before_commit(self, topic: str, table: Any) -> None:
        if self.where == "before":
            raise Unavailable("injected: the writer stops between the upload and the catalog commit")

    def after_commit(self, topic: str, table: Any) -> None:
        if self.where == "after":
            raise Unavailable("injected: the commit's answer is lost")


def writer(lake: Lake, owner: str, hook: Any = None, clock: Any = None) -> LakeWriter:
    return LakeWriter(
        lake.runtime.metadata, lake.runtime.store, lake.catalog(), clock or SystemClock(), owner, hook=hook
    )


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_failed_commit_then_a_rerun_commits_each_record_once(lake: Lake, where: str) -> None:
    topic = f"crash-{where}"
    lake.create_topic(topic, 2)
    produce_both_doors(lake, topic, 2, 1)
    assert lake.run(topic).outcome == COMMITTED
    first = lake.table(topic).current_snapshot().snapshot_id
    produce_both_doors(lake, topic, 2, 2)
    info = lake.runtime.metadata.get_topic(topic)
    failed = writer(lake, "crashing", FailingHook(where)).run(info)
    assert failed.outcome == FAILED
    assert "injected" in (failed.error or "")
    (row,) = [r for r in lake.runtime.metadata.lake_tables() if r.topic == topic]
    assert row.error == failed.error
    assert row.lease_owner is None
    landed = lake.table(topic).current_snapshot().snapshot_id != first
    assert landed == (where == "after")
    rerun = lake.run(topic)
    assert rerun.outcome == (UP_TO_DATE if where == "after" else COMMITTED)
    assert dict(rerun.offsets) == stable_offsets(lake, topic)
    assert_exactly_once(lake, topic)
    assert len(pyiceberg_rows(lake.table(topic))) == 2 * 140


class RaceHook:
    """Runs a second writer, whose clock is past the first one's lease, in the first one's commit window:
    both read the same snapshot and offsets, and the second commits first."""

    def __init__(self, rival: LakeWriter, info: Any) -> None:
        self.rival = rival
        self.info = info
        self.rival_runs: list[Any] = []

    def before_commit(self, topic: str, table: Any) -> None:
        if not self.rival_runs:
            self.rival_runs.append(self.rival.run(self.info))

    def after_commit(self, topic: str, table: Any) -> None:
        pass


class SkewedClock(SystemClock):
    def now_ms(self) -> int:
        return super().now_ms() + 10 * 60_000


def test_two_writers_racing_for_one_table_commit_each_record_once(lake: Lake) -> None:
    topic = "raced"
    lake.create_topic(topic, 3)
    produce_both_doors(lake, topic, 3, 1)
    info = lake.runtime.metadata.get_topic(topic)
    hook = RaceHook(writer(lake, "rival", clock=SkewedClock()), info)
    loser = writer(lake, "first", hook).run(info)
    (won,) = hook.rival_runs
    assert won.outcome == COMMITTED
    assert loser.outcome == LOST_RACE
    assert dict(loser.offsets) == dict(won.offsets) == stable_offsets(lake, topic)
    table = lake.table(topic)
    assert len(table.snapshots()) == 1
    assert_exactly_once(lake, topic)
    # Then two writers one after the other: the second finds nothing new.
    produce_both_doors(lake, topic, 3, 2)
    runs = [writer(lake, f"w{i}").run(info) for i in range(2)]
    assert [r.outcome for r in runs] == [COMMITTED, UP_TO_DATE]
    assert_exactly_once(lake, topic)


def test_a_writer_killed_mid_job_leaves_no_duplicate(lake: Lake, capsys: pytest.CaptureFixture[str]) -> None:
    topic = "killed"
    lake.create_topic(topic, 2)
    produce_both_doors(lake, topic, 2, 1)
    assert lake.run(topic).outcome == COMMITTED
    produce_both_doors(lake, topic, 2, 2)
    settings = lake.settings
    child = {
        "metadata": settings.metadata_url,
        "bucket": settings.bucket_url,
        "s3_endpoint": settings.s3_endpoint,
        "topic": topic,
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.lake_child", json.dumps(child)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode(errors="replace")[-2000:]
    assert done.stdout == b"killing\n"
    (row,) = [r for r in lake.runtime.metadata.lake_tables() if r.topic == topic]
    assert row.lease_owner == "doomed"  # held by a dead writer until it expires
    assert row.lease_expires_ms is not None
    assert row.lease_expires_ms > time.time() * 1000 + 1000
    flags = [
        "--metadata",
        settings.metadata_url,
        "--bucket",
        settings.bucket_url,
        "--data-dir",
        settings.data_dir,
    ]
    if settings.s3_endpoint is not None:
        flags += ["--s3-endpoint", settings.s3_endpoint]
    capsys.readouterr()
    assert cli_main(["lake", "run", "--topic", topic, "--force", *flags]) == 0
    assert capsys.readouterr().out.startswith(f"{topic}: leased by another writer")
    time.sleep(max(0.0, (row.lease_expires_ms - time.time() * 1000) / 1000) + 0.3)
    assert cli_main(["lake", "run", "--topic", topic, "--force", *flags]) == 0
    assert capsys.readouterr().out.startswith(f"{topic}: committed, 140 rows")
    assert_exactly_once(lake, topic)
    assert len(pyiceberg_rows(lake.table(topic))) == 2 * 140


def test_deleting_the_topic_drops_its_table(lake: Lake) -> None:
    from pyiceberg.exceptions import NoSuchTableError

    lake.create_topic("dropped", 1)
    lake.create_topic("kept", 1, **{"strata.iceberg.delete.with.topic": "false"})
    for topic in ("dropped", "kept"):
        assert lake.server.produce(topic, [{"value": "x"}]).status_code == 200
        assert lake.run(topic).outcome == COMMITTED
        assert lake.server.client.delete(f"/v1/topics/{topic}").status_code == 204
    result = lake.runtime.lake_round().run_once()
    assert sorted(result.removed) == [("dropped", DROPPED), ("kept", "forgotten")]
    with pytest.raises(NoSuchTableError):
        lake.table("dropped")
    assert len(pyiceberg_rows(lake.table("kept"))) == 1
    assert not [r for r in lake.runtime.metadata.lake_tables() if r.topic in ("dropped", "kept")]


def test_the_worker_loop_commits_enabled_topics(tmp_path: Any) -> None:
    settings = local_settings(tmp_path, worker_interval_ms=100)
    with run_server(settings, with_worker=True) as server:
        # The worker may run before the produce: its first run then commits the empty start, and the
        # records wait for the next interval (the shortest allowed), well inside the deadline.
        interval = {"strata.iceberg.commit.interval.ms": "10000"}
        server.create_topic("looped", 2, **{"strata.iceberg.mode": "raw", **interval})
        assert (
            server.produce("looped", [{"key": f"k{i}", "value": "v"} for i in range(10)]).status_code == 200
        )
        catalog = open_catalog(settings.metadata_url, settings.bucket_url)
        deadline = time.monotonic() + 60
        while True:
            rows: list[Row] = []
            if catalog.table_exists("strata.looped"):
                rows = pyiceberg_rows(catalog.load_table("strata.looped"))
            if len(rows) == 10 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        catalog.engine.dispose()
        assert len(rows) == 10
