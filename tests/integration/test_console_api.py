"""The API endpoints the console reads beside the core API: the record browser, the cluster view and the
agent's metrics history. Real server, real HTTP."""

from __future__ import annotations

import base64
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from storage.errors import Unavailable
from storage.metadata.base import MetadataStore
from tests.fixtures.server import RunningServer, local_settings, run_server

pytestmark = pytest.mark.integration


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def browse(srv: RunningServer, topic: str, **params: Any) -> dict[str, Any]:
    answer = srv.client.get(f"/v1/topics/{topic}/browse", params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def offsets(page: dict[str, Any]) -> list[tuple[int, int]]:
    return [(r["partition"], r["offset"]) for r in page["records"]]


def test_browse_starts_pages_filters_and_errors(tmp_path: Path) -> None:
    with run_server(local_settings(tmp_path)) as srv:
        srv.create_topic("b", partitions=2)
        base = int(time.time() * 1000) - 100_000
        for p in range(2):
            recs = [
                {"key": f"k{i}", "value": f"value-{p}-{i}", "partition": p, "timestamp": base + i * 1000}
                for i in range(30)
            ]
            assert srv.produce("b", recs).status_code == 200

        first = browse(srv, "b", partition=0, limit=10)
        assert offsets(first) == [(0, i) for i in range(10)]
        assert first["records"][3]["key"] == b64("k3")
        assert first["records"][3]["value"] == b64("value-0-3")
        assert (first["cursor"], first["exhausted"], first["gaps"]) == ("0:10", False, [])
        nxt = browse(srv, "b", partition=0, limit=10, cursor=first["cursor"])
        assert offsets(nxt) == [(0, i) for i in range(10, 20)]

        end = browse(srv, "b", partition=1, start="end", limit=5)
        assert offsets(end) == [(1, i) for i in range(25, 30)]
        assert end["exhausted"] is True
        at = browse(srv, "b", partition=1, start="offset", offset=12, limit=2)
        assert offsets(at) == [(1, 12), (1, 13)]
        by_time = browse(srv, "b", partition=0, start="timestamp", timestamp=base + 17_500, limit=1)
        assert offsets(by_time) == [(0, 18)]
        beyond = browse(srv, "b", partition=0, start="offset", offset=10_000)  # clamped into the log
        assert (beyond["records"], beyond["exhausted"], beyond["cursor"]) == ([], True, "0:30")

        # All partitions: one page takes from both (round-robin fetches), sorted by timestamp.
        both = browse(srv, "b", limit=60)
        assert sorted(offsets(both)) == sorted((p, i) for p in range(2) for i in range(30))
        stamps = [r["timestamp"] for r in both["records"]]
        assert stamps == sorted(stamps)
        tail = browse(srv, "b", start="end", limit=4)
        assert sorted(offsets(tail)) == [(0, 28), (0, 29), (1, 28), (1, 29)]

        # Filters match substrings of keys and values; every record read counts as scanned.
        found = browse(srv, "b", key_contains="k2", value_contains="-1-", limit=50)
        assert offsets(found) == [(1, 2)] + [(1, i) for i in range(20, 30)]
        assert found["scanned"] == 60
        capped = browse(srv, "b", partition=0, value_contains="nothing", max_scan=7)
        assert (capped["records"], capped["scanned"], capped["cursor"]) == ([], 7, "0:7")

        for params, status, code in (
            ({"cursor": "0:x"}, 400, 40001),
            ({"cursor": "5:1"}, 400, 40001),
            ({"start": "offset"}, 400, 40001),
            ({"start": "timestamp"}, 400, 40001),
            ({"partition": 2}, 404, 40402),
            ({"limit": 0}, 400, 40001),
        ):
            answer = srv.client.get("/v1/topics/b/browse", params=params)
            assert answer.status_code == status, (params, answer.text)
            if code is not None:
                assert answer.json()["error_code"] == code
        answer = srv.client.get("/v1/topics/nope/browse")
        assert (answer.status_code, answer.json()["error_code"]) == (404, 40401)


def test_browse_reports_the_gaps_compaction_left(tmp_path: Path) -> None:
    settings = replace(local_settings(tmp_path), role="all", worker_interval_ms=3_600_000)
    with run_server(settings, with_worker=True) as srv:
        srv.create_topic("g", partitions=1, **{"cleanup.policy": "compact"})
        for i in range(4):  # offsets 0..7: a, b, a, b, ...; the last a (6) and b (7) survive
            assert (
                srv.produce("g", [{"key": "a", "value": f"{i}"}, {"key": "b", "value": f"{i}"}]).status_code
                == 200
            )
        assert srv.client.post("/v1/topics/g/compact").status_code == 202
        deadline = time.monotonic() + 20
        while srv.client.get("/v1/topics/g").json()["partitions"][0]["last_compaction_ms"] is None:
            assert time.monotonic() < deadline, "compaction did not run"
            time.sleep(0.05)
        page = browse(srv, "g")
        assert offsets(page) == [(0, 6), (0, 7)]
        assert page["gaps"] == [{"partition": 0, "first": 0, "last": 5}]
        # A filter does not turn filtered-out records into gaps.
        page = browse(srv, "g", key_contains="b")
        assert offsets(page) == [(0, 7)]
        assert page["gaps"] == [{"partition": 0, "first": 0, "last": 5}]
        # From inside the removed range, the gap starts where the page does.
        page = browse(srv, "g", start="offset", offset=3)
        assert page["gaps"] == [{"partition": 0, "first": 3, "last": 5}]


class MetadataDown:
    """The agent's metadata store, with topic listing failing as an unreachable database does."""

    def __init__(self, inner: MetadataStore) -> None:
        self.inner = inner
        self.down = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def list_topics(self) -> list[str]:
        if self.down:
            raise Unavailable("metadata store unreachable: connection refused")
        return self.inner.list_topics()


def test_cluster_view_reports_the_stores_health(tmp_path: Path) -> None:
    from storage.metadata import open_metadata_store

    settings = local_settings(tmp_path)
    metadata = MetadataDown(open_metadata_store(settings.metadata_url))
    with run_server(settings, metadata=metadata) as srv:
        srv.create_topic("one")
        body = srv.client.get("/v1/cluster").json()
        assert body["metadata"]["ok"] is True
        assert body["metadata"]["backend"] == "sqlite"
        assert body["topics"] == 1
        assert body["object_store"]["kind"] == "file"
        assert body["this_agent"]["kafka_port"] == srv.runtime.kafka.port  # type: ignore[union-attr]
        assert [a["port"] for a in body["agents"]] == [body["this_agent"]["kafka_port"]]
        metadata.down = True
        answer = srv.client.get("/v1/cluster")
        assert answer.status_code == 200  # reported, not raised: this is what one opens when things break
        health = answer.json()["metadata"]
        assert (health["ok"], health["error_code"], answer.json()["topics"]) == (False, 50003, None)
        assert "unreachable" in health["message"]


def test_metrics_history_shows_produce_and_requests(tmp_path: Path) -> None:
    with run_server(local_settings(tmp_path, metrics_sample_ms=100)) as srv:
        srv.create_topic("m")  # the agent's default class on a local directory: low-latency
        srv.create_topic("s", **{"strata.flush.class": "standard"})
        for _ in range(5):
            assert srv.produce("m", [{"value": "x" * 10_000}] * 20).status_code == 200
        assert srv.produce("s", [{"value": "y"}]).status_code == 200
        srv.read_all("m", 0)
        deadline = time.monotonic() + 10
        while True:
            body = srv.client.get("/v1/metrics/history").json()
            points = body["points"]
            produced = [p for p in points if p["produce_mib_s"] > 0]
            fetched = [p for p in points if p["fetch_mib_s"] > 0]
            # Each flush's PUT counts under the class that cut it, with its cost at the PUT price.
            classes = {c for p in points for c, n in p["flush_puts_per_s"].items() if n > 0}
            if produced and fetched and classes == {"standard", "low-latency"}:
                break
            assert time.monotonic() < deadline, points
            time.sleep(0.1)
        assert body["interval_ms"] == 100
        assert body["prices"] == {
            "put_per_1000": 0.005,
            "get_per_1000": 0.0004,
            "storage_per_gb_month": 0.023,
        }
        # No lake-enabled topic: the lake's part is there, all zero (its rates from the second read on).
        assert all(p["lake"] is not None and p["lake"]["stored_bytes"] == 0 for p in points)
        assert points[-1]["lake"]["puts_per_s"] == 0.0
        assert any(p["puts_per_s"] > 0 and p["monthly_cost_usd"] > 0 for p in points)
        assert any(p["produce_p99_ms"] is not None for p in produced)
        for p in points:
            assert p["flush_monthly_cost_usd"] == {
                c: pytest.approx(n * 0.005 / 1000 * 30 * 24 * 3600, rel=1e-3, abs=1e-3)
                for c, n in p["flush_puts_per_s"].items()
            }
        first = points[0]["ts_ms"]
        # Only points after ``since_ms`` come back: the first is left out, every later one already seen is
        # there, and the sampler (every 100 ms) may have added more since.
        later = srv.client.get("/v1/metrics/history", params={"since_ms": first + 1}).json()["points"]
        assert all(p["ts_ms"] > first for p in later)
        assert {p["ts_ms"] for p in points[1:]} <= {p["ts_ms"] for p in later}
        future = int(time.time() * 1000) + 3_600_000
        assert srv.client.get("/v1/metrics/history", params={"since_ms": future}).json()["points"] == []


def test_console_is_served_offline_with_a_content_security_policy(tmp_path: Path) -> None:
    """Every asset the page names is served by the agent (no CDN), under a CSP that allows only its own
    scripts; paths outside the console's directory are refused."""
    import re

    from api.routes.ui import UI_DIR

    with run_server(local_settings(tmp_path)) as srv:
        page = srv.client.get("/ui")
        assert page.status_code == 200
        assert "script-src 'self'" in page.headers["Content-Security-Policy"]
        refs = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assets = [r for r in refs if not r.startswith(("#", "data:"))]
        assert assets, "the page names its assets"
        for ref in assets:
            assert ref.startswith("/ui/assets/"), ref
            answer = srv.client.get(ref)
            assert answer.status_code == 200, ref
            assert "Content-Security-Policy" in answer.headers
        # Modules import each other by relative path only; nothing names another host.
        for path in UI_DIR.rglob("*"):
            if path.suffix in (".js", ".css", ".html") and "vendor" not in path.parts:
                text = path.read_text()
                assert not re.search(r"https?://", text), path
        assert srv.client.get("/ui/assets/../routes/ui.py").status_code == 404
        assert srv.client.get("/ui/assets/%2e%2e/routes/ui.py").status_code == 404
