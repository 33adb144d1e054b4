"""What users touch of compaction: the admin endpoint, topic description, metrics and the CLI."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from storage.metadata import open_metadata_store
from storage.metadata.base import MetadataStore
from storage.metadata.rows import Job
from strata.cli import main
from strata.settings import Settings
from tests.fixtures.server import RunningServer, local_settings, run_server

pytestmark = pytest.mark.integration

COMPACT = {"cleanup.policy": "compact"}


class FailsOnce:
    """A metadata store whose first ``lease_job`` fails with an error nobody expects (a bug, say)."""

    def __init__(self, inner: MetadataStore) -> None:
        self.inner = inner
        self.failed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def lease_job(self, owner: str, now_ms: int, lease_ms: int) -> Job | None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("an unexpected failure in a background round")
        return self.inner.lease_job(owner, now_ms, lease_ms)


def produce_rounds(srv: RunningServer, topic: str, rounds: int, keys: int) -> None:
    for r in range(rounds):
        recs = [{"key": f"k{k}", "value": f"v{r}"} for k in range(keys)]
        response = srv.produce(topic, recs)
        assert response.status_code == 200, response.text


def describe(srv: RunningServer, topic: str) -> dict[str, Any]:
    response = srv.client.get(f"/v1/topics/{topic}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_compact_endpoint_plans_jobs_that_the_background_worker_runs(backend_settings: Settings) -> None:
    # The background round runs at start and then only when woken: the endpoint is what triggers it.
    settings = replace(backend_settings, role="all", worker_interval_ms=3_600_000)
    with run_server(settings, with_worker=True) as srv:
        srv.create_topic("cfg", partitions=2, **COMPACT)
        produce_rounds(srv, "cfg", rounds=5, keys=10)
        before = describe(srv, "cfg")
        for p in before["partitions"]:
            assert (p["cleaned_offset"], p["dirty_ratio"], p["last_compaction_ms"]) == (0, 1.0, None)
        assert [(lv["level"], lv["files"]) for lv in before["levels"]] == [(0, 5)]
        started_ms = int(time.time() * 1000)

        response = srv.client.post("/v1/topics/cfg/compact")
        assert response.status_code == 202, response.text
        body = response.json()
        assert body["topic"] == "cfg"
        (planned,) = body["planned"]
        assert planned["kind"] == "clean"
        assert "requested" in planned["reason"]
        assert isinstance(planned["job_id"], int)

        deadline = time.monotonic() + 15
        while any(p["last_compaction_ms"] is None for p in describe(srv, "cfg")["partitions"]):
            assert time.monotonic() < deadline, "the background worker did not run the planned job"
            time.sleep(0.05)
        after = describe(srv, "cfg")
        for p in after["partitions"]:
            assert p["cleaned_offset"] == p["high_watermark"] > 0
            assert p["dirty_ratio"] == 0.0
            assert p["last_compaction_ms"] >= started_ms
            assert p["log_start_offset"] == 0
        assert sum(p["high_watermark"] for p in after["partitions"]) == 50  # offsets untouched
        # A clean writes at least L1.
        assert [(lv["level"], lv["files"]) for lv in after["levels"]] == [(1, 1)]
        assert after["levels"][0]["bytes"] < before["levels"][0]["bytes"]
        values = {r["key"]: r["value"] for p in range(2) for r in srv.read_all("cfg", p)}
        assert values == {f"k{k}": "v4" for k in range(10)}
        assert sum(len(srv.read_all("cfg", p)) for p in range(2)) == 10

        metrics = srv.client.get("/metrics").text
        assert 'strata_compaction_jobs_total{kind="clean",outcome="committed"} 1.0' in metrics
        for name in (
            "strata_compaction_read_bytes_total",
            "strata_compaction_written_bytes_total",
            "strata_compaction_records_in_total",
            "strata_compaction_records_out_total",
            "strata_compaction_dedup_ratio",
            "strata_compaction_map_utilization",
            'strata_compaction_pass_seconds_sum{pass="1"}',
            'strata_compaction_pass_bytes_total{pass="2"}',
            'strata_compaction_requests_total{kind="GET"}',
            'strata_compaction_requests_total{kind="PUT"} 1.0',
        ):
            assert name in metrics, name

        # Nothing left to do: 202 with no job. Unknown and invalid topics are refused.
        response = srv.client.post("/v1/topics/cfg/compact")
        assert (response.status_code, response.json()["planned"]) == (202, [])
        response = srv.client.post("/v1/topics/nope/compact")
        assert response.status_code == 404
        assert response.json()["error_code"] == 40401
        response = srv.client.post("/v1/topics/bad..name!/compact")
        assert response.status_code == 400
        assert response.json()["error_code"] == 40003


def test_background_worker_survives_an_unexpected_error(tmp_path: Path) -> None:
    settings = replace(local_settings(tmp_path), role="all", worker_interval_ms=3_600_000)
    metadata = FailsOnce(open_metadata_store(settings.metadata_url))
    with run_server(settings, metadata=metadata, with_worker=True) as srv:
        srv.create_topic("cfg", **COMPACT)
        produce_rounds(srv, "cfg", rounds=3, keys=4)
        deadline = time.monotonic() + 10
        while not metadata.failed:  # the first round (at start) failed
            assert time.monotonic() < deadline
            time.sleep(0.01)
        response = srv.client.post("/v1/topics/cfg/compact")
        assert response.status_code == 202, response.text
        while describe(srv, "cfg")["partitions"][0]["last_compaction_ms"] is None:
            assert time.monotonic() < deadline, "the background worker stopped after an unexpected error"
            time.sleep(0.05)
        assert [r["value"] for r in srv.read_all("cfg", 0)] == ["v2"] * 4


def test_cli_compact_and_describe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rich tables: no wrapping of the columns we look for
    settings = local_settings(tmp_path)
    with run_server(settings) as srv:
        srv.create_topic("cfg", partitions=2, **COMPACT)
        srv.create_topic("plain")
        produce_rounds(srv, "cfg", rounds=4, keys=8)
        produce_rounds(srv, "plain", rounds=1, keys=3)

        # The embedded backend: the CLI works on the server's data directory directly.
        code = main(["compact", "--topic", "cfg", "--force", "--data-dir", settings.data_dir])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "1 job(s); retention dropped 0 chunk(s); GC deleted 0 obsolete file(s) and 0 orphan(s)" in out
        (row,) = [line.split() for line in out.splitlines() if " clean " in line]
        assert row[1:3] == ["clean", "committed"]
        assert row[5:8] == ["32", "8", "75.0%"]  # records in, out, removed

        # The running server serves the compacted log.
        assert {r["key"]: r["value"] for p in range(2) for r in srv.read_all("cfg", p)} == {
            f"k{k}": "v3" for k in range(8)
        }
        code = main(["topics", "describe", "cfg", "--url", srv.url])
        out = capsys.readouterr().out
        assert code == 0
        assert "dirty ratio" in out
        assert "cleaned to" in out
        assert "last compaction" in out
        parts = [line.split() for line in out.splitlines() if line.split()[:1] in (["0"], ["1"])]
        assert len(parts) == 2
        for part in parts:
            # partition, log start, high watermark, cleaned to (= high watermark), dirty ratio, date
            assert part[3] == part[2]
            assert part[4] == "0.00"
            assert part[5] != "never"
        assert any(line.split()[:2] == ["L1", "1"] for line in out.splitlines())

        # Nothing more to do: a second run plans nothing.
        assert main(["compact", "--topic", "cfg", "--force", "--data-dir", settings.data_dir, "-q"]) == 0
        assert capsys.readouterr().out == ""
