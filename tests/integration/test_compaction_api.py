"""The compaction and size endpoints over real HTTP: the job list with each job's report, per-partition
detail (bytes by level), a topic's dirty ratio over time with what compaction removed, and the paged topic
listing with summaries; and that callers only see the topics they may describe.

Compaction rounds are driven by the test (``runtime.compaction_round().run_once()``) on a ``SkewedClock``
the server shares, so lease expiry and the once-a-minute samples come without waiting.
"""

from __future__ import annotations

import base64
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from planner.stats import JobOutcome
from storage.clock import SkewedClock
from storage.objectstore import open_object_store
from storage.objectstore.base import GET
from storage.objectstore.faults import FaultyObjectStore
from strata.settings import Settings
from tests.fixtures.principals import BOB_TOKEN, PASSWORDS, write_principals
from tests.fixtures.server import RunningServer, local_settings, run_server

pytestmark = pytest.mark.integration

COMPACT = {"cleanup.policy": "compact"}


def produce_rounds(srv: RunningServer, topic: str, rounds: int, keys: int) -> None:
    """``rounds`` requests of ``keys`` keyed records, one at a time: one flush, one L0 file each."""
    for r in range(rounds):
        response = srv.produce(topic, [{"key": f"k{k}", "value": f"v{r}"} for k in range(keys)])
        assert response.status_code == 200, response.text


def get(client: httpx.Client, path: str, status: int = 200, **params: Any) -> Any:
    response = client.get(path, params=params)
    assert response.status_code == status, response.text
    return response.json()


def partitions(srv: RunningServer, topic: str) -> list[dict[str, Any]]:
    body = get(srv.client, f"/v1/topics/{topic}/partitions")
    assert body["topic"] == topic
    assert body["next_after"] is None
    found: list[dict[str, Any]] = body["partitions"]
    return found


def test_a_compaction_shows_in_the_jobs_the_partitions_and_the_history(backend_settings: Settings) -> None:
    clock = SkewedClock()
    with run_server(backend_settings, clock=clock) as srv:
        srv.create_topic("cfg", partitions=2, **COMPACT)
        srv.create_topic("plain")
        produce_rounds(srv, "cfg", rounds=4, keys=10)
        produce_rounds(srv, "plain", rounds=1, keys=3)
        compaction = srv.runtime.compaction_round()

        before = partitions(srv, "cfg")
        assert [p["partition"] for p in before] == [0, 1]
        for p in before:
            assert p["records"] == p["high_watermark"] > 0
            assert p["bytes_by_level"] == [{"level": 0, "files": 4, "bytes": p["bytes"]}]
            assert (p["cleaned_offset"], p["dirty_ratio"], p["last_compaction_ms"]) == (0, 1.0, None)
        (plain,) = partitions(srv, "plain")
        assert plain["dirty_ratio"] is None  # not compacted: nothing is ever cleaned
        assert (plain["records"], plain["bytes_by_level"][0]["files"]) == (3, 1)

        # A sample before the compaction; a round in the same minute samples nothing.
        assert compaction.sampler.run_once() == 1  # cfg only: plain is not compacted
        assert compaction.sampler.run_once() == 0
        clock.advance(61)
        response = srv.client.post("/v1/topics/cfg/compact")
        assert response.status_code == 202, response.text
        (planned,) = response.json()["planned"]
        result = compaction.run_once()
        ((job, stats),) = result.jobs
        assert (job.job_id, stats.outcome, result.samples) == (planned["job_id"], JobOutcome.COMMITTED, 1)

        after = partitions(srv, "cfg")
        assert sum(p["records"] for p in after) == 10  # one record per key is left
        assert sum(p["high_watermark"] for p in after) == 40  # offsets untouched
        for p in after:
            assert p["cleaned_offset"] == p["high_watermark"]
            assert p["bytes_by_level"] == [{"level": 1, "files": 1, "bytes": p["bytes"]}]
            assert p["dirty_ratio"] == 0.0
            assert p["last_compaction_ms"] is not None
        bytes_before, bytes_after = sum(p["bytes"] for p in before), sum(p["bytes"] for p in after)
        assert 0 < bytes_after < bytes_before

        listed = get(srv.client, "/v1/compaction/jobs")
        assert listed["next_before"] is None
        (shown,) = listed["jobs"]
        assert {k: shown[k] for k in ("job_id", "kind", "state", "topics", "input_files", "attempts")} == {
            "job_id": job.job_id,
            "kind": "clean",
            "state": "done",
            "topics": ["cfg"],
            "input_files": 4,
            "attempts": 1,
        }
        assert shown["partitions"] == [{"topic": "cfg", "partition": 0}, {"topic": "cfg", "partition": 1}]
        assert shown["owner"] == compaction.owner
        assert shown["updated_ms"] >= shown["created_ms"]
        report = shown["stats"]
        assert (report["outcome"], report["error"]) == ("committed", None)
        assert (report["records_in"], report["records_out"], report["offsets_removed"]) == (40, 10, 30)
        # Chunk bytes in and out are the partitions' bytes before and after.
        assert (report["bytes_in"], report["bytes_out"]) == (bytes_before, bytes_after)
        assert (report["input_files"], report["output_files"], report["partitions"]) == (4, 1, 2)
        assert report["duration_ms"] >= 0
        assert report["bytes_read"] > 0
        assert report["bytes_written"] >= bytes_after
        assert shown["stats_line"].startswith(f"job {job.job_id} (clean) committed in ")
        assert "40 records in, 10 out (75.0% removed" in shown["stats_line"]

        # Filters and paging.
        assert [j["job_id"] for j in get(srv.client, "/v1/compaction/jobs", state="done")["jobs"]] == [
            job.job_id
        ]
        assert [j["job_id"] for j in get(srv.client, "/v1/compaction/jobs", topic="cfg")["jobs"]] == [
            job.job_id
        ]
        for params in ({"state": "failed"}, {"state": "running"}, {"state": "pending"}, {"topic": "plain"}):
            assert get(srv.client, "/v1/compaction/jobs", **params) == {"jobs": [], "next_before": None}
        assert get(srv.client, "/v1/compaction/jobs", before=job.job_id)["jobs"] == []
        assert get(srv.client, "/v1/compaction/jobs", 400, state="leased")["error_code"] == 40001
        assert get(srv.client, "/v1/compaction/jobs", 400, topic="bad..name!")["error_code"] == 40003
        assert get(srv.client, "/v1/compaction/jobs", 400, limit=0)["error_code"] == 40001

        history = get(srv.client, "/v1/topics/cfg/compaction")
        assert (history["topic"], history["cleanup_policy"], history["dirty_ratio"]) == (
            "cfg",
            "compact",
            0.0,
        )
        first, second = history["history"]
        assert (first["dirty_ratio"], first["dirty_bytes"], first["live_bytes"]) == (
            1.0,
            bytes_before,
            bytes_before,
        )
        assert (second["dirty_ratio"], second["dirty_bytes"], second["live_bytes"]) == (0.0, 0, bytes_after)
        assert second["ts_ms"] - first["ts_ms"] >= 60_000
        (removed,) = history["removed"]
        assert removed == {
            "ts_ms": removed["ts_ms"],
            "job_id": job.job_id,
            "bytes_removed": bytes_before - bytes_after,
            "records_removed": 30,
        }
        assert second["ts_ms"] >= removed["ts_ms"] >= first["ts_ms"]
        # since_ms bounds both lists.
        later = get(srv.client, "/v1/topics/cfg/compaction", since_ms=first["ts_ms"] + 1)
        assert (later["history"], later["removed"]) == ([second], [removed])
        later = get(srv.client, "/v1/topics/cfg/compaction", since_ms=second["ts_ms"] + 1)
        assert (later["history"], later["removed"]) == ([], [])

        assert get(srv.client, "/v1/topics/plain/compaction") == {
            "topic": "plain",
            "cleanup_policy": "delete",
            "dirty_ratio": None,
            "history": [],
            "removed": [],
        }
        for path in ("/v1/topics/nope/compaction", "/v1/topics/nope/partitions"):
            assert get(srv.client, path, 404)["error_code"] == 40401
        assert get(srv.client, "/v1/topics/bad..name!/partitions", 400)["error_code"] == 40003


def test_partitions_are_paged(tmp_path: Path) -> None:
    with run_server(local_settings(tmp_path)) as srv:
        srv.create_topic("wide", partitions=7)
        response = srv.produce("wide", [{"value": "x", "partition": p} for p in range(7)])
        assert response.status_code == 200, response.text
        seen: list[int] = []
        after = -1
        while True:
            body = get(srv.client, "/v1/topics/wide/partitions", after=after, limit=3)
            seen += [p["partition"] for p in body["partitions"]]
            assert all(p["records"] == 1 for p in body["partitions"])
            if body["next_after"] is None:
                break
            after = body["next_after"]
        assert seen == list(range(7))
        assert get(srv.client, "/v1/topics/wide/partitions", after=6) == {
            "topic": "wide",
            "partitions": [],
            "next_after": None,
        }
        assert get(srv.client, "/v1/topics/wide/partitions", 400, after=-2)["error_code"] == 40001


def test_a_job_that_keeps_failing_is_running_with_its_error_then_failed(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    # Every streaming GET of the sync store (compaction's) fails; flushes and fetches use the async one.
    store = FaultyObjectStore(
        open_object_store(settings.bucket_url, retry=None),
        failure_rate=1.0,
        rng=random.Random(1),
        kinds=frozenset({GET}),
    )
    clock = SkewedClock()
    with run_server(settings, store=store, clock=clock) as srv:
        srv.create_topic("cfg", **COMPACT)
        produce_rounds(srv, "cfg", rounds=3, keys=4)
        response = srv.client.post("/v1/topics/cfg/compact")
        assert response.status_code == 202, response.text
        (planned,) = response.json()["planned"]
        compaction = srv.runtime.compaction_round()
        attempts = compaction.config.max_job_attempts

        ((_, stats),) = compaction.run_once().jobs
        assert stats.outcome is JobOutcome.INTERRUPTED
        (running,) = get(srv.client, "/v1/compaction/jobs", state="running")["jobs"]
        assert (running["job_id"], running["attempts"], running["owner"]) == (
            planned["job_id"],
            1,
            compaction.owner,
        )
        assert running["stats"]["outcome"] == "interrupted"
        assert running["stats"]["error"]["code"] == 50003
        assert "injected fault" in running["stats"]["error"]["message"]
        assert f"job {planned['job_id']} (clean) interrupted (50003: injected fault" in running["stats_line"]

        # Each lease expires; the attempt after the last allowed one gives the job up.
        for _ in range(attempts):
            clock.advance(61)
            compaction.run_once()
        assert get(srv.client, "/v1/compaction/jobs", state="running")["jobs"] == []
        (failed,) = get(srv.client, "/v1/compaction/jobs", state="failed")["jobs"]
        assert (failed["job_id"], failed["state"], failed["attempts"]) == (
            planned["job_id"],
            "failed",
            attempts + 1,
        )
        error = failed["stats"]["error"]
        assert error["code"] == 50009
        assert error["message"].startswith(
            f"given up after {attempts} attempt(s); the last ended with 50003: "
        )
        assert "injected fault" in error["message"]
        assert failed["stats"]["outcome"] == "failed"
        assert failed["stats_line"].startswith(f"job {planned['job_id']} (clean) failed (50009: given up")
        assert get(srv.client, "/v1/compaction/jobs", topic="cfg")["jobs"] == [failed]
        assert get(srv.client, "/v1/topics/cfg/compaction")["removed"] == []


def basic(user: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{PASSWORDS[user]}".encode()).decode()}


def test_callers_see_only_the_jobs_and_topics_they_may_describe(tmp_path: Path) -> None:
    settings = replace(local_settings(tmp_path), principals_file=write_principals(tmp_path))
    with run_server(settings) as srv:
        admin, bob = basic("admin"), {"Authorization": f"Bearer {BOB_TOKEN}"}
        srv.client.headers.update(admin)
        srv.create_topic("orders.eu", **COMPACT)
        srv.create_topic("payroll", **COMPACT)
        job_ids = {}
        for topic in ("orders.eu", "payroll"):  # one file each, so one clean job each, payroll's newest
            produce_rounds(srv, topic, rounds=2, keys=3)
            response = srv.client.post(f"/v1/topics/{topic}/compact")
            assert response.status_code == 202, response.text
            job_ids[topic] = response.json()["planned"][0]["job_id"]
        srv.runtime.compaction_round().run_once()

        def jobs(headers: dict[str, str], **params: Any) -> Any:
            response = srv.client.get("/v1/compaction/jobs", params=params, headers=headers)
            assert response.status_code == 200, response.text
            return response.json()

        assert [j["job_id"] for j in jobs(admin)["jobs"]] == [job_ids["payroll"], job_ids["orders.eu"]]
        assert [j["job_id"] for j in jobs(bob)["jobs"]] == [job_ids["orders.eu"]]
        # A page skips what the caller may not see and still fills up from older jobs.
        page = jobs(bob, limit=1)
        assert [j["job_id"] for j in page["jobs"]] == [job_ids["orders.eu"]]
        assert page["next_before"] is None
        page = jobs(admin, limit=1)
        assert ([j["job_id"] for j in page["jobs"]], page["next_before"]) == (
            [job_ids["payroll"]],
            job_ids["payroll"],
        )
        page = jobs(admin, limit=1, before=page["next_before"])
        assert ([j["job_id"] for j in page["jobs"]], page["next_before"]) == ([job_ids["orders.eu"]], None)

        for path in (
            "/v1/compaction/jobs?topic=payroll",
            "/v1/topics/payroll/partitions",
            "/v1/topics/payroll/compaction",
        ):
            response = srv.client.get(path, headers=bob)
            assert (response.status_code, response.json()["error_code"]) == (403, 40301), path
        assert srv.client.get("/v1/topics/orders.eu/compaction", headers=bob).status_code == 200
        listed = srv.client.get("/v1/topics", params={"detail": "true"}, headers=bob).json()
        assert listed["topics"] == ["orders.eu"]
        assert [s["name"] for s in listed["summaries"]] == ["orders.eu"]
        assert httpx.get(f"{srv.url}/v1/compaction/jobs").status_code == 401  # no credentials


def test_topics_are_listed_by_page_with_summaries(tmp_path: Path) -> None:
    with run_server(local_settings(tmp_path)) as srv:
        paged = [f"pg.{i:03d}" for i in range(120)]
        for name in [*paged, "other-a", "zz"]:
            srv.create_topic(
                name, partitions=2 if name == "pg.001" else 1, **(COMPACT if name == "pg.001" else {})
            )
        assert srv.produce("pg.000", [{"value": f"v{i}"} for i in range(3)]).status_code == 200
        assert srv.produce("pg.001", [{"key": "k", "value": "v"}] * 2).status_code == 200

        # Without paging parameters: every name, and nothing else, as before paging existed.
        assert get(srv.client, "/v1/topics") == {"topics": sorted([*paged, "other-a", "zz"])}
        assert get(srv.client, "/v1/topics", prefix="pg.") == {"topics": paged}

        seen: list[str] = []
        sizes: list[int] = []
        after: str | None = None
        while True:
            params: dict[str, Any] = {"prefix": "pg.", "limit": 50, **({"after": after} if after else {})}
            body = get(srv.client, "/v1/topics", **params)
            assert set(body) == {"topics", "next_after"}
            seen += body["topics"]
            sizes.append(len(body["topics"]))
            after = body["next_after"]
            if after is None:
                break
            assert after == body["topics"][-1]
        assert (seen, sizes) == (paged, [50, 50, 20])
        assert get(srv.client, "/v1/topics", after="pg.118", limit=5) == {
            "topics": ["pg.119", "zz"],
            "next_after": None,
        }

        detail = get(srv.client, "/v1/topics", prefix="pg.", limit=25, detail="true")
        assert detail["topics"] == paged[:25]
        assert detail["next_after"] == "pg.024"
        assert [s["name"] for s in detail["summaries"]] == paged[:25]
        by_name = {s["name"]: s for s in detail["summaries"]}
        assert by_name["pg.000"]["records"] == 3
        assert by_name["pg.000"]["bytes"] > 0
        assert (by_name["pg.000"]["cleanup_policy"], by_name["pg.000"]["dirty_ratio"]) == ("delete", None)
        assert {
            k: by_name["pg.001"][k] for k in ("partitions", "records", "cleanup_policy", "dirty_ratio")
        } == {
            "partitions": 2,
            "records": 2,
            "cleanup_policy": "compact",
            "dirty_ratio": 1.0,
        }
        assert {k: by_name["pg.002"][k] for k in ("partitions", "records", "bytes", "dirty_ratio")} == {
            "partitions": 1,
            "records": 0,
            "bytes": 0,
            "dirty_ratio": None,
        }
        # detail without a limit: a page of 100.
        body = get(srv.client, "/v1/topics", detail="true")
        assert (len(body["summaries"]), body["next_after"]) == (100, "pg.098")  # after other-a
        for params in ({"limit": 0}, {"limit": 1001}, {"prefix": "x" * 250}):
            assert get(srv.client, "/v1/topics", 400, **params)["error_code"] == 40001
