"""The Spark reader (executors decode with pipeline/decode.py) and latest-per-key over compressed batches."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from pipeline.reader import latest_per_key, read_topic
from planner.round import CompactionRound
from storage.records import compression
from tests.fixtures.server import local_settings, run_server
from tests.kafka.compressed import stored_codecs

pytestmark = pytest.mark.integration

CODECS = ["gzip", "snappy", "lz4", "zstd"]


def test_spark_reads_every_codec_and_latest_per_key(spark: Any, tmp_path: Path) -> None:
    with run_server(local_settings(tmp_path)) as srv:
        settings = srv.runtime.settings
        for codec in CODECS:
            # compression.type makes the HTTP produce path store compressed batches.
            srv.create_topic(codec, partitions=2, **{"compression.type": codec})
            srv.produce(codec, [{"key": f"k{i}", "value": f"{codec} value {i} " * 5} for i in range(40)])
            assert set(stored_codecs(srv.runtime, codec, 2)) == {compression.CODEC_IDS[codec]}
            df = read_topic(spark, settings.metadata_url, settings.bucket_url, subscribe=codec)
            rows = {(r.partition, r.offset): (r.key, r.value) for r in df.collect()}
            fetched = {
                (p, rec["offset"]): (rec["key"].encode(), rec["value"].encode())
                for p in range(2)
                for rec in srv.read_all(codec, p)
            }
            assert len(rows) == 40
            assert rows == fetched

        srv.create_topic("users", partitions=2, **{"cleanup.policy": "compact", "compression.type": "zstd"})
        reference: dict[str, str | None] = {}
        for round_ in range(3):
            batch = [
                {"key": f"u{k}", "value": None if (k + round_) % 9 == 0 else f"r{round_}-{k}"}
                for k in range(20)
            ]
            reference.update({b["key"]: b["value"] for b in batch})
            assert srv.produce("users", batch).status_code == 200
        rt = srv.runtime
        CompactionRound(rt.store, rt.metadata, rt.clock, random.Random(1), "test").run_once(
            "users", force=True
        )
        assert set(stored_codecs(rt, "users", 2)) == {compression.ZSTD}
        df = latest_per_key(read_topic(spark, settings.metadata_url, settings.bucket_url, subscribe="users"))
        got = {r.key.decode(): r.value.decode() for r in df.collect()}
        assert got == {k: v for k, v in reference.items() if v is not None}
