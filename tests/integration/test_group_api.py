"""The consumer-group endpoints of the HTTP API (api/routes/groups.py) against a real agent:

- ``GET /v1/groups`` pages through groups by id, with a prefix, over coordinator rows and offsets-only
  groups alike, on SQLite and PostgreSQL;
- ``GET /v1/groups/{g}`` describes a group a real librdkafka consumer (confluent-kafka, over TCP) belongs
  to: its member, client id, decoded assignment, and the lag as records are produced and consumed;
- ``POST /v1/groups/{g}/offsets/reset`` is refused while that consumer is in the group, then resets to
  earliest, latest, a timestamp and an offset (clamped to the log), and a dry run writes nothing;
- permissions: listing and describing show only what the principal may read, and a reset needs admin on
  the group.
"""

from __future__ import annotations

import base64
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from agents.group_doc import group_to_json
from agents.group_model import Group, GroupPhase, Member
from storage.metadata.rows import GroupRow
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration

# Short group timings, so that a consumer joins in well under a second.
FAST = {"group_initial_rebalance_delay_ms": 100, "group_min_session_timeout_ms": 1000}


@pytest.fixture
def fast(server_factory: Callable[..., Any]) -> Iterator[RunningServer]:
    with server_factory(**FAST) as srv:
        yield srv


def _stable_group(
    srv: RunningServer, gid: str, assignment: bytes = b"", protocol_type: str = "consumer"
) -> None:
    """Store a Stable group with one live member, as the coordinator writes one after a SyncGroup."""
    now = srv.runtime.clock.now_ms()
    member = Member("m-1", None, "cid", "/127.0.0.1", 60_000, 60_000, protocol_type, [("range", b"")])
    member.assignment = assignment
    member.last_seen_ms = now
    group = Group(gid, GroupPhase.STABLE, 1, protocol_type, "range", "m-1", {"m-1": member})
    row = GroupRow(group.phase.value, group.protocol_type, group_to_json(group))
    srv.runtime.metadata.update_group(gid, lambda _: (row, None))


def _commit(srv: RunningServer, gid: str, topic: str, offset: int, **kwargs: Any) -> None:
    body = {"offsets": [{"topic": topic, "partition": 0, "offset": offset}]}
    answer = srv.client.put(f"/v1/groups/{gid}/offsets", json=body, **kwargs)
    assert answer.status_code == 200, answer.text


def test_list_pages_by_id_with_a_prefix(server: RunningServer) -> None:
    server.create_topic("t")
    offsets_only = [f"pg-{i:03d}" for i in range(0, 23, 2)]
    stateful = [f"pg-{i:03d}" for i in range(1, 23, 4)]
    for gid in [*offsets_only, "pg-001"]:  # pg-001: both a coordinator row and offsets, listed once
        _commit(server, gid, "t", 1)
    for gid in stateful:
        _stable_group(server, gid)
    for gid in ("pg_lit", "other"):  # "_" is no wildcard: prefix "pg_" is only pg_lit
        _commit(server, gid, "t", 1)
    everything = sorted({*offsets_only, *stateful, "pg_lit", "other"})

    seen: list[str] = []
    after: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 5} if after is None else {"limit": 5, "after": after}
        answer = server.client.get("/v1/groups", params=params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert 1 <= len(body["groups"]) <= 5
        seen += [g["group"] for g in body["groups"]]
        pages += 1
        after = body["next_after"]
        if after is None:
            break
        assert after == seen[-1]
    assert seen == everything
    assert pages == -(-len(everything) // 5)  # every page full but the last, and no empty last page

    by_id = {g["group"]: g for g in server.client.get("/v1/groups", params={"limit": 1000}).json()["groups"]}
    assert by_id["pg-001"] == {
        "group": "pg-001",
        "state": "Stable",
        "protocol_type": "consumer",
        "protocol": "range",
        "members": 1,
    }
    assert by_id["pg-000"] == {
        "group": "pg-000",
        "state": "Empty",
        "protocol_type": None,
        "protocol": None,
        "members": 0,
    }

    pg = server.client.get("/v1/groups", params={"prefix": "pg-", "after": "pg-010", "limit": 3}).json()
    assert [g["group"] for g in pg["groups"]] == ["pg-012", "pg-013", "pg-014"]
    assert pg["next_after"] == "pg-014"
    last = server.client.get("/v1/groups", params={"prefix": "pg-", "after": "pg-020"}).json()
    assert [g["group"] for g in last["groups"]] == ["pg-021", "pg-022"]
    assert last["next_after"] is None
    assert [g["group"] for g in server.client.get("/v1/groups?prefix=pg_").json()["groups"]] == ["pg_lit"]
    assert server.client.get("/v1/groups?prefix=zzz").json() == {"groups": [], "next_after": None}
    for bad in ("limit=0", "limit=1001", "limit=x", "prefix=%00"):
        answer = server.client.get(f"/v1/groups?{bad}")
        assert answer.status_code == 400, (bad, answer.text)
        assert answer.json()["error_code"] == 40001


def _poll_until(consumer: Consumer, done: Callable[[], bool], got: list[Any]) -> None:
    """Poll until ``done()``, adding the (partition, offset) of every record received to ``got``."""
    deadline = time.monotonic() + 30
    while not done():
        assert time.monotonic() < deadline, "timed out polling the consumer"
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is None:
            got.append((msg.partition(), msg.offset()))


def _describe(srv: RunningServer, gid: str) -> dict[str, Any]:
    answer = srv.client.get(f"/v1/groups/{gid}")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _lags(body: dict[str, Any]) -> dict[int, tuple[int | None, int | None]]:
    return {p["partition"]: (p["committed_offset"], p["lag"]) for p in body["partitions"]}


def _reset(srv: RunningServer, gid: str, **body: Any) -> Any:
    return srv.client.post(f"/v1/groups/{gid}/offsets/reset", json={"topic": "orders", **body})


def _committed(srv: RunningServer, gid: str) -> dict[int, int]:
    answer = srv.client.get(f"/v1/groups/{gid}/offsets")
    assert answer.status_code == 200, answer.text
    return {o["partition"]: o["offset"] for o in answer.json()["offsets"]}


def test_describe_and_reset_a_group_of_a_real_consumer(fast: RunningServer) -> None:
    srv = fast
    srv.create_topic("orders", partitions=2)
    base = srv.runtime.clock.now_ms() - 60_000
    # Partition 0: offsets 0-5 with timestamps base, base+1000, ...; partition 1: offsets 0-3 likewise.
    records = [{"value": f"p0-{i}", "partition": 0, "timestamp": base + i * 1000} for i in range(6)]
    records += [{"value": f"p1-{i}", "partition": 1, "timestamp": base + i * 1000} for i in range(4)]
    assert srv.produce("orders", records).status_code == 200

    consumer = Consumer(
        {
            "bootstrap.servers": srv.kafka_bootstrap,
            "group.id": "app",
            "client.id": "console-test",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
        }
    )
    consumer.subscribe(["orders"])
    try:
        got: list[tuple[int, int]] = []
        _poll_until(consumer, lambda: len(consumer.assignment()) == 2, got)
        body = _describe(srv, "app")
        assert (body["group"], body["state"], body["protocol_type"]) == ("app", "Stable", "consumer")
        assert body["protocol"] == "range"  # librdkafka's first partition.assignment.strategy
        assert body["generation"] >= 1
        [member] = body["members"]
        assert member["client_id"] == "console-test"
        assert member["group_instance_id"] is None
        assert member["member_id"].startswith("console-test-")  # librdkafka's ids start with the client id
        assert member["client_host"] == "/127.0.0.1"  # as Kafka shows it
        assert member["assignment"] == [{"topic": "orders", "partitions": [0, 1]}]
        # Assigned, nothing committed yet: listed with no lag.
        assert body["partitions"] == [
            {
                "topic": "orders",
                "partition": 0,
                "committed_offset": None,
                "log_start_offset": 0,
                "high_watermark": 6,
                "lag": None,
            },
            {
                "topic": "orders",
                "partition": 1,
                "committed_offset": None,
                "log_start_offset": 0,
                "high_watermark": 4,
                "lag": None,
            },
        ]
        assert body["total_lag"] == 0

        _poll_until(consumer, lambda: len(got) >= 10, got)
        assert sorted(got) == [(0, i) for i in range(6)] + [(1, i) for i in range(4)]
        consumer.commit(asynchronous=False)
        assert _lags(_describe(srv, "app")) == {0: (6, 0), 1: (4, 0)}

        more = [{"value": f"late-{i}", "partition": 0, "timestamp": base + 30_000 + i} for i in range(5)]
        assert srv.produce("orders", more).status_code == 200
        body = _describe(srv, "app")
        assert _lags(body) == {0: (6, 5), 1: (4, 0)}
        assert body["total_lag"] == 5

        _poll_until(consumer, lambda: len(got) >= 15, got)
        consumer.commit(asynchronous=False)
        body = _describe(srv, "app")
        assert _lags(body) == {0: (11, 0), 1: (4, 0)}
        assert body["total_lag"] == 0

        # The consumer is in the group: every reset is refused, a dry run too, and nothing changes.
        for dry_run in (False, True):
            refused = _reset(srv, "app", to="earliest", dry_run=dry_run)
            assert refused.status_code == 409, refused.text
            assert refused.json()["error_code"] == 40909
        assert _committed(srv, "app") == {0: 11, 1: 4}
    finally:
        consumer.close()  # LeaveGroup: the group is Empty at once

    body = _describe(srv, "app")
    assert (body["state"], body["members"]) == ("Empty", [])
    assert _lags(body) == {0: (11, 0), 1: (4, 0)}
    assert [g["members"] for g in srv.client.get("/v1/groups").json()["groups"]] == [0]

    # A dry run answers the offsets and writes nothing.
    dry = _reset(srv, "app", to="earliest", dry_run=True)
    assert dry.status_code == 200, dry.text
    assert dry.json() == {
        "group": "app",
        "dry_run": True,
        "offsets": [
            {"topic": "orders", "partition": 0, "offset": 0},
            {"topic": "orders", "partition": 1, "offset": 0},
        ],
    }
    assert _committed(srv, "app") == {0: 11, 1: 4}

    done = _reset(srv, "app", to="earliest")
    assert done.status_code == 200, done.text
    assert done.json()["dry_run"] is False
    assert _committed(srv, "app") == {0: 0, 1: 0}
    assert _describe(srv, "app")["total_lag"] == 15

    assert _reset(srv, "app", to="latest", partitions=[0]).json()["offsets"] == [
        {"topic": "orders", "partition": 0, "offset": 11}
    ]
    assert _committed(srv, "app") == {0: 11, 1: 0}

    # By timestamp: the first record at or after it; none that late gives the high watermark.
    at = _reset(srv, "app", to="timestamp", timestamp=base + 2500).json()["offsets"]
    assert [o["offset"] for o in at] == [3, 3]
    at = _reset(srv, "app", to="timestamp", timestamp=base + 30_003).json()["offsets"]
    assert [o["offset"] for o in at] == [9, 4]
    at = _reset(srv, "app", to="timestamp", timestamp=base + 10**9).json()["offsets"]
    assert [o["offset"] for o in at] == [11, 4]
    assert _committed(srv, "app") == {0: 11, 1: 4}

    # An explicit offset is clamped to [log start, high watermark]: retention moved partition 1's start.
    srv.runtime.metadata.apply_retention("orders", 1, 2, srv.runtime.clock.now_ms())
    at = _reset(srv, "app", to="offset", offset=1).json()["offsets"]
    assert [o["offset"] for o in at] == [1, 2]
    at = _reset(srv, "app", to="offset", offset=10**12, partitions=[1, 0, 1]).json()["offsets"]
    assert [(o["partition"], o["offset"]) for o in at] == [(0, 11), (1, 4)]
    assert _reset(srv, "app", to="earliest", partitions=[1]).json()["offsets"][0]["offset"] == 2
    assert _committed(srv, "app") == {0: 11, 1: 2}

    # A consumer of the group starts where the reset put it (the Kafka door reads the same offsets).
    reader = Consumer({"bootstrap.servers": srv.kafka_bootstrap, "group.id": "app"})
    try:
        fetched = reader.committed([TopicPartition("orders", 0), TopicPartition("orders", 1)], timeout=10)
        assert [tp.offset for tp in fetched] == [11, 2]
    finally:
        reader.close()


def test_reset_refuses_what_it_cannot_do(fast: RunningServer) -> None:
    srv = fast
    srv.create_topic("orders", partitions=2)
    cases: list[tuple[dict[str, Any], int, int, str]] = [
        ({"topic": "nope", "to": "earliest"}, 404, 40401, "nope"),
        ({"topic": "orders", "to": "earliest", "partitions": [0, 2]}, 404, 40402, "partition 2"),
        ({"topic": "orders", "to": "timestamp"}, 422, 42206, "timestamp is required"),
        ({"topic": "orders", "to": "offset"}, 422, 42206, "offset is required"),
        ({"topic": "orders", "to": "earliest", "offset": 3}, 422, 42206, "offset is required"),
        ({"topic": "orders", "to": "latest", "timestamp": 3}, 422, 42206, "timestamp is required"),
        ({"topic": "orders", "to": "tomorrow"}, 422, 42206, "to"),
        ({"topic": "orders", "to": "earliest", "partitions": []}, 422, 42206, "partitions"),
        ({"topic": "orders", "to": "offset", "offset": -1}, 422, 42206, "offset"),
        ({"topic": "bad topic", "to": "earliest"}, 400, 40003, "bad topic"),
    ]
    for body, status, code, words in cases:
        answer = srv.client.post("/v1/groups/g/offsets/reset", json=body)
        assert answer.status_code == status, (body, answer.text)
        assert answer.json()["error_code"] == code, (body, answer.text)
        assert words in answer.json()["message"], (body, answer.text)
    assert srv.client.get("/v1/groups/g/offsets").json()["offsets"] == []  # nothing was written
    # A reset of a group that does not exist yet creates its offsets, as kafka-consumer-groups does.
    assert _reset(srv, "new", to="latest").status_code == 200
    assert _committed(srv, "new") == {0: 0, 1: 0}


def test_unknown_group_is_404(fast: RunningServer) -> None:
    answer = fast.client.get("/v1/groups/nobody")
    assert answer.status_code == 404
    assert answer.json()["error_code"] == 40405
    assert "nobody" in answer.json()["message"]
    assert fast.client.get("/v1/groups/not%20valid").json()["error_code"] == 40001
    # Offsets alone make a group (as Kafka lists and describes it): Empty, no members.
    fast.create_topic("t")
    _commit(fast, "offsets-only", "t", 0)
    body = _describe(fast, "offsets-only")
    assert (body["state"], body["protocol_type"], body["generation"], body["members"]) == (
        "Empty",
        None,
        0,
        [],
    )
    assert body["partitions"] == [
        {
            "topic": "t",
            "partition": 0,
            "committed_offset": 0,
            "log_start_offset": 0,
            "high_watermark": 0,
            "lag": 0,
        }
    ]


def _assignment_v0(topics: dict[str, list[int]]) -> bytes:
    """A ConsumerProtocolAssignment v0, written out by hand: int16 version, an array of (int16-length topic,
    int32 array of int32 partitions), then the user data as int32-length bytes (-1: null)."""
    out = struct.pack(">hi", 0, len(topics))
    for topic, partitions in topics.items():
        out += (
            struct.pack(">h", len(topic))
            + topic.encode()
            + struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
        )
    return out + struct.pack(">i", -1)


def test_assignments_are_decoded_only_for_the_consumer_protocol(fast: RunningServer) -> None:
    fast.create_topic("t", partitions=3)
    valid = _assignment_v0({"t": [2, 0], "gone": [0]})
    _stable_group(fast, "fine", valid)
    _stable_group(fast, "garbled", b"\x00\x00\x00\x00\x00\x05")  # five topics announced, none there
    _stable_group(fast, "connect", valid, protocol_type="connect")  # another protocol's own format
    body = _describe(fast, "fine")
    assert body["members"][0]["assignment"] == [
        {"topic": "gone", "partitions": [0]},
        {"topic": "t", "partitions": [0, 2]},
    ]
    # A topic that does not exist has no partitions to show.
    assert [(p["topic"], p["partition"], p["committed_offset"]) for p in body["partitions"]] == [
        ("t", 0, None),
        ("t", 2, None),
    ]
    for gid in ("garbled", "connect"):
        body = _describe(fast, gid)
        assert (body["state"], body["members"][0]["assignment"], body["partitions"]) == ("Stable", [], [])


# dave may administer the billing-* groups and read the orders.* topics; bob may only read both.
PRINCIPALS = """
[principals.admin]
password = "admin-pw"
superuser = true

[principals.bob]
password = "bob-pw"
topics = { read = ["orders."] }
groups = { read = ["billing-"] }

[principals.dave]
password = "dave-pw"
topics = { read = ["orders."] }
groups = { admin = ["billing-"] }
"""


def _as(user: str) -> dict[str, str]:
    secret = base64.b64encode(f"{user}:{user}-pw".encode()).decode()
    return {"Authorization": f"Basic {secret}"}


def test_permissions(server_factory: Callable[..., Any], tmp_path: Path) -> None:
    path = tmp_path / "principals.toml"
    path.write_text(PRINCIPALS)
    path.chmod(0o600)
    with server_factory(principals_file=str(path)) as srv:
        c = srv.client
        admin, bob, dave = _as("admin"), _as("bob"), _as("dave")
        for topic in ("orders.a", "secret"):
            assert c.post("/v1/topics", json={"name": topic}, headers=admin).status_code == 201
            assert srv.produce(topic, [{"value": "v"}] * 3, headers=admin).status_code == 200
        for gid in ("billing-a", "billing-b", "other"):
            _commit(srv, gid, "orders.a", 1, headers=admin)
        _commit(srv, "billing-a", "secret", 1, headers=admin)

        # Listing shows only the groups one may read, paging over the others.
        page = c.get("/v1/groups", params={"limit": 1}, headers=bob).json()
        assert page == {
            "groups": [
                {
                    "group": "billing-a",
                    "state": "Empty",
                    "protocol_type": None,
                    "protocol": None,
                    "members": 0,
                }
            ],
            "next_after": "billing-a",
        }
        page = c.get("/v1/groups", params={"limit": 1, "after": "billing-a"}, headers=bob).json()
        assert ([g["group"] for g in page["groups"]], page["next_after"]) == (["billing-b"], None)
        listed = c.get("/v1/groups", headers=admin).json()["groups"]
        assert [g["group"] for g in listed] == ["billing-a", "billing-b", "other"]

        # Describing needs read on the group, and leaves out the topics one may not read.
        assert [(p["topic"], p["lag"]) for p in _describe_as(srv, "billing-a", bob)] == [("orders.a", 2)]
        assert {p["topic"] for p in _describe_as(srv, "billing-a", admin)} == {"orders.a", "secret"}
        denied = c.get("/v1/groups/other", headers=bob)
        assert (denied.status_code, denied.json()["error_code"]) == (403, 40302)

        # A reset needs READ on the group and on the topic (Kafka's OffsetCommit): bob's dry run on his
        # group is answered; a group or a topic outside his grants is refused.
        reset = {"topic": "orders.a", "to": "earliest"}
        dry = c.post("/v1/groups/billing-a/offsets/reset", json={**reset, "dry_run": True}, headers=bob)
        assert dry.status_code == 200, dry.text
        for who, gid, body, code in (
            (bob, "other", reset, 40302),
            (dave, "other", reset, 40302),
            (dave, "billing-a", {"topic": "secret", "to": "earliest"}, 40301),
        ):
            answer = c.post(f"/v1/groups/{gid}/offsets/reset", json=body, headers=who)
            assert answer.status_code == 403, answer.text
            assert answer.json()["error_code"] == code
        offsets = c.get("/v1/groups/billing-a/offsets", headers=admin).json()["offsets"]
        assert {(o["topic"], o["offset"]) for o in offsets} == {("orders.a", 1), ("secret", 1)}
        answer = c.post("/v1/groups/billing-a/offsets/reset", json=reset, headers=dave)
        assert answer.status_code == 200, answer.text
        assert answer.json()["offsets"] == [{"topic": "orders.a", "partition": 0, "offset": 0}]


def _describe_as(srv: RunningServer, gid: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    answer = srv.client.get(f"/v1/groups/{gid}", headers=headers)
    assert answer.status_code == 200, answer.text
    partitions: list[dict[str, Any]] = answer.json()["partitions"]
    return partitions
