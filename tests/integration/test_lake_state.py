"""The state table of a compacted topic, kept by the lake writer (pipeline/lake/state_writer.py): keys
updated and tombstoned over several commits, over HTTP and Kafka (with aborted transactions), and a Strata
compaction of the topic between them; and keyless records, which the state leaves out. After each commit
the state table, read by DuckDB, equals ``latest_per_key(read_topic(...))`` computed by Strata's Spark
pipeline, and its ``strata.offsets`` are the topic's last stable offsets; so it does when a commit is read
in pieces, from the topic's table's read or from its own. On both backend pairs (file://
with SQLite, moto S3 with PostgreSQL). A state commit that loses the race to another writer changes
nothing, and the state is still exact."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from confluent_kafka import Producer

from pipeline.lake.offsets import committed_offsets
from pipeline.lake.round import DROPPED
from pipeline.lake.runs import COMMITTED, FAILED, LOST_RACE, LakeWriterConfig
from pipeline.lake.state_writer import BUCKETS_PROPERTY, STATE_SUFFIX, state_table_name
from pipeline.lake.writer import LakeWriter
from pipeline.reader import latest_per_key, read_topic
from planner.round import CompactionRound
from storage.clock import SkewedClock
from storage.errors import Unavailable
from storage.lake_config import default_table
from storage.partitioner import partition_for_key
from strata.cli import main as cli_main
from tests.fixtures.server import RunningServer
from tests.integration.lake_readers import duckdb_connection

pytestmark = pytest.mark.integration

TOPIC = "accounts.state"
PARTITIONS = 2
BUCKETS = 4
LEASE_MS = 5_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

StateRow = tuple[bytes, bytes, int, int, int]  # key, value, partition, offset, timestamp in microseconds


def _micros(value: datetime) -> int:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)  # Spark's: naive UTC
    return (aware - _EPOCH) // timedelta(microseconds=1)


def _produce_http(
    srv: RunningServer, changes: list[tuple[str | None, str | None]], topic: str = TOPIC
) -> None:
    """Keyed records go to their key's partition (Kafka's partitioner), keyless ones to partition 0."""
    records = [
        {
            "key": key,
            "value": value,
            "partition": 0 if key is None else partition_for_key(key.encode(), PARTITIONS),
        }
        for key, value in changes
    ]
    response = srv.produce(topic, records)
    assert response.status_code == 200, response.text


def _produce_transactions(
    srv: RunningServer, transactions: list[tuple[list[tuple[str, bytes | None]], bool]]
) -> None:
    """Each transaction's (key, value) records, then committed (True) or aborted."""
    producer = Producer({"bootstrap.servers": srv.kafka_bootstrap, "transactional.id": "state-txn"})
    producer.init_transactions(30)
    for changes, commit in transactions:
        producer.begin_transaction()
        for key, value in changes:
            partition = partition_for_key(key.encode(), PARTITIONS)
            producer.produce(TOPIC, key=key.encode(), value=value, partition=partition)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def _lake_run(srv: RunningServer, topic: str = TOPIC) -> Any:
    (run,) = srv.runtime.lake_round().run_once(topic, force=True).runs
    assert run.outcome == COMMITTED, run.error
    assert run.state is not None
    assert run.state.outcome == COMMITTED, run.state
    assert run.error is None
    return run


def _state_rows(srv: RunningServer, topic: str, buckets: int) -> tuple[list[StateRow], Any]:
    catalog = srv.runtime.lake_round().writer().catalog
    table = catalog.load_table(state_table_name(default_table(topic)))
    con = duckdb_connection(srv.runtime.settings.s3_endpoint)
    try:
        rows = con.execute(
            'SELECT key, value, "partition", "offset", "timestamp", key_bucket'
            f" FROM iceberg_scan('{table.metadata_location}')"
        ).fetchall()
    finally:
        con.close()
    for key, *_, bucket in rows:
        assert bucket == partition_for_key(bytes(key), buckets)
    return sorted((bytes(k), bytes(v), p, o, _micros(t)) for k, v, p, o, t, _ in rows), table


def _oracle(spark: Any, srv: RunningServer, topic: str = TOPIC) -> list[StateRow]:
    settings = srv.runtime.settings
    frame = latest_per_key(read_topic(spark, settings.metadata_url, settings.bucket_url, subscribe=topic))
    return sorted(
        (bytes(r.key), bytes(r.value), r.partition, r.offset, _micros(r.timestamp)) for r in frame.collect()
    )


def _stable(srv: RunningServer, topic: str = TOPIC) -> dict[int, int]:
    return {s.partition: s.last_stable_offset for s in srv.runtime.metadata.partition_states(topic)}


def _check(spark: Any, srv: RunningServer, topic: str = TOPIC, buckets: int = BUCKETS) -> list[StateRow]:
    rows, table = _state_rows(srv, topic, buckets)
    assert rows == _oracle(spark, srv, topic)
    assert committed_offsets(table)[0] == _stable(srv, topic)
    assert table.properties[BUCKETS_PROPERTY] == str(buckets)
    return rows


def test_the_state_table_equals_the_latest_value_per_key(spark: Any, srv: RunningServer) -> None:
    srv.create_topic(
        TOPIC,
        PARTITIONS,
        **{
            "cleanup.policy": "compact",
            "strata.iceberg.mode": "raw",
            "strata.iceberg.upsert.buckets": BUCKETS,
        },
    )
    rng = random.Random(36)

    # 1: fifteen keys.
    _produce_http(srv, [(f"a{i}", f"v1-{i}") for i in range(15)])
    run = _lake_run(srv)
    assert run.state.upsert.keys_changed == 15
    assert run.state.buckets == BUCKETS
    assert 1 <= run.state.upsert.buckets_rewritten <= BUCKETS
    assert run.state.upsert.bytes_written > 0
    assert len(_check(spark, srv)) == 15

    # 2: updates, tombstones (one of a key never seen), keys updated twice in one commit, and transactions.
    changes: list[tuple[str | None, str | None]] = [(f"a{i}", f"v2-{i}") for i in range(5)]
    changes += [("a5", None), ("a6", None), ("a7", None), ("ghost", None), ("a1", "v2-again"), ("a6", "back")]
    _produce_http(srv, changes)
    # An update and a tombstone in an aborted transaction must never reach the state.
    _produce_transactions(srv, [([("a8", b"aborted"), ("a9", None)], False), ([("a10", b"txn")], True)])
    _lake_run(srv)
    rows = _check(spark, srv)
    by_key = {k: v for k, v, *_ in rows}
    assert (by_key[b"a1"], by_key[b"a6"], by_key[b"a10"]) == (b"v2-again", b"back", b"txn")
    assert not {b"a5", b"ghost"} & set(by_key)
    assert (by_key[b"a8"], by_key[b"a9"]) == (b"v1-8", b"v1-9")  # the aborted transaction is not applied

    # 3: more changes, then a compaction of the topic before the state has read them.
    _produce_http(srv, [("a5", "v3-5"), ("a0", None), ("a20", "v3-20"), ("a2", "v3-2")])
    _produce_http(srv, [(f"a{rng.randrange(21)}", rng.choice([None, "v3-x"])) for _ in range(10)])
    before = sum(len(srv.read_all(TOPIC, p)) for p in range(PARTITIONS))
    rt = srv.runtime
    compaction = CompactionRound(rt.store, rt.metadata, rt.clock, random.Random(7), owner="test-worker")
    for _ in range(20):
        if not compaction.run_once(TOPIC, force=True).jobs:
            break
    after = sum(len(srv.read_all(TOPIC, p)) for p in range(PARTITIONS))
    assert after < before  # the compaction removed superseded records
    _lake_run(srv)
    _check(spark, srv)

    # 4: an aborted transaction only: no key changes, but the state's offsets still move to the topic's.
    _produce_transactions(srv, [([("a3", b"aborted")], False)])
    run = _lake_run(srv)
    assert run.state.upsert.keys_changed == 0
    assert {k: v for k, v, *_ in _check(spark, srv)}[b"a3"] == b"v2-3"


def test_keyless_records_are_not_in_the_state(
    spark: Any, srv: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A topic that is not compacted, with upsert on: keyless records leave the state alone; a commit of
        keyless records only moves the state's offsets. The default bucket count applies. Deleting the topic
    drops the state table with the topic's table."""
    topic = "events.state"
    srv.create_topic(topic, PARTITIONS, **{"strata.iceberg.mode": "raw", "strata.iceberg.upsert": "true"})
    _produce_http(srv, [("k1", "a"), (None, "x"), ("k2", "b"), ("k1", "c"), (None, "y")], topic)
    run = _lake_run(srv, topic)
    assert run.state.upsert.keys_changed == 2
    assert [(k, v) for k, v, *_ in _check(spark, srv, topic, 16)] == [(b"k1", b"c"), (b"k2", b"b")]
    # Through ``strata lake run``, which prints what the state's commit rewrote against its bucket count.
    _produce_http(srv, [(None, "z"), ("k3", "d")], topic)
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
    capsys.readouterr()
    assert cli_main(["lake", "run", "--topic", topic, "--force", *flags]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{topic}: committed, 2 rows"), out
    assert out[1].startswith(f"{topic}: state table strata.events_state_state: committed, 1 keys changed,"), (
        out
    )
    assert ", 1 of 16 buckets rewritten (0 emptied), " in out[1], out
    assert len(_check(spark, srv, topic, 16)) == 3
    _produce_http(srv, [(None, "keyless only")], topic)
    run = _lake_run(srv, topic)
    assert run.state.upsert.keys_changed == 0
    assert len(_check(spark, srv, topic, 16)) == 3

    # Deleting the topic drops both tables.
    assert srv.client.delete(f"/v1/topics/{topic}").status_code == 204
    assert srv.runtime.lake_round().run_once(topic).removed == [(topic, DROPPED)]
    catalog = srv.runtime.lake_round().writer().catalog
    assert not catalog.table_exists(default_table(topic))
    assert not catalog.table_exists(state_table_name(default_table(topic)))


class _FailStateCommit:
    """Fails the state table's commit (the topic's table commits): the state falls behind the table."""

    def before_commit(self, topic: str, table: Any) -> None:
        if table.name()[-1].endswith(STATE_SUFFIX):
            raise Unavailable("injected: the state table's commit fails")

    def after_commit(self, topic: str, table: Any) -> None:
        pass


def test_a_state_commit_read_in_pieces_keeps_each_keys_latest_value(spark: Any, srv: RunningServer) -> None:
    """A write buffer of one byte: each produce request's records are a piece of their own, and a key's
    latest value is in a later piece than its earlier ones."""
    topic = "pieces.kv"
    srv.create_topic(topic, PARTITIONS, **{"cleanup.policy": "compact", "strata.iceberg.mode": "raw"})
    rt = srv.runtime
    catalog = rt.lake_round().writer().catalog
    info = rt.metadata.get_topic(topic)

    def writer(owner: str, hook: Any = None) -> LakeWriter:
        config = LakeWriterConfig(write_buffer_bytes=1)
        return LakeWriter(rt.metadata, rt.store, catalog, rt.clock, owner, config, hook)

    def updates(round_: int) -> None:
        for i in range(3):
            _produce_http(
                srv, [("p1", f"v{round_}-{i}"), (f"q{i}", "x"), ("p2", None if i == 1 else "w")], topic
            )

    updates(1)
    run = writer("tiny").run(info)
    assert (run.outcome, run.state.outcome if run.state else None) == (COMMITTED, COMMITTED)
    assert {k: v for k, v, *_ in _check(spark, srv, topic, 16)} == {
        b"p1": b"v1-2",
        b"p2": b"w",
        b"q0": b"x",
        b"q1": b"x",
        b"q2": b"x",
    }
    # The state's commit fails once: the next run reads the state's own records, in pieces too.
    updates(2)
    failed = writer("failing", _FailStateCommit()).run(info)
    assert failed.outcome == COMMITTED
    assert failed.state is not None
    assert failed.state.outcome == FAILED
    updates(3)
    run = writer("tiny").run(info)
    assert run.state is not None
    assert run.state.outcome == COMMITTED, run.state
    assert {k: v for k, v, *_ in _check(spark, srv, topic, 16)}[b"p1"] == b"v3-2"


class _OtherWriterFirst:
    """Before the state table's commit, the writer's lease runs out, and another writer takes it and
    commits both tables."""

    def __init__(self, srv: RunningServer, clock: SkewedClock) -> None:
        self.srv, self.clock = srv, clock
        self.raced = False
        self.snapshots = 0  # the state table's, once the other writer committed

    def before_commit(self, topic: str, table: Any) -> None:
        if table.name()[-1].endswith(STATE_SUFFIX) and not self.raced:
            self.raced = True
            self.clock.advance(LEASE_MS / 1000 + 1)
            (other,) = self.srv.runtime.lake_round().run_once(topic, force=True).runs
            assert other.state is not None
            assert other.state.outcome == COMMITTED, other.state
            self.snapshots = len(
                self.srv.runtime.lake_round().writer().catalog.load_table(table.name()).snapshots()
            )

    def after_commit(self, topic: str, table: Any) -> None:
        pass


def test_a_state_commit_that_loses_the_race_changes_nothing(
    spark: Any, srv: RunningServer, clock: SkewedClock
) -> None:
    topic = "raced"
    srv.create_topic(topic, PARTITIONS, **{"cleanup.policy": "compact", "strata.iceberg.mode": "raw"})
    _produce_http(srv, [(f"r{i}", f"v1-{i}") for i in range(10)], topic)
    _lake_run(srv, topic)
    _produce_http(srv, [("r1", "v2"), ("r2", None), ("r3", "v2"), ("r1", "v3")], topic)
    rt = srv.runtime
    catalog = rt.lake_round().writer().catalog
    hook = _OtherWriterFirst(srv, clock)
    slow = LakeWriter(
        rt.metadata, rt.store, catalog, rt.clock, "slow", LakeWriterConfig(lease_ms=LEASE_MS), hook
    )
    run = slow.run(rt.metadata.get_topic(topic))
    assert hook.raced
    assert run.outcome == COMMITTED, run.error
    assert run.state is not None
    assert run.state.outcome == LOST_RACE
    assert run.state.offsets == _stable(srv, topic)  # the winner's
    state = catalog.load_table(state_table_name(default_table(topic)))
    assert len(state.snapshots()) == hook.snapshots  # none from the loser
    rows = _check(spark, srv, topic, 16)
    assert {k: v for k, v, *_ in rows}[b"r1"] == b"v3"
    _produce_http(srv, [("r2", "back"), ("r4", None)], topic)
    _lake_run(srv, topic)
    assert len(_check(spark, srv, topic, 16)) == 9
