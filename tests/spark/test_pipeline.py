"""The Spark pipeline against moto S3 through s3a (and a local bucket), compared with HTTP fetch."""

from __future__ import annotations

import base64
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from pipeline.compaction import compact_on_spark
from pipeline.options import InvalidReadOption
from pipeline.reader import latest_per_key, read_topic
from planner.round import CompactionRound
from planner.stats import JobOutcome
from storage.errors import UnknownPartition, UnknownTopic
from strata.component_configs import spark_compaction_config
from strata.settings import Settings
from tests.fixtures.server import RunningServer, local_settings, run_server

pytestmark = pytest.mark.integration

# Recent enough that the default 7-day retention (run by every compaction round) keeps everything.
T0 = int(time.time() * 1000) - 3_600_000


@dataclass
class Dataset:
    settings: Settings
    srv: RunningServer
    users_reference: dict[str, str]

    @property
    def metadata_url(self) -> str:
        return self.settings.metadata_url

    @property
    def bucket_url(self) -> str:
        return self.settings.bucket_url


def _produce_dataset(srv: RunningServer) -> dict[str, str]:
    rng = random.Random(4)
    srv.create_topic("events", partitions=3)
    for i in range(60):
        record: dict[str, Any] = {
            "key": None if i % 7 == 0 else f"e{i % 11}",
            "value": None if i % 13 == 0 else f"payload {i}",
            "headers": [{"name": "n", "value": str(i)}, {"name": "empty", "value": None}] if i % 2 else [],
            "timestamp": T0 + i,
        }
        if record["key"] is None:
            record["partition"] = i % 3
        assert srv.produce("events", [record]).status_code == 200
    srv.create_topic("users", partitions=2, **{"cleanup.policy": "compact"})
    reference: dict[str, str] = {}
    for round_ in range(5):
        batch = []
        for k in range(30):
            value = None if round_ == 4 and rng.random() < 0.2 else f"u{k}-r{round_}"
            batch.append({"key": f"user-{k}", "value": value, "timestamp": T0 + 1000 * round_ + k})
            if value is None:
                reference.pop(f"user-{k}", None)
            else:
                reference[f"user-{k}"] = value
        assert srv.produce("users", batch).status_code == 200
        if round_ == 3:
            rt = srv.runtime
            compactor = CompactionRound(rt.store, rt.metadata, rt.clock, random.Random(1), "test")
            compactor.run_once("users", force=True)  # holes in the middle of the log
    return reference


@pytest.fixture(scope="module")
def s3_dataset(
    tmp_path_factory: pytest.TempPathFactory, moto_server: str, moto_admin_client: Any
) -> Iterator[Dataset]:
    bucket = "strata-spark-" + str(random.Random().getrandbits(40))
    moto_admin_client.create_bucket(Bucket=bucket)
    tmp = tmp_path_factory.mktemp("spark-s3")
    settings = local_settings(
        tmp, bucket=f"s3://{bucket}/prefix", s3_endpoint=moto_server, metadata=f"sqlite:///{tmp}/m.db"
    )
    with run_server(settings) as srv:
        yield Dataset(settings, srv, _produce_dataset(srv))


def _fetch_all(srv: RunningServer, topic: str, partitions: int) -> dict[tuple[str, int, int], dict[str, Any]]:
    out = {}
    for partition in range(partitions):
        offset = 0
        while True:
            response = srv.fetch(topic, partition, offset, encoding="base64", max_bytes=1 << 20)
            assert response.status_code == 200, response.text
            body = response.json()
            for rec in body["records"]:
                out[(topic, partition, rec["offset"])] = rec
            if body["next_offset"] >= body["high_watermark"]:
                break
            offset = body["next_offset"]
    return out


def _b(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def test_schema_is_the_kafka_sources(spark: Any, s3_dataset: Dataset) -> None:
    df = read_topic(spark, s3_dataset.metadata_url, s3_dataset.bucket_url, subscribe="events")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int>"
    )
    with_headers = read_topic(
        spark, s3_dataset.metadata_url, s3_dataset.bucket_url, subscribe="events", includeHeaders="true"
    )
    assert with_headers.schema.simpleString().endswith(",headers:array<struct<key:string,value:binary>>>")


def test_dataframe_equals_http_fetch_in_every_column(spark: Any, s3_dataset: Dataset) -> None:
    df = read_topic(
        spark,
        s3_dataset.metadata_url,
        s3_dataset.bucket_url,
        subscribe="events,users",
        includeHeaders="true",
    )
    rows = {(r.topic, r.partition, r.offset): r for r in df.collect()}
    fetched = {**_fetch_all(s3_dataset.srv, "events", 3), **_fetch_all(s3_dataset.srv, "users", 2)}
    assert set(rows) == set(fetched)
    # The compacted topic really has holes: fewer rows than its high watermarks.
    users_hwm = sum(
        p["high_watermark"] for p in s3_dataset.srv.client.get("/v1/topics/users").json()["partitions"]
    )
    assert sum(1 for k in rows if k[0] == "users") < users_hwm
    assert any(r.value is None for k, r in rows.items() if k[0] == "users")  # tombstones are rows too
    for position, rec in fetched.items():
        row = rows[position]
        assert row.key == _b(rec["key"])
        assert row.value == _b(rec["value"])
        assert int(row.timestamp.timestamp() * 1000) == rec["timestamp"]
        assert row.timestampType == 0
        assert [(h.key, h.value) for h in row.headers] == [
            (h["name"], _b(h["value"])) for h in rec["headers"]
        ]


def test_offset_options(spark: Any, s3_dataset: Dataset) -> None:
    def offsets(**options: Any) -> set[tuple[int, int]]:
        df = read_topic(spark, s3_dataset.metadata_url, s3_dataset.bucket_url, **options)
        return {(r.partition, r.offset) for r in df.select("partition", "offset").collect()}

    everything = offsets(subscribe="events")
    hwm = {p: max(o for q, o in everything if q == p) + 1 for p in range(3)}
    ranged = offsets(
        subscribe="events",
        startingOffsets='{"events":{"0":2,"1":-2,"2":-1}}',
        endingOffsets='{"events":{"0":5,"1":-1}}',
    )
    assert ranged == {(0, 2), (0, 3), (0, 4)} | {(1, o) for o in range(hwm[1])}
    assert offsets(assign='{"events":[1]}') == {(1, o) for o in range(hwm[1])}
    assert offsets(subscribe="events", startingOffsets="latest") == set()
    assert offsets(subscribe="events", endingOffsets="latest", startingOffsets="earliest") == everything


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"subscribe": "nope"}, UnknownTopic),
        ({"subscribe": "bad/name"}, Exception),
        ({"subscribe": "events", "assign": '{"events":[0]}'}, InvalidReadOption),
        ({}, InvalidReadOption),
        ({"assign": "{not json"}, InvalidReadOption),
        ({"assign": '{"events":[7]}'}, UnknownPartition),
        ({"subscribe": "events", "startingOffsets": '{"events":{"0":"x"}}'}, InvalidReadOption),
        ({"subscribe": "events", "startingOffsets": '{"events":{"0":-3}}'}, InvalidReadOption),
        ({"subscribe": "events", "endingOffsets": "earliest"}, InvalidReadOption),
        ({"subscribe": "events", "startingOffsets": '{"events":{"0":99999}}'}, InvalidReadOption),
        ({"subscribe": "events", "includeHeaders": "maybe"}, InvalidReadOption),
        ({"subscribe": "events", "kafka.bootstrap.servers": "x"}, InvalidReadOption),
    ],
)
def test_bad_options_are_clear_errors(
    spark: Any, s3_dataset: Dataset, options: dict[str, Any], error: type
) -> None:
    with pytest.raises(error) as raised:
        read_topic(spark, s3_dataset.metadata_url, s3_dataset.bucket_url, **options)
    assert str(raised.value)


def test_latest_per_key_equals_the_reference(spark: Any, s3_dataset: Dataset) -> None:
    df = latest_per_key(read_topic(spark, s3_dataset.metadata_url, s3_dataset.bucket_url, subscribe="users"))
    got = {r.key.decode(): r.value.decode() for r in df.collect()}
    assert got == s3_dataset.users_reference


def test_local_bucket_reads_through_the_local_filesystem(spark: Any, tmp_path: Path) -> None:
    with run_server(local_settings(tmp_path)) as srv:
        srv.create_topic("loc", partitions=2)
        srv.produce("loc", [{"key": f"k{i}", "value": f"v{i}"} for i in range(20)])
        settings = srv.runtime.settings
        df = read_topic(spark, settings.metadata_url, settings.bucket_url, subscribe="loc")
        rows = {(r.partition, r.offset): (r.key, r.value) for r in df.collect()}
        fetched = _fetch_all(srv, "loc", 2)
        assert rows == {(p, o): (_b(r["key"]), _b(r["value"])) for (_, p, o), r in fetched.items()}


def _twin(tmp: Path) -> Settings:
    # No GC graces: the round's GC runs on Spark too, orphans included (the server is idle meanwhile).
    return replace(local_settings(tmp), gc_grace_ms=0, orphan_grace_ms=0)


def test_spark_compaction_equals_the_local_worker(spark: Any, tmp_path: Path) -> None:
    logs = []
    for mode in ("local", "spark"):
        settings = _twin(tmp_path / mode)
        with run_server(settings) as srv:
            srv.create_topic("c", partitions=3, **{"cleanup.policy": "compact"})
            srv.create_topic("plain", partitions=2)
            for r in range(6):
                batch = [
                    {
                        "key": f"k{k}",
                        "value": None if (r == 5 and k % 5 == 0) else f"{r}/{k}",
                        "timestamp": T0 + r,
                    }
                    for k in range(25)
                ]
                assert srv.produce("c", batch).status_code == 200
                assert (
                    srv.produce("plain", [{"key": f"p{r}", "value": "x", "timestamp": T0 + r}]).status_code
                    == 200
                )
            if mode == "local":
                rt = srv.runtime
                CompactionRound(rt.store, rt.metadata, rt.clock, random.Random(3), "local").run_once(
                    "c", force=True
                )
            else:
                orphan = "data/l0/000000000000" + "0" * 20 + ".strata"  # older than a zero grace, below
                srv.runtime.store.put(orphan, b"an upload whose commit never happened")
                time.sleep(0.01)
                result = compact_on_spark(spark, spark_compaction_config(settings), topic="c", force=True)
                assert result.jobs
                assert {stats.outcome for _, stats in result.jobs} == {JobOutcome.COMMITTED}
                assert all(stats.owner.startswith("spark:") for _, stats in result.jobs)
                assert all(s.gets <= 2 * s.input_files for _, s in result.jobs)  # two streams per file
                assert result.obsolete_deleted > 0
                assert result.orphans_deleted == 1  # the Spark round skips no GC
                assert orphan not in {info.key for info in srv.runtime.store.list("data/")}
            logs.append({(t, p): srv.read_all(t, p) for t, n in (("c", 3), ("plain", 2)) for p in range(n)})
    assert logs[0] == logs[1]
    assert sum(len(v) for (t, _), v in logs[0].items() if t == "c") == 25  # one per key survived


def test_cli_demo_and_compact_on_spark(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from strata.cli import main

    assert main(["demo", "--data-dir", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "matches what was produced" in out
    assert "latest value per key" in out
    # The demo's data again, through `strata compact --spark` (nothing left to do, then forced).
    with run_server(local_settings(tmp_path / "cli")) as srv:
        srv.create_topic("cc", **{"cleanup.policy": "compact"})
        for i in range(4):
            srv.produce("cc", [{"key": "k", "value": str(i)}])
        data_dir = srv.runtime.settings.data_dir
        assert main(["compact", "--spark", "--topic", "cc", "--force", "--data-dir", data_dir]) == 0
        assert "1 job(s) ran on Spark" in capsys.readouterr().out
        assert [r["value"] for r in srv.read_all("cc", 0)] == ["3"]
