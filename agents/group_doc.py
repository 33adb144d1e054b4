"""A consumer group's stored form: the one JSON document per group that the metadata store keeps.

The coordinator (``agents/group_coordinator.py``) loads a group with ``group_from_json``, applies one
function of ``agents/group_state.py`` and stores it back with ``group_to_json``, in one transaction. Bytes
(protocol metadata, assignments) are base64. The names are short and stable: a document written by any
agent version is read by every later one, and ``last_round`` may be absent (older documents).
"""

from __future__ import annotations

import base64
import json

from agents.group_model import Group, GroupPhase, Member, Round


def group_to_json(group: Group) -> str:
    return json.dumps(
        {
            "phase": group.phase.value,
            "generation": group.generation,
            "protocol_type": group.protocol_type,
            "protocol": group.protocol,
            "leader": group.leader,
            "members": [_member_doc(m) for m in group.members.values()],
            "pending": group.pending,
            "rebalance_deadline_ms": group.rebalance_deadline_ms,
            "delay_until_ms": group.delay_until_ms,
            "last_round": None if group.last_round is None else _round_doc(group.last_round),
        },
        separators=(",", ":"),
    )


def group_from_json(group_id: str, text: str) -> Group:
    doc = json.loads(text)
    members = [_member_from_doc(d) for d in doc["members"]]
    return Group(
        group_id,
        GroupPhase(doc["phase"]),
        int(doc["generation"]),
        doc["protocol_type"],
        doc["protocol"],
        doc["leader"],
        {m.member_id: m for m in members},
        {str(k): int(v) for k, v in doc["pending"].items()},
        int(doc["rebalance_deadline_ms"]),
        int(doc["delay_until_ms"]),
        None if doc.get("last_round") is None else _round_from_doc(doc["last_round"]),
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _round_doc(r: Round) -> dict[str, object]:
    return {
        "generation": r.generation,
        "protocol_type": r.protocol_type,
        "protocol": r.protocol,
        "leader": r.leader,
        "members": [[m, i, _b64(meta)] for m, i, meta in r.members],
    }


def _round_from_doc(doc: dict[str, object]) -> Round:
    members = doc["members"]
    assert isinstance(members, list)
    return Round(
        int(str(doc["generation"])),
        None if doc["protocol_type"] is None else str(doc["protocol_type"]),
        str(doc["protocol"]),
        str(doc["leader"]),
        [(str(m), None if i is None else str(i), base64.b64decode(meta)) for m, i, meta in members],
    )


def _member_doc(m: Member) -> dict[str, object]:
    return {
        "id": m.member_id,
        "instance": m.instance_id,
        "client": m.client_id,
        "host": m.client_host,
        "session": m.session_timeout_ms,
        "rebalance": m.rebalance_timeout_ms,
        "type": m.protocol_type,
        "protocols": [[name, _b64(meta)] for name, meta in m.protocols],
        "assignment": _b64(m.assignment),
        "seen": m.last_seen_ms,
        "joining": m.joining,
    }


def _member_from_doc(d: dict[str, object]) -> Member:
    protocols = d["protocols"]
    assert isinstance(protocols, list)
    return Member(
        str(d["id"]),
        None if d["instance"] is None else str(d["instance"]),
        str(d["client"]),
        str(d["host"]),
        int(str(d["session"])),
        int(str(d["rebalance"])),
        str(d["type"]),
        [(str(name), base64.b64decode(meta)) for name, meta in protocols],
        base64.b64decode(str(d["assignment"])),
        int(str(d["seen"])),
        bool(d["joining"]),
    )
