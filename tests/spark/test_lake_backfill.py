"""``strata lake backfill`` end to end in Spark local[2] (strata/lake_backfill.py,
pipeline/lake/backfill_run.py): a topic backfilled into its table (the default partition spec, day of
timestamp), then more records produced, then a continuous writer run; the table then equals ``read_topic``
with no duplicate and no gap, and its offsets are the topic's last stable offsets. A backfill whose commit
loses the race to the continuous writer appends nothing and leaves its files as orphans. On both backends:
file:// with SQLite, and moto S3 (s3a for Spark) with PostgreSQL."""

from __future__ import annotations

import json
import time
from datetime import UTC
from typing import Any

import pytest
from confluent_kafka import Producer

from pipeline.lake.backfill_run import run_backfill
from pipeline.lake.offsets import committed_offsets
from pipeline.lake.runs import COMMITTED, LOST_RACE, LakeWriterConfig
from pipeline.reader import read_topic
from storage.errors import InvalidConfig
from storage.lake_config import default_table
from strata.cli import main as cli_main
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration

PARTITIONS = 3


def _produce(srv: RunningServer, topic: str, start: int, count: int) -> None:
    """Keys, null keys and values, headers, compressed batches, and an aborted transaction (a hole in
    every partition that read_committed skips)."""
    producer = Producer(
        {"bootstrap.servers": srv.kafka_bootstrap, "compression.type": "zstd", "linger.ms": 5}
    )
    for i in range(start, start + count):
        key = None if i % 5 == 0 else b"k%d" % (i % 7)
        value = None if i % 6 == 0 else b"v%d" % i
        producer.produce(topic, key=key, value=value, partition=i % PARTITIONS, headers=[("n", b"%d" % i)])
    assert producer.flush(30) == 0
    aborting = Producer({"bootstrap.servers": srv.kafka_bootstrap, "transactional.id": f"{topic}-{start}"})
    aborting.init_transactions(30)
    aborting.begin_transaction()
    for partition in range(PARTITIONS):
        aborting.produce(topic, key=b"aborted", value=b"never", partition=partition)
    aborting.flush(30)
    aborting.abort_transaction(30)


def _rows(table: Any) -> list[tuple[Any, ...]]:
    columns = ["partition", "offset", "key", "value", "timestamp", "headers"]
    frame = table.scan().to_arrow().select(columns).to_pylist()
    return sorted(
        tuple(r[c] if c != "headers" else [tuple(h.values()) for h in r[c]] for c in columns) for r in frame
    )


def _topic_rows(spark: Any, srv: RunningServer, topic: str) -> list[tuple[Any, ...]]:
    settings = srv.runtime.settings
    df = read_topic(spark, settings.metadata_url, settings.bucket_url, subscribe=topic, includeHeaders="true")
    return sorted(
        # Spark gives naive datetimes in its session time zone, UTC (pipeline/session.py).
        (
            r.partition,
            r.offset,
            r.key,
            r.value,
            r.timestamp.replace(tzinfo=UTC),
            [(h.key, h.value) for h in r.headers],
        )
        for r in df.collect()
    )


def _stable(srv: RunningServer, topic: str) -> dict[int, int]:
    return {s.partition: s.last_stable_offset for s in srv.runtime.metadata.partition_states(topic)}


def _assert_table_is_the_topic(spark: Any, srv: RunningServer, table: Any, topic: str) -> None:
    rows = _rows(table)
    assert len(rows) == len({(p, o) for p, o, *_ in rows})  # no duplicate
    assert rows == _topic_rows(spark, srv, topic)  # no gap, nothing else
    assert committed_offsets(table)[0] == _stable(srv, topic)


def _flags(srv: RunningServer) -> list[str]:
    settings = srv.runtime.settings
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
    return flags


def test_backfill_then_the_continuous_writer(
    spark: Any, server: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    srv, topic = server, "filled"
    srv.create_topic(topic, PARTITIONS, **{"strata.iceberg.mode": "raw"})
    _produce(srv, topic, 0, 60)

    capsys.readouterr()
    assert cli_main(["lake", "backfill", "--topic", topic, *_flags(srv)]) == 0
    out = capsys.readouterr().out
    # 20 records and a 2-offset aborted transaction (its record and its marker) per partition.
    assert out.startswith(f"{topic}: committed, "), out
    assert "ranges 0:0-22,1:0-22,2:0-22, offsets 0:22,1:22,2:22" in out, out
    catalog = srv.runtime.lake_round().writer().catalog
    table = catalog.load_table(default_table(topic))
    assert len(table.snapshots()) == 1
    assert all("/data/backfill-" in task.file.file_path for task in table.scan().plan_files())
    _assert_table_is_the_topic(spark, srv, table, topic)
    (row,) = [r for r in srv.runtime.metadata.lake_tables() if r.topic == topic]
    assert (dict(row.committed_offsets), row.lease_owner, row.error) == ({0: 22, 1: 22, 2: 22}, None, None)

    _produce(srv, topic, 60, 30)
    (run,) = srv.runtime.lake_round().run_once(topic, force=True).runs
    assert run.outcome == COMMITTED, run.error
    assert run.rows == 30
    table = catalog.load_table(default_table(topic))
    _assert_table_is_the_topic(spark, srv, table, topic)
    assert len(_rows(table)) == 90

    # Nothing new: a backfill commits nothing.
    assert cli_main(["lake", "backfill", "--topic", topic, *_flags(srv)]) == 0
    assert capsys.readouterr().out.startswith(f"{topic}: up to date, 0 files")
    assert len(catalog.load_table(default_table(topic)).snapshots()) == 2


LEASE_MS = 1_000


class _WriterCommitsFirst:
    """Between the backfill's files and its commit, the backfill's lease runs out and the continuous
    writer takes it and commits the same records."""

    def __init__(self, srv: RunningServer, topic: str) -> None:
        self.srv, self.topic = srv, topic

    def before_commit(self, topic: str, table: Any) -> None:
        time.sleep(LEASE_MS / 1000 + 0.2)
        (run,) = self.srv.runtime.lake_round().run_once(self.topic, force=True).runs
        assert run.outcome == COMMITTED, run.error

    def after_commit(self, topic: str, table: Any) -> None:
        raise AssertionError("the backfill must not commit")


def test_a_backfill_that_loses_the_race_appends_nothing(spark: Any, server: RunningServer) -> None:
    srv, topic = server, "raced"
    srv.create_topic(topic, PARTITIONS, **{"strata.iceberg.mode": "raw"})
    _produce(srv, topic, 0, 30)
    rt = srv.runtime
    catalog = rt.lake_round().writer().catalog
    settings = rt.settings
    run = run_backfill(
        spark,
        rt.metadata,
        rt.store,
        catalog,
        rt.clock,
        "backfiller",
        LakeWriterConfig(lease_ms=LEASE_MS),
        settings.metadata_url,
        settings.bucket_url,
        topic,
        hook=_WriterCommitsFirst(srv, topic),
    )
    assert run.outcome == LOST_RACE
    assert run.error is not None
    assert "orphans" in run.error
    assert run.directory is not None
    assert run.files > 0
    table = catalog.load_table(default_table(topic))
    assert len(table.snapshots()) == 1  # the writer's only
    assert not any("/data/backfill-" in task.file.file_path for task in table.scan().plan_files())
    _assert_table_is_the_topic(spark, srv, table, topic)
    assert json.loads(table.current_snapshot().summary["strata.offsets"]) == {"0": 12, "1": 12, "2": 12}


def test_files_are_split_by_the_partition_spec(spark: Any, server: RunningServer) -> None:
    """Records over three days and three partitions, into a table partitioned by day and partition: each
    file Spark writes holds one (day, partition), as add_files needs; a bucket spec is refused up front."""
    srv, topic = server, "spread"
    spec = {"strata.iceberg.mode": "raw", "strata.iceberg.partition.spec": "(day(timestamp), partition)"}
    srv.create_topic(topic, PARTITIONS, **spec)
    producer = Producer({"bootstrap.servers": srv.kafka_bootstrap})
    now_ms = int(time.time() * 1000)
    for i in range(36):
        day_ms = (i // PARTITIONS % 3) * 86_400_000
        producer.produce(
            topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % PARTITIONS, timestamp=now_ms - day_ms
        )
    assert producer.flush(30) == 0
    assert cli_main(["lake", "backfill", "--topic", topic, *_flags(srv)]) == 0
    table = srv.runtime.lake_round().writer().catalog.load_table(default_table(topic))
    _assert_table_is_the_topic(spark, srv, table, topic)
    partitions = {(task.file.partition[0], task.file.partition[1]) for task in table.scan().plan_files()}
    assert len(partitions) == 9  # 3 days x 3 partitions, each its own files

    bucketed = {"strata.iceberg.mode": "raw", "strata.iceberg.partition.spec": "(bucket(4, key))"}
    srv.create_topic("bucketed", 1, **bucketed)
    assert srv.produce("bucketed", [{"key": "a", "value": "b"}]).status_code == 200
    rt = srv.runtime
    with pytest.raises(InvalidConfig, match="bucket"):
        run_backfill(
            spark,
            rt.metadata,
            rt.store,
            rt.lake_round().writer().catalog,
            rt.clock,
            "backfiller",
            LakeWriterConfig(),
            rt.settings.metadata_url,
            rt.settings.bucket_url,
            "bucketed",
        )
    (row,) = [r for r in rt.metadata.lake_tables() if r.topic == "bucketed"]
    assert row.lease_owner is None  # released
    assert row.error == "the backfill did not finish"
