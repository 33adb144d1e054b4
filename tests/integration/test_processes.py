"""Several agent processes on one bucket and one metadata store; an agent killed mid-flush."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from planner.gc import OrphanCollector
from storage.clock import ManualClock
from storage.metadata import open_metadata_store
from storage.objectstore import open_object_store
from tests.fixtures.processes import agent_process, shared_agent_args

pytestmark = pytest.mark.integration


def _read_partition(url: str, topic: str, partition: int) -> dict[int, str]:
    out: dict[int, str] = {}
    offset = 0
    with httpx.Client(base_url=url, timeout=30) as client:
        while True:
            body: dict[str, Any] = client.get(
                f"/v1/topics/{topic}/partitions/{partition}/records",
                params={"offset": offset, "max_wait_ms": 0, "max_bytes": 1 << 20},
            ).json()
            for rec in body["records"]:
                out[rec["offset"]] = rec["value"]
            if body["next_offset"] >= body["high_watermark"]:
                return out
            offset = body["next_offset"]


@pytest.mark.postgres
def test_two_agents_one_bucket_one_postgres(
    tmp_path: Path, moto_server: str, s3_bucket: str, postgres_schema_url: str
) -> None:
    args = shared_agent_args(tmp_path, moto_server, s3_bucket, postgres_schema_url)
    with agent_process(args, tmp_path) as a, agent_process(args, tmp_path) as b:
        assert httpx.post(a.url + "/v1/topics", json={"name": "shared", "partitions": 4}).status_code == 201
        acked: dict[tuple[int, int], str] = {}
        failures: list[str] = []
        lock = threading.Lock()

        def producer(worker: int) -> None:
            url = (a, b)[worker % 2].url
            with httpx.Client(base_url=url, timeout=30) as client:
                for i in range(15):
                    batch = [{"key": f"k{worker}-{i}-{j}", "value": f"{worker}/{i}/{j}"} for j in range(5)]
                    response = client.post("/v1/topics/shared/records", json={"records": batch})
                    with lock:
                        if response.status_code != 200:
                            failures.append(response.text)
                            continue
                        for rec, placed in zip(batch, response.json()["offsets"], strict=True):
                            position = (placed["partition"], placed["offset"])
                            assert position not in acked, f"offset {position} given twice"
                            acked[position] = rec["value"]

        threads = [threading.Thread(target=producer, args=(w,)) for w in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        assert len(acked) == 6 * 15 * 5
        for partition in range(4):
            # Both agents see the same log, and offsets are unique and contiguous from 0.
            from_a = _read_partition(a.url, "shared", partition)
            from_b = _read_partition(b.url, "shared", partition)
            assert from_a == from_b
            assert sorted(from_a) == list(range(len(from_a)))
            for offset, value in from_a.items():
                assert acked[(partition, offset)] == value
        assert sum(1 for p, _ in acked) == sum(len(_read_partition(a.url, "shared", p)) for p in range(4))


def test_agent_killed_between_upload_and_commit_leaves_an_orphan_and_no_offsets(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with agent_process(["--data-dir", str(data), "--role", "agent"], tmp_path) as agent:
        assert httpx.post(agent.url + "/v1/topics", json={"name": "k", "partitions": 1}).status_code == 201
        bucket = data / "bucket"
        before = set(bucket.rglob("*.strata"))
        # Hold SQLite's write lock: the agent's commit blocks (busy timeout) after its upload is done.
        blocker = sqlite3.connect(data / "metadata.db", timeout=30, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            answers: list[int] = []

            def produce() -> None:
                try:
                    response = httpx.post(
                        agent.url + "/v1/topics/k/records",
                        json={"records": [{"key": "a", "value": "never acked"}]},
                        timeout=60,
                    )
                    answers.append(response.status_code)
                except httpx.TransportError:
                    pass  # the agent died mid-request: the producer sees a dropped connection

            thread = threading.Thread(target=produce, daemon=True)
            thread.start()
            deadline = time.monotonic() + 20
            while not set(bucket.rglob("*.strata")) - before:
                assert time.monotonic() < deadline, "the flush never uploaded"
                time.sleep(0.02)
            agent.kill()  # uploaded, not committed
            thread.join(10)
            assert answers == []  # never acknowledged
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
    orphans = set(bucket.rglob("*.strata")) - before
    assert len(orphans) == 1

    metadata = open_metadata_store("sqlite:///" + str(data / "metadata.db"))
    try:
        state = metadata.partition_state("k", 0)
        assert state.high_watermark == 0  # no offsets were assigned
        store = open_object_store("file://" + str(bucket))
        clock = ManualClock(start_ms=int(time.time() * 1000))
        gc = OrphanCollector(store, metadata, clock, orphan_grace_ms=3_600_000)
        assert gc.run_once().orphans_deleted == 0  # too young: it might still be committed
        clock.advance(3601)
        assert gc.run_once().orphans_deleted == 1
        assert not set(bucket.rglob("*.strata")) - before
    finally:
        metadata.close()
