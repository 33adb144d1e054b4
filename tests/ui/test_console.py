"""The web console in a real browser: Debian's Chromium, headless, against a real agent.

The scenario is the one an operator walks through: create a topic; produce JSON, binary and a
``<script>`` payload from the form; browse by offset and by timestamp; compact and see the gaps; watch a
consumer group's lag go to zero; reset its offsets; delete the topic. Permissions and authentication are
the API's: a read-only principal is refused, and /ui asks for credentials like every API path.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer
from playwright.sync_api import Browser, Page, expect

from tests.fixtures.principals import PASSWORDS, write_principals
from tests.fixtures.server import RunningServer, local_settings, run_server
from tests.ui.pages import open_page

pytestmark = pytest.mark.integration

TOPIC = "console-demo"
GROUP = "console-group"
XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[RunningServer]:
    # Role all with the background round woken only by "Compact now"; metrics sampled every 200 ms.
    settings = replace(
        local_settings(tmp_path), role="all", worker_interval_ms=3_600_000, metrics_sample_ms=200
    )
    with run_server(settings, with_worker=True) as running:
        yield running


def produce_from_form(page: Page, offset: int, key: str, value: str, fmt: str = "utf8") -> None:
    """Send one record from the form and wait for its own answer: the flash of the record before it may
    still be shown, so waiting for any "Produced" message would return before this one is stamped."""
    page.fill("#produce-key", key)
    page.fill("#produce-value", value)
    page.select_option("#produce-format", fmt)
    page.click("#produce-send")
    expect(page.locator("#flash .msg").last).to_contain_text(f"Produced to partition 0 at offset {offset}")


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def test_operator_scenario(browser: Browser, srv: RunningServer, screenshot_dir: Path) -> None:
    page = open_page(browser, f"{srv.url}/ui")

    # Overview: this agent, the metadata store's health, and charts filled from the agent's metrics.
    expect(page.locator("#card-metadata .value")).to_have_text("healthy")
    expect(page.locator("#card-agents .value")).to_have_text("1")
    expect(page.locator(".chart canvas").first).to_be_visible()
    # Flush PUTs by class, with what a local directory costs for them.
    expect(page.locator("#card-classes")).to_contain_text("low-latency")
    expect(page.locator("#card-classes")).to_contain_text("flushes cost no request")

    # Create a compacted topic from the form.
    page.click("text=Topics")
    page.click("#create-topic summary")
    page.fill("#new-topic-name", TOPIC)
    page.select_option("#new-topic-policy", "compact")
    page.fill("#new-topic-configs", "retention.ms=86400000")
    page.click("#create-topic button[type=submit]")
    expect(page.locator("#topic-name")).to_have_text(TOPIC)
    configs = srv.client.get(f"/v1/topics/{TOPIC}").json()["configs"]
    assert (configs["cleanup.policy"], configs["retention.ms"]) == ("compact", "86400000")

    # Produce JSON, binary and a <script> payload from the form (offsets 0, 1, 2).
    page.click("#tab-records")
    produce_from_form(page, 0, "user-1", '{"name": "Ada", "langs": ["en", "fr"]}')
    produce_from_form(page, 1, "bin", "00 ff 10 80", fmt="hex")
    produce_from_form(page, 2, "xss", XSS)
    # Overwrites of user-1 (offsets 3..5), stamped after `mark`, and two records stamped an hour and half an
    # hour ago (offsets 6, 7), over the API.
    mark = int(time.time() * 1000) + 1
    time.sleep(0.05)
    now = int(time.time() * 1000)
    for i in range(3):
        assert srv.produce(TOPIC, [{"key": "user-1", "value": f'{{"v": {i}}}'}]).status_code == 200
    early, late = now - 3_600_000, now - 1_800_000
    body = [{"key": "t-early", "value": "early", "timestamp": early}]
    assert srv.produce(TOPIC, body).status_code == 200
    body = [{"key": "t-late", "value": "late", "timestamp": late, "headers": [{"name": "h", "value": "1"}]}]
    assert srv.produce(TOPIC, body).status_code == 200

    # Browse from the beginning: the payload is shown as text and never runs.
    page.click("#browse-go")
    rows = page.locator("#records tr.record")
    expect(rows).to_have_count(8)
    expect(page.locator("#records td.data", has_text="<script>window.__xss = 1</script>")).to_have_count(1)
    assert page.evaluate("window.__xss") is None
    assert page.locator("#records img").count() == 0
    page.select_option("#browse-view", "json")
    expect(page.locator("#records td.data", has_text='"name": "Ada"')).to_have_count(1)
    page.select_option("#browse-view", "hex")
    expect(page.locator("#records td.data", has_text="00 ff 10 80")).to_have_count(1)
    page.select_option("#browse-view", "utf8")
    page.screenshot(path=str(screenshot_dir / "records.png"), full_page=True)

    # By offset, then by timestamp.
    page.select_option("#browse-start", "offset")
    page.fill("#browse-offset", "2")
    page.click("#browse-go")
    expect(rows).to_have_count(6)
    expect(rows.first.locator("td").nth(1)).to_have_text("2")
    # By timestamp: the first record in offset order stamped at or after `mark` (Kafka's ListOffsets rule).
    page.select_option("#browse-start", "timestamp")
    page.fill("#browse-timestamp", iso(mark))
    page.click("#browse-go")
    expect(rows).to_have_count(5)
    expect(rows.first.locator("td").nth(1)).to_have_text("3")
    expect(rows.last).to_contain_text("h: 1")  # offset 7's header

    # Filters: key substring.
    page.select_option("#browse-start", "beginning")
    page.fill("#filter-key", "user-")
    page.click("#browse-go")
    expect(rows).to_have_count(4)
    page.fill("#filter-key", "")

    # Live tail: a new record shows up while it runs (offset 8), and none once paused (offset 9).
    page.click("#tail")
    expect(page.locator("#tail")).to_have_text("Pause")
    assert srv.produce(TOPIC, [{"key": "tail-1", "value": "live"}]).status_code == 200
    expect(page.locator("#records td.data", has_text="tail-1")).to_have_count(1, timeout=10_000)
    page.click("#tail")
    expect(page.locator("#tail")).to_have_text("Live tail")
    assert srv.produce(TOPIC, [{"key": "tail-2", "value": "paused"}]).status_code == 200
    page.wait_for_timeout(2500)
    expect(page.locator("#records td.data", has_text="tail-2")).to_have_count(0)

    # Compact now; the job shows as done on the Compaction page; the overwritten offsets become gaps.
    page.click("#tab-overview")
    # Alter a config with Kafka's name; a bad value gets the API's error and changes nothing.
    page.fill("#config-name", "min.cleanable.dirty.ratio")
    page.fill("#config-value", "0.2")
    page.click("#config-save")
    expect(page.locator("#flash .msg").last).to_contain_text("Set min.cleanable.dirty.ratio")
    page.fill("#config-name", "retention.ms")
    page.fill("#config-value", "soon")
    page.click("#config-save")
    expect(page.locator("#flash .msg.error").last).to_contain_text("42207")
    configs = srv.client.get(f"/v1/topics/{TOPIC}").json()["configs"]
    assert (configs["min.cleanable.dirty.ratio"], configs["retention.ms"]) == ("0.2", "86400000")
    page.click("#compact-now")
    expect(page.locator("#flash .msg").last).to_contain_text("Planned 1 job(s)")
    page.click("text=Compaction")
    expect(page.locator("table tbody tr").first.locator(".pill")).to_have_text("done", timeout=20_000)
    expect(page.locator("table tbody tr").first).to_contain_text(TOPIC)
    page.screenshot(path=str(screenshot_dir / "compaction.png"), full_page=True)
    page.goto(f"{srv.url}/ui#/topics/{TOPIC}/records")
    gaps = page.locator("#records tr.gap")
    expect(gaps.first).to_be_visible()
    assert "removed by compaction" in gaps.first.inner_text()
    # user-1 at offsets 0, 3, 4 was overwritten by offset 5: offset 0 and 3-4 are gaps.
    assert [r.locator("td").nth(1).inner_text() for r in gaps.all()] == ["0", "3\u20134"]
    expect(rows).to_have_count(7)
    page.goto(f"{srv.url}/ui#/topics/{TOPIC}")
    expect(page.locator("#compaction table tbody tr").first).not_to_contain_text("Nothing removed")
    page.screenshot(path=str(screenshot_dir / "topic.png"), full_page=True)

    # A consumer group: lag shows, then goes to zero as the consumer commits.
    consumer = Consumer(
        {
            "bootstrap.servers": srv.kafka_bootstrap,
            "group.id": GROUP,
            "client.id": "console-test",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 7 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message)
                if len(got) == 1:
                    consumer.commit(message=message, asynchronous=False)
        assert len(got) == 7, "the consumer did not read the compacted topic"
        page.goto(f"{srv.url}/ui#/groups/{GROUP}")
        expect(page.locator("#group-state")).to_have_text("Stable", timeout=20_000)
        expect(page.locator("#total-lag")).not_to_have_text("0")
        expect(page.locator("#group")).to_contain_text("console-test")
        consumer.commit(message=got[-1], asynchronous=False)
        expect(page.locator("#total-lag")).to_have_text("0", timeout=10_000)
        page.screenshot(path=str(screenshot_dir / "group.png"), full_page=True)

        # A reset while the member is active is refused, as Kafka refuses it.
        page.select_option("#reset-to", "earliest")
        page.click("#reset-go")
        expect(page.locator("#flash .msg.error").last).to_contain_text("40909")
    finally:
        consumer.close()

    # Once the group is empty: reset to earliest, confirmed in the dialog; the lag comes back.
    expect(page.locator("#group-state")).to_have_text("Empty", timeout=20_000)
    page.select_option("#reset-to", "earliest")
    page.click("#reset-go")
    expect(page.locator("#confirm")).to_be_visible()
    expect(page.locator("#confirm-text")).to_contain_text(f"{TOPIC}/0 → 0")
    page.click("#confirm-ok")
    expect(page.locator("#flash .msg").last).to_contain_text(f"Offsets of {GROUP} reset")
    expect(page.locator("#total-lag")).to_have_text("10", timeout=10_000)
    offsets = srv.client.get(f"/v1/groups/{GROUP}/offsets").json()["offsets"]
    assert [(o["topic"], o["offset"]) for o in offsets] == [(TOPIC, 0)]

    # The overview's charts now hold the produce and fetch traffic.
    page.goto(f"{srv.url}/ui")
    expect(page.locator("#card-metadata .value")).to_have_text("healthy")
    page.wait_for_timeout(500)
    page.screenshot(path=str(screenshot_dir / "overview.png"), full_page=True)

    # Delete the topic: the dialog wants its name typed.
    page.goto(f"{srv.url}/ui#/topics/{TOPIC}")
    page.click("#delete-topic")
    expect(page.locator("#confirm-ok")).to_be_disabled()
    page.fill("#confirm-typed", TOPIC)
    page.click("#confirm-ok")
    expect(page.locator("#flash .msg").last).to_contain_text(f"Deleted topic {TOPIC}")
    assert srv.client.get(f"/v1/topics/{TOPIC}").status_code == 404
    assert page.errors == []  # type: ignore[attr-defined]


def test_cancelled_delete_changes_nothing(browser: Browser, srv: RunningServer) -> None:
    srv.create_topic("keep-me")
    page = open_page(browser, f"{srv.url}/ui#/topics/keep-me")
    page.click("#delete-topic")
    page.fill("#confirm-typed", "keep-m")  # not the name: confirm stays disabled
    expect(page.locator("#confirm-ok")).to_be_disabled()
    page.click("#confirm-cancel")
    expect(page.locator("#confirm")).to_be_hidden()
    assert srv.client.get("/v1/topics/keep-me").status_code == 200


def test_console_needs_credentials_and_the_api_permissions(browser: Browser, tmp_path: Path) -> None:
    settings = local_settings(tmp_path, principals_file=write_principals(tmp_path))
    with run_server(settings) as srv:
        admin = httpx.BasicAuth("admin", PASSWORDS["admin"])
        answer = srv.client.post("/v1/topics", json={"name": "orders.eu"}, auth=admin)
        assert answer.status_code == 201, answer.text
        # Without credentials, /ui and its assets are refused with a Basic challenge, as the API is.
        for path in ("/ui", "/ui/assets/js/app.js"):
            answer = srv.client.get(path)
            assert answer.status_code == 401
            assert "Basic" in answer.headers["WWW-Authenticate"]
        # bob may read orders.*, not delete it: the console shows the API's refusal, and nothing changes.
        creds = {"username": "bob", "password": PASSWORDS["bob"]}
        page = open_page(browser, f"{srv.url}/ui#/topics/orders.eu", http_credentials=creds)
        expect(page.locator("#topic-name")).to_have_text("orders.eu")
        page.click("#delete-topic")
        page.fill("#confirm-typed", "orders.eu")
        page.click("#confirm-ok")
        expect(page.locator("#flash .msg.error").last).to_contain_text("40301")
        assert srv.client.get("/v1/topics/orders.eu", auth=admin).status_code == 200
        # Resetting a group's offsets needs READ on the group (Kafka's OffsetCommit): a DENY of READ on
        # billing-eu takes it from bob, while DESCRIBE, which his ALLOW READ implies, still shows the page.
        offsets = {"offsets": [{"topic": "orders.eu", "partition": 0, "offset": 0}]}
        assert srv.client.put("/v1/groups/billing-eu/offsets", json=offsets, auth=admin).status_code == 200
        deny = {
            "resource_type": "GROUP",
            "resource_name": "billing-eu",
            "principal": "User:bob",
            "operation": "READ",
            "permission": "DENY",
        }
        assert srv.client.post("/v1/acls", json={"acls": [deny]}, auth=admin).status_code == 201
        page.goto(f"{srv.url}/ui#/groups/billing-eu")
        expect(page.locator("#group-state")).to_have_text("Empty")
        page.select_option("#reset-to", "latest")
        page.click("#reset-go")
        expect(page.locator("#flash .msg.error").last).to_contain_text("40302")
        answer = srv.client.get("/v1/groups/billing-eu/offsets", auth=admin).json()
        assert [o["offset"] for o in answer["offsets"]] == [0]
        # carol may describe nothing: the topic list is empty for her.
        page = open_page(
            browser,
            f"{srv.url}/ui#/topics",
            http_credentials={"username": "carol", "password": PASSWORDS["carol"]},
        )
        expect(page.locator("main table tbody")).to_contain_text("No topics yet")
        # The Access page: the ACLs (the file's grants and the DENY above) for whoever may describe the
        # cluster; bob may not, and sees the API's refusal.
        page = open_page(
            browser,
            f"{srv.url}/ui#/access",
            http_credentials={"username": "admin", "password": PASSWORDS["admin"]},
        )
        expect(page.locator("main table").first).to_contain_text("User:bob")
        expect(page.locator("main table").first).to_contain_text("DENY")
        expect(page.locator("main table").first).to_contain_text("billing-eu")
        page.fill("#acl-principal", "User:alice")
        page.click("main form button")
        expect(page.locator("main table").first).not_to_contain_text("User:bob")
        expect(page.locator("main table").first).to_contain_text("orders.")
        page = open_page(browser, f"{srv.url}/ui#/access", http_credentials=creds)
        expect(page.locator("#access-error")).to_contain_text("40303")


def test_topic_list_pages_through_many_topics(browser: Browser, srv: RunningServer) -> None:
    # 10,000 topics, created through the metadata store the agent uses (setup, not a console path).
    now = int(time.time() * 1000)
    for i in range(10_000):
        srv.runtime.metadata.create_topic(f"t{i:05d}", 1, {}, now)
    page = open_page(browser, f"{srv.url}/ui#/topics")
    rows = page.locator("main table tbody tr")
    expect(rows).to_have_count(50)
    expect(rows.first).to_contain_text("t00000")
    page.click("#next-page")
    expect(rows.first).to_contain_text("t00050")
    page.fill("#topic-prefix", "t0999")
    page.click("text=Search")
    expect(rows).to_have_count(10)
    expect(rows.last).to_contain_text("t09999")


def test_an_operator_sees_the_lso_and_aborts_a_hanging_transaction(
    browser: Browser, srv: RunningServer
) -> None:
    from confluent_kafka import KafkaException, Producer

    topic = "console-txn"
    srv.create_topic(topic)
    producer = Producer({"bootstrap.servers": srv.kafka_bootstrap, "transactional.id": "console-copier"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"held", partition=0)
    producer.flush(30)
    page = open_page(browser, f"{srv.url}/ui#/topics/{topic}")
    # One record of an open transaction: the high watermark is 1, read_committed readers stop at 0.
    expect(page.locator("table").first).to_contain_text("Last stable")
    page.goto(f"{srv.url}/ui#/transactions")
    row = page.locator("tr", has_text="console-copier")
    expect(row).to_contain_text(f"{topic}/0 @ 0")
    page.click("button[data-txn='console-copier']")
    expect(page.locator("#confirm")).to_be_visible()
    page.fill("#confirm-typed", "console-copier")
    page.click("#confirm-ok")
    expect(page.locator("#flash .msg").last).to_contain_text("Aborted the transaction of console-copier")
    expect(page.locator("#transactions")).to_contain_text("No transaction is open.")
    offsets = srv.client.get(f"/v1/topics/{topic}/partitions/0/offsets").json()
    assert offsets == {"log_start_offset": 0, "high_watermark": 2, "last_stable_offset": 2}
    with pytest.raises(KafkaException):
        producer.commit_transaction(30)  # fenced
    assert page.errors == []  # type: ignore[attr-defined]
