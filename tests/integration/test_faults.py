"""Transient object-store faults during produce: answers are 200 or retriable 503, never a lost ack."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest

from storage.clock import SystemClock
from storage.objectstore.base import PUT
from storage.objectstore.faults import FaultyAsyncObjectStore
from storage.objectstore.local import LocalAsyncObjectStore
from storage.objectstore.retry import RetryingAsyncObjectStore, RetryPolicy
from tests.fixtures.server import local_settings, run_server

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("fail_after_rate", [0.0, 0.1], ids=["fail-before", "fail-after-too"])
def test_twenty_percent_transient_faults_lose_no_acked_record(tmp_path: Path, fail_after_rate: float) -> None:
    settings = local_settings(tmp_path)
    bucket = Path(settings.bucket_url.removeprefix("file://"))
    rng = random.Random(20)
    faulty = FaultyAsyncObjectStore(
        LocalAsyncObjectStore(bucket), failure_rate=0.2, rng=rng, fail_after_rate=fail_after_rate
    )
    # Few attempts, so that some flushes exhaust their retries and the 503 path is exercised too.
    astore = RetryingAsyncObjectStore(
        faulty, RetryPolicy(max_attempts=2, base_delay_s=0.001, max_delay_s=0.01), SystemClock(), rng
    )
    acked: dict[tuple[int, int], str] = {}
    statuses: list[tuple[int, int | None]] = []
    lock = threading.Lock()
    with run_server(settings, astore=astore) as srv:
        srv.create_topic("f", partitions=4)

        def producer(worker: int) -> None:
            for i in range(25):
                value = f"w{worker}-{i}"
                response = srv.produce("f", [{"key": value, "value": value}])
                with lock:
                    if response.status_code == 200:
                        placed = response.json()["offsets"][0]
                        acked[(placed["partition"], placed["offset"])] = value
                        statuses.append((200, None))
                    else:
                        statuses.append((response.status_code, response.json()["error_code"]))

        threads = [threading.Thread(target=producer, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        puts = srv.runtime.counters.get(PUT)

    assert len(statuses) == 100
    assert {s for s in statuses if s[0] != 200} <= {(503, 50003)}
    assert any(s[0] == 503 for s in statuses), "the fault rate should make some flush fail"
    assert len(acked) > 50
    assert puts > 0

    # Restart without faults on the same bucket and metadata: every acknowledged record is there.
    with run_server(settings) as srv:
        found: dict[tuple[int, int], str] = {}
        for partition in range(4):
            offset = 0
            while True:
                body: dict[str, Any] = srv.fetch("f", partition, offset).json()
                for rec in body["records"]:
                    found[(partition, rec["offset"])] = rec["value"]
                if body["next_offset"] >= body["high_watermark"]:
                    break
                offset = body["next_offset"]
        for position, value in acked.items():
            assert found.get(position) == value
        # Offsets are dense: a failed flush assigned none, so nothing but acked records exist.
        # (With fail-after faults, an upload can succeed and its commit too while the PUT reply was
        # lost and retried, so the set of found records equals the acked set exactly.)
        assert set(found) == set(acked)
