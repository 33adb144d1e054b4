"""End to end over HTTP against a real server on the embedded default (file:// bucket + SQLite)."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from storage.objectstore.base import PUT
from storage.partitioner import partition_for_key
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration


def test_produce_and_fetch_many_partitions_exactly(server: RunningServer) -> None:
    server.create_topic("orders", partitions=8)
    sent = [
        {
            "key": f"key-{i % 37}",
            "value": f"value-{i}",
            "headers": [{"name": "trace", "value": f"t{i}"}, {"name": "nil", "value": None}],
        }
        for i in range(400)
    ]
    offsets: list[dict[str, int]] = []
    for start in range(0, len(sent), 100):
        response = server.produce("orders", sent[start : start + 100])
        assert response.status_code == 200, response.text
        offsets += response.json()["offsets"]
    assert len(offsets) == len(sent)

    expected: dict[tuple[int, int], dict[str, Any]] = {}
    for record, placed in zip(sent, offsets, strict=True):
        # Kafka's default partitioner decides where a keyed record goes.
        assert placed["partition"] == partition_for_key(record["key"].encode(), 8)
        expected[(placed["partition"], placed["offset"])] = record

    fetched: dict[tuple[int, int], dict[str, Any]] = {}
    for partition in range(8):
        offset = 0
        while True:
            body = server.fetch("orders", partition, offset, max_bytes=2048).json()
            for rec in body["records"]:
                fetched[(partition, rec["offset"])] = rec
            if body["next_offset"] >= body["high_watermark"]:
                break
            offset = body["next_offset"]
        # Offsets per partition are dense: 0..hwm-1, each exactly once.
        got = sorted(o for p, o in fetched if p == partition)
        assert got == list(range(len(got)))
    assert set(fetched) == set(expected)
    for position, record in expected.items():
        got = fetched[position]
        assert got["key"] == record["key"]
        assert got["value"] == record["value"]
        assert got["headers"] == record["headers"]


def test_offsets_are_in_request_order_within_a_partition(server: RunningServer) -> None:
    server.create_topic("seq", partitions=1)
    first = server.produce("seq", [{"key": "k", "value": str(i)} for i in range(5)]).json()
    second = server.produce("seq", [{"key": "k", "value": str(i)} for i in range(5, 8)]).json()
    assert [o["offset"] for o in first["offsets"]] == [0, 1, 2, 3, 4]
    assert [o["offset"] for o in second["offsets"]] == [5, 6, 7]
    body = server.fetch("seq", 0, 3).json()
    assert [r["value"] for r in body["records"]] == ["3", "4", "5", "6", "7"]


def test_base64_encoding_round_trip(server: RunningServer) -> None:
    server.create_topic("bin")
    raw_key, raw_value = b"\x00\xffkey", bytes(range(256))
    record = {
        "key": base64.b64encode(raw_key).decode(),
        "value": base64.b64encode(raw_value).decode(),
        "headers": [{"name": "h", "value": base64.b64encode(b"\x01\x02").decode()}],
    }
    response = server.client.post("/v1/topics/bin/records", json={"records": [record], "encoding": "base64"})
    assert response.status_code == 200, response.text
    # Not UTF-8: asking for utf8 is a clear 406, base64 gives the bytes back.
    as_text = server.fetch("bin", 0, 0)
    assert as_text.status_code == 406
    assert as_text.json()["error_code"] == 40601
    got = server.fetch("bin", 0, 0, encoding="base64").json()["records"][0]
    assert base64.b64decode(got["key"]) == raw_key
    assert base64.b64decode(got["value"]) == raw_value
    assert got["headers"] == record["headers"]


def test_tombstone_and_null_key(server: RunningServer) -> None:
    server.create_topic("t", partitions=2)
    assert server.produce("t", [{"key": "a", "value": None}, {"key": None, "value": "x"}]).status_code == 200
    tomb = [r for p in range(2) for r in server.fetch("t", p, 0).json()["records"] if r["key"] == "a"]
    assert tomb[0]["value"] is None


def test_null_keys_are_spread_over_partitions(server: RunningServer) -> None:
    server.create_topic("spread", partitions=4)
    offsets = server.produce("spread", [{"value": str(i)} for i in range(40)]).json()["offsets"]
    assert {o["partition"] for o in offsets} == {0, 1, 2, 3}


def test_compacted_topic_rejects_unkeyed_records(server: RunningServer) -> None:
    server.create_topic("cfg", **{"cleanup.policy": "compact"})
    response = server.produce("cfg", [{"key": "k", "value": "v"}, {"value": "no key"}])
    assert response.status_code == 422
    assert response.json()["error_code"] == 42206
    assert server.client.get("/v1/topics/cfg/partitions/0/offsets").json()["high_watermark"] == 0


def test_long_poll_wakes_on_new_data(server: RunningServer) -> None:
    server.create_topic("tail")
    result: dict[str, Any] = {}

    def poll() -> None:
        started = time.monotonic()
        result["body"] = server.fetch("tail", 0, 0, max_wait_ms=10_000).json()
        result["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=poll)
    thread.start()
    time.sleep(0.3)
    server.produce("tail", [{"key": "k", "value": "woke"}])
    thread.join(15)
    assert [r["value"] for r in result["body"]["records"]] == ["woke"]
    assert result["elapsed"] < 5  # woke on the data, not at the 10 s timeout


def test_fetch_at_high_watermark_without_wait_is_empty(server: RunningServer) -> None:
    server.create_topic("e")
    body = server.fetch("e", 0, 0).json()
    assert body == {
        "records": [],
        "next_offset": 0,
        "high_watermark": 0,
        "log_start_offset": 0,
        "last_stable_offset": 0,
    }


def test_fetch_out_of_range_gives_valid_range(server: RunningServer) -> None:
    server.create_topic("r")
    server.produce("r", [{"key": "k", "value": "v"}])
    for offset in (2, 10**6, -1):
        response = server.fetch("r", 0, offset)
        assert response.status_code == 416
        body = response.json()
        assert body["error_code"] == 41601
        assert "0..1" in body["message"]


def test_max_bytes_bounds_the_page_but_returns_at_least_one(server: RunningServer) -> None:
    server.create_topic("big")
    server.produce("big", [{"key": str(i), "value": "x" * 1000} for i in range(20)])
    tiny = server.fetch("big", 0, 0, max_bytes=1).json()
    assert len(tiny["records"]) == 1
    assert tiny["next_offset"] == 1
    page = server.fetch("big", 0, 0, max_bytes=5000).json()
    assert 1 < len(page["records"]) < 20


def test_idempotent_retry_returns_original_offsets_and_writes_nothing(server: RunningServer) -> None:
    server.create_topic("idem", partitions=3)
    records = [{"key": f"k{i}", "value": "v"} for i in range(10)]
    headers = {"Idempotency-Key": "req-1"}
    first = server.produce("idem", records, headers=headers)
    assert first.status_code == 200
    puts = server.runtime.counters.get(PUT)
    describe = server.client.get("/v1/topics/idem").json()
    again = server.produce("idem", records, headers=headers)
    assert again.json() == first.json()
    assert server.runtime.counters.get(PUT) == puts
    assert server.client.get("/v1/topics/idem").json() == describe
    # A different key is a different request.
    other = server.produce("idem", records, headers={"Idempotency-Key": "req-2"})
    assert other.json() != first.json()


def test_concurrent_duplicates_on_one_agent_get_one_write(server: RunningServer) -> None:
    server.create_topic("dup")
    results: list[Any] = []

    def send() -> None:
        response = server.produce("dup", [{"key": "k", "value": "v"}], headers={"Idempotency-Key": "same"})
        results.append(response.json())

    threads = [threading.Thread(target=send) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == results[0] for r in results)
    assert server.client.get("/v1/topics/dup/partitions/0/offsets").json()["high_watermark"] == 1


def test_one_put_per_flush_and_none_when_idle(server_factory: Callable[..., Any]) -> None:
    # The idle cut off: with it, any 5 ms gap between the threads' requests cut a flush, so the count
    # below measured the machine's thread scheduling; the interval alone is what batches them here.
    with server_factory(flush_interval_ms=300, flush_idle_ms=0, flush_class="standard") as srv:
        srv.create_topic("a", partitions=16)
        srv.create_topic("b", partitions=16)
        before = srv.runtime.counters.get(PUT)
        errors: list[int] = []

        def send(topic: str, partition: int) -> None:
            response = srv.produce(topic, [{"value": "x", "partition": partition}])
            errors.append(response.status_code)

        threads = [threading.Thread(target=send, args=(t, p)) for t in "ab" for p in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [200] * 32
        flushes = srv.runtime.metrics.flushes._value.get()
        puts = srv.runtime.counters.get(PUT) - before
        assert puts == flushes  # exactly one PUT per flush...
        assert puts <= 3  # ...and 32 partitions' requests share a handful of flushes
        idle_before = srv.runtime.counters.get(PUT)
        time.sleep(1.0)
        assert srv.runtime.counters.get(PUT) == idle_before  # zero PUTs while idle


def test_buffer_full_is_429_with_retry_after(server_factory: Callable[..., Any]) -> None:
    # The idle cut off: the first request must wait in the buffer for the interval.
    with server_factory(
        flush_interval_ms=3000, flush_idle_ms=0, buffer_bytes=4096, flush_class="standard"
    ) as srv:
        srv.create_topic("full")
        first: dict[str, Any] = {}
        thread = threading.Thread(
            target=lambda: first.update(r=srv.produce("full", [{"key": "k", "value": "x" * 3000}]))
        )
        thread.start()
        time.sleep(0.3)  # the first request now sits in the buffer, waiting for the flush
        second = srv.produce("full", [{"key": "k", "value": "y" * 3000}])
        assert second.status_code == 429
        assert second.json()["error_code"] == 42901
        assert second.headers["Retry-After"]
        thread.join(10)
        assert first["r"].status_code == 200


def test_topic_admin(server: RunningServer) -> None:
    server.create_topic("admin", partitions=2, **{"retention.ms": 1000})
    assert server.client.get("/v1/topics").json() == {"topics": ["admin"]}
    dup = server.client.post("/v1/topics", json={"name": "admin", "partitions": 1})
    assert dup.status_code == 400
    assert dup.json()["error_code"] == 40002
    patched = server.client.patch(
        "/v1/topics/admin/configs", json={"configs": {"retention.ms": None, "cleanup.policy": "compact"}}
    ).json()
    assert patched["configs"]["retention.ms"] == "604800000"
    assert patched["configs"]["cleanup.policy"] == "compact"
    bad = server.client.patch("/v1/topics/admin/configs", json={"configs": {"nope": "1"}})
    assert bad.json()["error_code"] == 42207
    assert server.client.delete("/v1/topics/admin").status_code == 204
    assert server.client.get("/v1/topics/admin").json()["error_code"] == 40401
    assert server.produce("admin", [{"value": "x"}]).json()["error_code"] == 40401


def test_group_offsets(server: RunningServer) -> None:
    server.create_topic("g", partitions=2)
    body = {
        "offsets": [{"topic": "g", "partition": 0, "offset": 5}, {"topic": "g", "partition": 1, "offset": 7}]
    }
    assert server.client.put("/v1/groups/readers/offsets", json=body).status_code == 200
    got = server.client.get("/v1/groups/readers/offsets").json()
    assert sorted((o["partition"], o["offset"]) for o in got["offsets"]) == [(0, 5), (1, 7)]
    unknown = server.client.put(
        "/v1/groups/readers/offsets", json={"offsets": [{"topic": "g", "partition": 9, "offset": 1}]}
    )
    assert unknown.json()["error_code"] == 40402


def test_auth_tokens(server_factory: Callable[..., Any]) -> None:
    with server_factory(api_tokens="s3cret,other", kafka_port=-1) as srv:
        assert srv.client.get("/v1/topics").status_code == 401
        assert srv.client.get("/healthz").status_code == 200
        ok = srv.client.get("/v1/topics", headers={"Authorization": "Bearer other"})
        assert ok.status_code == 200
        wrong = srv.client.get("/v1/topics", headers={"Authorization": "Bearer nope"})
        assert wrong.json()["error_code"] == 40101


def test_health_and_metrics(server: RunningServer) -> None:
    server.create_topic("m")
    server.produce("m", [{"value": "x"}])
    server.fetch("m", 0, 0)
    assert server.client.get("/healthz").json() == {"status": "ok"}
    assert server.client.get("/readyz").json() == {"status": "ready"}
    text = server.client.get("/metrics").text
    for name in (
        "strata_produce_requests_total",
        "strata_produce_latency_seconds_bucket",
        "strata_fetch_latency_seconds_bucket",
        "strata_flush_bytes_total",
        "strata_flush_records_total",
        "strata_flush_partitions_bucket",
        'strata_object_store_requests_total{kind="PUT"}',
        "strata_buffer_bytes",
        "strata_txn_open",
        "strata_txn_end_seconds_bucket",
    ):
        assert name in text, name


def test_corrupt_object_is_a_clear_error_never_garbage(
    server_factory: Callable[..., Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # cache_bytes=0: the agent must read the object back rather than serve its own flush from memory.
    with server_factory(cache_bytes=0) as srv:
        srv.create_topic("c")
        srv.produce("c", [{"key": "k", "value": "precious value"}])
        objects = [p for p in (tmp_path / "data" / "bucket").rglob("*.strata")]
        assert len(objects) == 1
        data = bytearray(objects[0].read_bytes())
        data[len(data) // 4] ^= 0x01
        objects[0].write_bytes(bytes(data))
        response = srv.fetch("c", 0, 0)
        assert response.status_code == 500
        body = response.json()
        assert body["error_code"] == 50002
        key = objects[0].relative_to(tmp_path / "data" / "bucket").as_posix()
        assert key in body["message"]
        assert any(key in r.getMessage() for r in caplog.records)


def test_overload_is_refused_before_the_body_is_read_and_nothing_leaks(
    server_factory: Callable[..., Any],
) -> None:
    with server_factory(
        flush_interval_ms=2000, flush_idle_ms=0, buffer_bytes=18_000, flush_class="standard"
    ) as srv:
        srv.create_topic("adm")
        first: dict[str, Any] = {}
        thread = threading.Thread(
            target=lambda: first.update(r=srv.produce("adm", [{"key": "k", "value": "x" * 3000}]))
        )
        thread.start()
        time.sleep(0.3)  # ~3 KB encoded now waits in the buffer, and only that is held
        assert 3000 <= srv.runtime.agent.buffer.bytes_held < 4000
        # A body of 16 KB is refused before it is read: with 3 KB held, over the 18 KB budget.
        refused = srv.produce("adm", [{"key": "k", "value": "y" * 16_000}])
        assert refused.status_code == 429
        assert refused.json()["error_code"] == 42901
        # A body of 4 KB is read (7 KB held), then refused for its parse window: 4 KB more reserve 12 KB
        # (Admission.expansion), over the budget.
        refused = srv.produce("adm", [{"key": "k", "value": "y" * 4000}])
        assert refused.status_code == 429
        assert refused.json()["error_code"] == 42901
        # Malformed and invalid bodies give their reservation back too.
        malformed = srv.client.post(
            "/v1/topics/adm/records", content=b"{nope", headers={"content-type": "application/json"}
        )
        assert malformed.status_code == 400
        assert srv.produce("adm", [{"key": 1}]).status_code == 422
        thread.join(10)
        assert first["r"].status_code == 200
        assert srv.runtime.agent.buffer.bytes_held == 0  # every reservation was released
