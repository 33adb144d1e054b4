"""Scenarios on consumer groups over the classic protocol: the member's calls and the admin's."""

from __future__ import annotations

import struct
import time
from typing import Any

from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from tests.differential.base import Answers, create_topic, scenario
from tests.differential.wire import Side


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0, as the Java client writes it: version, topics, null user data.
    Kafka's coordinator parses it for "consumer" groups; both brokers hand it back as sent."""
    return struct.pack(">hi", 0, 1) + _string(topic) + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: version, (topic, partitions) pairs, null user data."""
    body = struct.pack(">hi", 0, 1) + _string(topic) + struct.pack(">i", len(partitions))
    return body + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1)


# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: a new Kafka cluster creates
# __consumer_offsets and loads its partitions first, and answers these meanwhile.
_NOT_READY = frozenset({14, 15, 16})


def find_coordinator(side: Side, group: str) -> Any:
    """FindCoordinator's error codes, once the group's coordinator is ready to answer DescribeGroups."""
    deadline = time.monotonic() + 30
    while True:
        got = side.call(FindCoordinatorRequest, {"key": group, "key_type": 0, "coordinator_keys": [group]})
        codes = [c["error_code"] for c in got.get("coordinators", [])] or [got.get("error_code", 0)]
        ready = describe(side, group)["groups"][0]["error_code"] not in _NOT_READY
        if (codes[0] not in _NOT_READY and ready) or time.monotonic() > deadline:
            return codes
        time.sleep(0.2)


def join(
    side: Side, group: str, member: str, topic: str, session_ms: int = 10000, protocol_type: str = "consumer"
) -> Any:
    return side.call(
        JoinGroupRequest,
        {
            "group_id": group,
            "session_timeout_ms": session_ms,
            "rebalance_timeout_ms": 10000,
            "member_id": member,
            "group_instance_id": None,
            "protocol_type": protocol_type,
            "protocols": [{"name": "range", "metadata": subscription(topic)}],
            "reason": None,
        },
    )


def commit(side: Side, group: str, generation: int, member: str, topic: str, offset: int) -> Any:
    return side.call(
        OffsetCommitRequest,
        {
            "group_id": group,
            "generation_id_or_member_epoch": generation,
            "member_id": member,
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": offset,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "m",
                        }
                    ],
                }
            ],
        },
    )


def fetch_offsets(side: Side, group: str, topic: str | None) -> Any:
    topics = None if topic is None else [{"name": topic, "partition_indexes": [0, 1]}]
    version = side.common[OffsetFetchRequest.API_KEY]
    if version >= 8:
        return side.call(
            OffsetFetchRequest, {"groups": [{"group_id": group, "topics": topics}], "require_stable": False}
        )
    return side.call(OffsetFetchRequest, {"group_id": group, "topics": topics, "require_stable": False})


def describe(side: Side, group: str) -> Any:
    return side.call(DescribeGroupsRequest, {"groups": [group], "include_authorized_operations": False})


def listed(side: Side, group: str) -> Any:
    """ListGroups narrowed to this run's group (the broker holds others)."""
    got = side.call(ListGroupsRequest, {"states_filter": [], "types_filter": []})
    got["groups"] = [g for g in got["groups"] if g["group_id"] == group]
    return got


@scenario(quick=True)
def consumer_group(side: Side, prefix: str) -> Answers:
    """One member's life in a group, with the errors a member and an admin can meet on the way."""
    t, g = f"{prefix}-gt", f"{prefix}-group"
    out: Answers = {"create": create_topic(side, t, 2)}
    out["find coordinator"] = find_coordinator(side, g)
    out["offsets before"] = fetch_offsets(side, g, t)
    out["describe before"] = describe(side, g)
    first = join(side, g, "", t)
    out["join without id"] = first
    raw_member = side.last_raw["member_id"]
    out["bad session timeout"] = join(side, f"{g}-x", "", t, session_ms=1)
    joined = join(side, g, raw_member, t)
    out["join"] = joined
    generation = joined["generation_id"]
    out["join other protocol type"] = join(side, g, "", t, protocol_type="connect")
    assignments = [{"member_id": raw_member, "assignment": assignment(t, [0, 1])}]
    sync = {"group_id": g, "generation_id": generation, "member_id": raw_member, "group_instance_id": None}
    sync |= {"protocol_type": "consumer", "protocol_name": "range"}
    out["sync"] = side.call(SyncGroupRequest, sync | {"assignments": assignments})
    beat = {"group_id": g, "generation_id": generation, "member_id": raw_member, "group_instance_id": None}
    out["heartbeat"] = side.call(HeartbeatRequest, beat)
    out["heartbeat old generation"] = side.call(HeartbeatRequest, beat | {"generation_id": generation + 5})
    out["heartbeat unknown member"] = side.call(HeartbeatRequest, beat | {"member_id": "nobody"})
    out["commit"] = commit(side, g, generation, raw_member, t, 5)
    out["commit old generation"] = commit(side, g, generation + 5, raw_member, t, 6)
    out["commit unknown topic"] = commit(side, g, generation, raw_member, f"{t}-missing", 1)
    out["offsets"] = fetch_offsets(side, g, t)
    out["all offsets"] = fetch_offsets(side, g, None)
    out["describe stable"] = describe(side, g)
    out["list"] = listed(side, g)
    out["delete while stable"] = side.call(DeleteGroupsRequest, {"groups_names": [g]})
    out["offset delete while subscribed"] = _offset_delete(side, g, t)
    leave = {"group_id": g, "members": [{"member_id": raw_member, "group_instance_id": None, "reason": None}]}
    out["leave"] = side.call(LeaveGroupRequest, leave)
    out["describe empty"] = describe(side, g)
    out["offsets after leave"] = fetch_offsets(side, g, t)
    out["simple commit"] = commit(side, f"{g}-simple", -1, "", t, 3)
    out["simple offsets"] = fetch_offsets(side, f"{g}-simple", t)
    out["offset delete"] = _offset_delete(side, g, t)
    out["offsets after delete"] = fetch_offsets(side, g, t)
    out["delete"] = side.call(DeleteGroupsRequest, {"groups_names": [g, f"{g}-missing"]})
    out["describe deleted"] = describe(side, g)
    return out


def _offset_delete(side: Side, group: str, topic: str) -> Any:
    return side.call(
        OffsetDeleteRequest,
        {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]},
    )
