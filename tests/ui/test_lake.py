"""The console's Lake tab in a real browser (Debian's Chromium), against a real agent whose lake round writes
real Iceberg tables.

- A lake-enabled topic: its table, lag in offsets (records produced after the last commit), last commit,
  what its table holds (the warehouse's files, listed here) and the requests the lake sent for it, and
  the partitions' committed offsets and lag; the overview's Lake card shows the same bytes and files.
  "Commit now" asks for a commit, which the next round makes although the commit interval is an hour; an
  error of the writer (a table claiming another topic) is shown, and goes once fixed.
- A topic without the lake says how to turn it on.
- bob may describe the orders.* topics but not alter them: he sees the status, and "Commit now" shows the
  refusal (403, 40301).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from pipeline.lake.runs import COMMITTED, FAILED
from pipeline.lake.table_properties import TOPIC_PROPERTY
from storage.lake_config import default_table
from tests.fixtures.principals import PASSWORDS, write_principals
from tests.fixtures.server import RunningServer, local_settings, run_server
from tests.ui.pages import open_page

pytestmark = pytest.mark.integration

TOPIC = "orders.lake"
HOUR_MS = 3_600_000


def produce(srv: RunningServer, auth: httpx.Auth, counts: dict[int, int]) -> None:
    stamp = int(time.time() * 1000) - 2 * HOUR_MS
    records = [
        {"value": f"v{p}-{i}", "partition": p, "timestamp": stamp}
        for p, n in counts.items()
        for i in range(n)
    ]
    answer = srv.client.post(f"/v1/topics/{TOPIC}/records", json={"records": records}, auth=auth)
    assert answer.status_code == 200, answer.text


def warehouse(srv: RunningServer) -> list[Path]:
    """The files under the bucket's lake/ prefix (a local directory)."""
    return [p for p in (Path(srv.runtime.settings.data_dir) / "bucket" / "lake").rglob("*") if p.is_file()]


def shown_bytes(n: int) -> str:
    """dom.js's bytes(): whole bytes, or one decimal in the largest binary unit."""
    units, value, i = ["B", "KiB", "MiB", "GiB", "TiB"], float(n), 0
    while value >= 1024 and i < len(units) - 1:
        value, i = value / 1024, i + 1
    return f"{value:.1f} {units[i]}" if i else f"{n} B"


def set_owner(srv: RunningServer, owner: str) -> None:
    table = srv.runtime.lake_round().writer().catalog.load_table(default_table(TOPIC))
    with table.transaction() as transaction:
        transaction.set_properties({TOPIC_PROPERTY: owner})


def test_the_lake_tab(browser: Browser, tmp_path: Path, screenshot_dir: Path) -> None:
    settings = local_settings(tmp_path, principals_file=write_principals(tmp_path), metrics_sample_ms=200)
    alice = httpx.BasicAuth("alice", PASSWORDS["alice"])
    with run_server(settings) as srv:
        configs = {"strata.iceberg.mode": "raw", "strata.iceberg.commit.interval.ms": str(HOUR_MS)}
        for name, with_lake in ((TOPIC, True), ("orders.plain", False)):
            body = {"name": name, "partitions": 2, "configs": configs if with_lake else {}}
            assert srv.client.post("/v1/topics", json=body, auth=alice).status_code == 201
        produce(srv, alice, {0: 3, 1: 2})
        lake = srv.runtime.lake_round()
        assert [r.outcome for r in lake.run_once(TOPIC).runs] == [COMMITTED]
        produce(srv, alice, {1: 4})

        page = open_page(
            browser,
            f"{srv.url}/ui#/topics/{TOPIC}",
            http_credentials={"username": "alice", "password": PASSWORDS["alice"]},
        )
        page.click("#tab-lake")
        expect(page.locator("#lake-table")).to_have_text(default_table(TOPIC))
        expect(page.locator("#lake-lag")).to_have_text("4 offsets")
        expect(page.locator("#card-lake-lag")).to_contain_text("2.0 h old")
        expect(page.locator("#lake-error")).to_have_text("No error.")
        expect(page.locator("#lake-last-run")).to_contain_text("leaving 0 offsets behind")
        # Iceberg's 64-bit snapshot id, exactly (the API sends it as a string).
        snapshot = lake.writer().catalog.load_table(default_table(TOPIC)).current_snapshot().snapshot_id
        expect(page.locator("#card-lake-commit")).to_contain_text(f"snapshot {snapshot}")
        rows = page.locator("table tbody tr")
        expect(rows).to_have_count(2)
        expect(rows.nth(0)).to_contain_text("3")
        expect(rows.nth(1).locator("td").nth(1)).to_have_text("2")  # committed to
        expect(rows.nth(1).locator("td").nth(3)).to_have_text("4")  # lag
        # What the table holds, as the warehouse lists it; every file one upload of three requests.
        files = warehouse(srv)
        expect(page.locator("#lake-stored")).to_have_text(shown_bytes(sum(f.stat().st_size for f in files)))
        expect(page.locator("#card-lake-stored")).to_contain_text(f"{len(files)} files")
        expect(page.locator("#lake-requests")).to_contain_text(f"{3 * len(files)} PUT")
        page.screenshot(path=str(screenshot_dir / "lake.png"), full_page=True)
        # The overview's Lake card (the cluster's view: admin's) shows the same bytes and files.
        overview = open_page(
            browser, f"{srv.url}/ui", http_credentials={"username": "admin", "password": PASSWORDS["admin"]}
        )
        expect(overview.locator("#lake-usage")).to_contain_text(
            f"{shown_bytes(sum(f.stat().st_size for f in files))} in {len(files)} files"
        )
        expect(overview.locator("#lake-cost")).to_contain_text("/month")
        overview.screenshot(path=str(screenshot_dir / "overview-lake.png"), full_page=True)
        assert overview.errors == []  # type: ignore[attr-defined]

        # Commit now: asked for, then made by the next round although the interval is an hour.
        page.click("#lake-commit-now")
        expect(page.locator("#flash .msg").last).to_contain_text(
            f"Commit of {default_table(TOPIC)} asked for"
        )
        expect(page.locator("#lake-requested")).to_have_text("a commit is asked for")
        assert [r.outcome for r in lake.run_once(TOPIC).runs] == [COMMITTED]
        page.reload()
        expect(page.locator("#lake-lag")).to_have_text("0 offsets")
        expect(rows.nth(1).locator("td").nth(1)).to_have_text("6")
        expect(page.locator("#lake-requested")).to_have_count(0)

        # An error of the writer is shown, and goes once the table is fixed.
        set_owner(srv, "someone-else")
        produce(srv, alice, {0: 1})
        assert [r.outcome for r in lake.run_once(TOPIC, force=True).runs] == [FAILED]
        page.reload()
        expect(page.locator("#lake-error")).to_contain_text("holds topic 'someone-else'")
        expect(page.locator("#lake-lag")).to_have_text("1 offsets")
        set_owner(srv, TOPIC)
        assert [r.outcome for r in lake.run_once(TOPIC, force=True).runs] == [COMMITTED]
        page.reload()
        expect(page.locator("#lake-error")).to_have_text("No error.")

        # A topic without the lake.
        page.goto(f"{srv.url}/ui#/topics/orders.plain/lake")
        expect(page.locator("#lake-disabled")).to_contain_text("strata.iceberg.mode=raw")
        assert page.errors == []  # type: ignore[attr-defined]

        # bob reads the status; his "Commit now" is refused, and the page says so.
        page = open_page(
            browser,
            f"{srv.url}/ui#/topics/{TOPIC}/lake",
            http_credentials={"username": "bob", "password": PASSWORDS["bob"]},
        )
        expect(page.locator("#lake-lag")).to_have_text("0 offsets")
        page.click("#lake-commit-now")
        refusal = page.locator("#lake-commit-error")
        expect(refusal).to_contain_text("Permission denied")
        expect(refusal).to_contain_text("40301")
        assert not [r for r in srv.runtime.metadata.lake_tables() if r.commit_requested]
        assert page.errors == []  # type: ignore[attr-defined]
