"""The lake's status (``GET /v1/topics/{topic}/lake``, ``GET /v1/lake``), its "commit now", its Prometheus
metrics and its permissions, on real agents whose lake round (``Runtime.lake_round``, the one the worker
loop runs) writes real Iceberg tables.

Records are produced with timestamps an hour old, so that the lag in seconds has a floor that does not
depend on how fast the machine is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pipeline.lake.runs import COMMITTED, FAILED
from pipeline.lake.table_properties import TOPIC_PROPERTY
from storage.lake_config import default_table
from strata.cli import main as cli_main
from tests.fixtures.server import RunningServer, local_settings, run_server

pytestmark = pytest.mark.integration

HOUR_MS = 3_600_000
RAW = {"strata.iceberg.mode": "raw"}


def produce(server: RunningServer, topic: str, counts: dict[int, int], age_ms: int = HOUR_MS) -> None:
    """``counts[p]`` records into each partition p, stamped ``age_ms`` ago."""
    stamp = int(time.time() * 1000) - age_ms
    records = [
        {"key": f"k{i}", "value": f"v{p}-{i}", "partition": p, "timestamp": stamp}
        for p, n in counts.items()
        for i in range(n)
    ]
    response = server.produce(topic, records)
    assert response.status_code == 200, response.text


def status(server: RunningServer, topic: str) -> dict[str, Any]:
    response = server.client.get(f"/v1/topics/{topic}/lake")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def run_round(server: RunningServer, topic: str, force: bool = False) -> list[Any]:
    """One lake round for ``topic`` (not forced: only if it is due), as the worker runs it: its runs."""
    return list(server.runtime.lake_round().run_once(topic, force=force).runs)


def metrics(server: RunningServer) -> dict[tuple[str, str], float]:
    """(sample name, topic label) -> value, for the strata_lake_* samples."""
    text = server.client.get("/metrics").text
    return {
        (s.name, s.labels.get("topic", "")): s.value
        for family in text_string_to_metric_families(text)
        if family.name.startswith("strata_lake_")
        for s in family.samples
    }


def test_the_status_follows_produce_and_commits(server: RunningServer) -> None:
    topic = "lake.status-1"
    server.create_topic(topic, 2, **RAW)
    produce(server, topic, {0: 3, 1: 2})
    before = status(server, topic)
    assert (before["mode"], before["table"], before["commit_interval_ms"]) == (
        "raw",
        default_table(topic),
        60_000,
    )
    assert before["committed_offsets"] == {}
    assert before["last_commit_ms"] is None
    assert before["last_run"] is None
    assert before["last_snapshot_id"] is None
    assert [(p["partition"], p["committed_offset"], p["lag_records"]) for p in before["partitions"]] == [
        (0, None, 3),
        (1, None, 2),
    ]
    assert before["lag_records"] == 5
    assert before["lag_seconds"] >= HOUR_MS / 1000

    (run,) = run_round(server, topic)  # never run yet: due whatever the interval
    assert run.outcome == COMMITTED, run.error
    after = status(server, topic)
    table = server.runtime.lake_round().writer().catalog.load_table(default_table(topic))
    assert after["committed_offsets"] == {"0": 3, "1": 2}
    assert after["last_snapshot_id"] == str(table.current_snapshot().snapshot_id)
    assert after["last_commit_ms"] is not None
    assert after["last_run"] == {"at_ms": after["last_run"]["at_ms"], "lag_records": 0, "error": None}
    assert after["last_run"]["at_ms"] <= after["last_commit_ms"]  # the run began, then committed
    assert (after["lag_records"], after["lag_seconds"], after["last_error"]) == (0, 0.0, None)
    assert [
        (p["committed_offset"], p["last_stable_offset"], p["lag_records"]) for p in after["partitions"]
    ] == [
        (3, 3, 0),
        (2, 2, 0),
    ]
    assert not after["commit_requested"]
    assert not after["writing"]

    produce(server, topic, {1: 4}, age_ms=2 * HOUR_MS)
    behind = status(server, topic)
    assert behind["committed_offsets"] == {"0": 3, "1": 2}
    assert [(p["lag_records"], p["lag_seconds"] > 0) for p in behind["partitions"]] == [(0, False), (4, True)]
    assert behind["lag_records"] == 4
    assert behind["lag_seconds"] >= 2 * HOUR_MS / 1000

    listed = server.client.get("/v1/lake").json()["tables"]
    assert [(t["topic"], t["lag_records"]) for t in listed if t["topic"] == topic] == [(topic, 4)]


def test_a_topic_without_the_lake_and_an_unknown_topic(server: RunningServer) -> None:
    server.create_topic("lake-off", 1)
    off = status(server, "lake-off")
    assert (off["mode"], off["table"], off["partitions"], off["lag_records"], off["last_run"]) == (
        "disabled",
        None,
        [],
        0,
        None,
    )
    assert "lake-off" not in [t["topic"] for t in server.client.get("/v1/lake").json()["tables"]]
    missing = server.client.get("/v1/topics/lake-nope/lake")
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40401)
    refused = server.client.post("/v1/topics/lake-off/lake/commit-now")
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42230)
    missing = server.client.post("/v1/topics/lake-nope/lake/commit-now")
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40401)
    bad = server.client.get("/v1/topics/bad name/lake")
    assert bad.status_code == 400


@pytest.fixture
def local(tmp_path: Path) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path)) as srv:
        yield srv


def test_the_listing_comes_by_page(local: RunningServer) -> None:
    for name in ("lake-p1", "lake-p2", "lake-p3"):
        local.create_topic(name, 1, **RAW)
    local.create_topic("lake-p0-plain", 1)
    first = local.client.get("/v1/lake", params={"limit": 2}).json()
    assert ([t["topic"] for t in first["tables"]], first["next_after"]) == (["lake-p1", "lake-p2"], "lake-p2")
    rest = local.client.get("/v1/lake", params={"limit": 2, "after": "lake-p2"}).json()
    assert ([t["topic"] for t in rest["tables"]], rest["next_after"]) == (["lake-p3"], None)
    assert local.client.get("/v1/lake", params={"limit": 0}).status_code == 400


def test_commit_now_commits_at_the_next_round_before_the_interval(local: RunningServer) -> None:
    topic = "lake-now"
    local.create_topic(topic, 1, **RAW, **{"strata.iceberg.commit.interval.ms": str(HOUR_MS)})
    produce(local, topic, {0: 2})
    assert [r.outcome for r in run_round(local, topic)] == [COMMITTED]
    produce(local, topic, {0: 5})
    assert run_round(local, topic) == []  # not due for an hour
    assert status(local, topic)["lag_records"] == 5

    answer = local.client.post(f"/v1/topics/{topic}/lake/commit-now")
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"topic": topic, "table": default_table(topic), "commit_requested": True}
    assert status(local, topic)["commit_requested"] is True
    (run,) = run_round(local, topic)
    assert (run.outcome, dict(run.offsets)) == (COMMITTED, {0: 7})
    after = status(local, topic)
    assert (after["commit_requested"], after["lag_records"], after["committed_offsets"]) == (
        False,
        0,
        {"0": 7},
    )
    assert run_round(local, topic) == []  # the request is done: the interval rules again

    # Nothing new to commit: the request is still satisfied by the round, not left standing.
    assert local.client.post(f"/v1/topics/{topic}/lake/commit-now").status_code == 202
    assert [r.outcome for r in run_round(local, topic)] == ["up to date"]
    assert status(local, topic)["commit_requested"] is False
    assert run_round(local, topic) == []


def test_commit_now_wakes_the_worker_loop(tmp_path: Path) -> None:
    """Role all with a worker interval far longer than the test: only the wake-up makes the rounds run."""
    settings = local_settings(tmp_path, worker_interval_ms=3_600_000)
    with run_server(settings, with_worker=True) as srv:
        topic = "lake-wake"
        srv.create_topic(topic, 1, **RAW, **{"strata.iceberg.commit.interval.ms": str(HOUR_MS)})
        for expected in (3, 7):
            produce(srv, topic, {0: expected - (0 if expected == 3 else 3)})
            assert srv.client.post(f"/v1/topics/{topic}/lake/commit-now").status_code == 202
            deadline = time.monotonic() + 60
            while status(srv, topic)["committed_offsets"] != {"0": expected}:
                assert time.monotonic() < deadline, status(srv, topic)
                time.sleep(0.1)


def test_an_error_shows_in_the_status_and_the_metrics(local: RunningServer) -> None:
    topic = "lake-broken"
    local.create_topic(topic, 1, **RAW)
    produce(local, topic, {0: 2})
    assert [r.outcome for r in run_round(local, topic)] == [COMMITTED]
    # The table now claims to hold another topic: the writer refuses to append to it.
    table = local.runtime.lake_round().writer().catalog.load_table(default_table(topic))
    with table.transaction() as transaction:
        transaction.set_properties({TOPIC_PROPERTY: "someone-else"})
    produce(local, topic, {0: 3})
    (run,) = run_round(local, topic, force=True)
    assert run.outcome == FAILED
    broken = status(local, topic)
    assert "holds topic 'someone-else'" in broken["last_error"]
    assert broken["last_run"]["error"] == broken["last_error"]
    assert (broken["committed_offsets"], broken["lag_records"]) == ({"0": 2}, 3)
    assert metrics(local)[("strata_lake_errors_total", topic)] == 1

    table = local.runtime.lake_round().writer().catalog.load_table(default_table(topic))
    with table.transaction() as transaction:
        transaction.set_properties({TOPIC_PROPERTY: topic})
    (run,) = run_round(local, topic, force=True)
    assert run.outcome == COMMITTED, run.error
    fixed = status(local, topic)
    assert (fixed["last_error"], fixed["lag_records"], fixed["committed_offsets"]) == (None, 0, {"0": 5})


def test_a_table_claimed_by_another_topic_shows_in_the_status(local: RunningServer) -> None:
    local.create_topic("lake-owner", 1, **RAW)
    local.create_topic("lake-squatter", 1, **RAW, **{"strata.iceberg.table": default_table("lake-owner")})
    produce(local, "lake-squatter", {0: 2})
    outcomes = {r.topic: r.outcome for r in local.runtime.lake_round().run_once().runs}
    assert outcomes == {"lake-owner": COMMITTED, "lake-squatter": "refused"}
    refused = status(local, "lake-squatter")
    assert "is the table of topic 'lake-owner'" in refused["last_error"]
    assert (refused["lag_records"], refused["last_run"]) == (2, None)
    assert metrics(local)[("strata_lake_errors_total", "lake-squatter")] == 1
    assert status(local, "lake-owner")["last_error"] is None


def test_metrics_count_commits_and_show_the_lag(local: RunningServer) -> None:
    topic, quiet = "lake-metrics", "lake-metrics-quiet"
    for name in (topic, quiet):
        local.create_topic(name, 2, **RAW, **{"strata.iceberg.commit.interval.ms": str(HOUR_MS)})
    produce(local, topic, {0: 4, 1: 2})
    assert [r.outcome for r in run_round(local, topic)] == [COMMITTED]
    produce(local, topic, {0: 3})
    (run,) = run_round(local, topic, force=True)
    assert (run.outcome, run.rows) == (COMMITTED, 3)
    seen = metrics(local)
    assert seen[("strata_lake_commits_total", topic)] == 2
    assert seen[("strata_lake_records_total", topic)] == 9
    assert seen[("strata_lake_bytes_total", topic)] > 0
    assert seen[("strata_lake_commit_seconds_count", topic)] == 2
    assert (seen[("strata_lake_lag_records", topic)], seen[("strata_lake_lag_seconds", topic)]) == (0, 0)
    assert ("strata_lake_errors_total", topic) not in seen

    # A round that commits nothing (the topic is not due) still sets every table's lag.
    produce(local, topic, {1: 6})
    produce(local, quiet, {0: 1})
    runs = local.runtime.lake_round().run_once().runs
    assert [(r.topic, r.outcome) for r in runs] == [(quiet, COMMITTED)]  # its first run; the other not due
    seen = metrics(local)
    assert seen[("strata_lake_lag_records", topic)] == 6
    assert seen[("strata_lake_lag_seconds", topic)] >= HOUR_MS / 1000
    assert seen[("strata_lake_commits_total", topic)] == 2
    assert seen[("strata_lake_lag_records", quiet)] == 0  # committed by that round: it had never run

    # A topic whose lake is turned off loses its lag series.
    local.client.patch(f"/v1/topics/{topic}/configs", json={"configs": {"strata.iceberg.mode": None}})
    local.runtime.lake_round().run_once()
    seen = metrics(local)
    assert ("strata_lake_lag_records", topic) not in seen
    assert ("strata_lake_lag_records", quiet) in seen
    text = local.client.get("/metrics").text
    assert local.runtime.settings.bucket_url not in text
    assert "file://" not in text


PRINCIPALS = """
[principals.reader]
password = "reader-pw-71"
tokens = ["reader-token-71"]
topics = { read = ["lk-"] }

[principals.admin]
password = "admin-pw-71"
tokens = ["admin-token-71"]
topics = { admin = ["lk-"] }

[principals.stranger]
password = "stranger-pw-71"
tokens = ["stranger-token-71"]
"""


def test_permissions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "principals.toml"
    path.write_text(PRINCIPALS)
    with run_server(local_settings(tmp_path, principals_file=str(path))) as srv:
        admin = {"Authorization": "Bearer admin-token-71"}
        body = {"name": "lk-orders", "partitions": 1, "configs": RAW}
        assert srv.client.post("/v1/topics", json=body, headers=admin).status_code == 201

        def ask(method: str, path: str, who: str | None) -> httpx.Response:
            headers = {"Authorization": f"Bearer {who}-token-71"} if who else {}
            return srv.client.request(method, path, headers=headers)

        show, now, listing = "/v1/topics/lk-orders/lake", "/v1/topics/lk-orders/lake/commit-now", "/v1/lake"
        assert [ask(m, p, None).status_code for m, p in (("GET", show), ("POST", now), ("GET", listing))] == [
            401,
            401,
            401,
        ]
        assert ask("GET", show, "reader").status_code == 200
        refused = ask("POST", now, "reader")
        assert (refused.status_code, refused.json()["error_code"]) == (403, 40301)
        assert ask("POST", now, "admin").status_code == 202
        refused = ask("GET", show, "stranger")
        assert (refused.status_code, refused.json()["error_code"]) == (403, 40301)
        assert ask("GET", listing, "stranger").json() == {"tables": [], "next_after": None}
        assert [t["topic"] for t in ask("GET", listing, "reader").json()["tables"]] == ["lk-orders"]
        # The CLI carries its --token, and a refusal is the server's code with exit status 1.
        base = ["--url", srv.url, "--token"]
        assert cli_main(["lake", "show", "--topic", "lk-orders", *base, "reader-token-71"]) == 0
        assert cli_main(["lake", "commit-now", "--topic", "lk-orders", *base, "reader-token-71"]) == 1
        assert "error 40301" in capsys.readouterr().err
        assert cli_main(["lake", "commit-now", "--topic", "lk-orders", *base, "admin-token-71"]) == 0


def test_the_cli(local: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    topic = "lake-cli"
    local.create_topic(topic, 2, **RAW)
    produce(local, topic, {0: 2, 1: 1})
    assert [r.outcome for r in run_round(local, topic)] == [COMMITTED]
    produce(local, topic, {1: 4})
    url = ["--url", local.url]

    assert cli_main(["lake", "list", *url]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["TOPIC", "MODE", "TABLE", "LAG", "LAST", "COMMIT", "ERROR"]
    assert row.split()[:5] == [topic, "raw", default_table(topic), "4", "offsets,"]
    assert row.split()[-1] == "-"

    assert cli_main(["lake", "show", "--topic", topic, *url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [f"topic: {topic}", "mode: raw", f"table: {default_table(topic)}"]
    assert "last error: -" in lines
    assert "commit requested: no" in lines
    # What the lake holds and sent: the warehouse's files, each one upload of three PUT-class requests.
    shown = status(local, topic)
    assert f"stored: {shown['stored']['bytes']} bytes in {shown['stored']['files']} files" in lines
    assert f"requests: {3 * shown['stored']['files']} PUT, {shown['requests']['get']} GET," in " ".join(lines)
    assert [line.split()[:4] for line in lines[-3:]] == [
        ["PARTITION", "COMMITTED", "LSO", "LAG"],
        ["0", "2", "2", "0"],
        ["1", "1", "5", "4"],
    ]

    assert cli_main(["lake", "commit-now", "--topic", topic, *url]) == 0
    assert capsys.readouterr().out.startswith(f"commit of {topic} ({default_table(topic)}) asked for")
    assert status(local, topic)["commit_requested"] is True
    assert cli_main(["lake", "show", "--topic", topic, "--json", *url]) == 0
    assert json.loads(capsys.readouterr().out)["commit_requested"] is True

    assert cli_main(["lake", "show", "--topic", "lake-none", *url]) == 1
    assert "error 40401" in capsys.readouterr().err
