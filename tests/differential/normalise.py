"""Answers as plain data, minus what is each broker's own.

A response becomes nested dicts and lists. Taken out, because they name the broker rather than answer the
request: throttle times, node ids, hosts and ports, cluster and topic ids, replica lists, and the text of
error messages (the codes are compared; the wording is each broker's). Member ids become ``<member N>``
in the order a side first hands them out, so the same workload compares equal. Record bytes become their
batches and records, decoded (a truncated batch at the end of a fetch is reported by its size only).
"""

from __future__ import annotations

import struct
from typing import Any

from storage import records

BROKER_OWN = frozenset(
    {
        "throttle_time_ms",
        "error_message",
        "batch_index_error_message",
        "topic_id",
        "cluster_id",
        "controller_id",
        "node_id",
        "host",
        "port",
        "rack",
        "leader_id",
        "replica_nodes",
        "isr_nodes",
        "offline_replicas",
        "eligible_leader_replicas",
        "last_known_elr",
        "current_leader",
        "node_endpoints",
        "brokers",
        "coordinators",
        "cluster_authorized_operations",
        "topic_authorized_operations",
        "authorized_operations",
        "leader_epoch",
        "partition_leader_epoch",
        "preferred_read_replica",
        "session_id",
        "unknown_tags",
    }
)
MEMBER_FIELDS = frozenset({"member_id", "leader"})


class Members:
    """Member ids as ``<member N>``, numbered in the order one side hands them out."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, member_id: str) -> str:
        if not member_id:
            return member_id
        return self.names.setdefault(member_id, f"<member {len(self.names) + 1}>")


def answer(data: Any, members: Members | None = None) -> Any:
    members = members or Members()
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key in BROKER_OWN:
                continue
            if key == "records" and isinstance(value, bytes | bytearray | memoryview):
                out[key] = decode_batches(bytes(value))
            elif key == "aborted_transactions" and isinstance(value, list):
                # Producer ids are each broker's to hand out: the first offsets are compared.
                out[key] = [
                    {"producer_id": "<producer id>", "first_offset": a["first_offset"]} for a in value
                ]
            elif key in MEMBER_FIELDS and isinstance(value, str):
                out[key] = members(value)
            else:
                out[key] = answer(value, members)
        return out
    if isinstance(data, list | tuple):
        return [answer(v, members) for v in data]
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data).hex()
    return data


_CONTROL = 0x20
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}


def _control(batch: bytes) -> dict[str, Any]:
    """A transaction marker (storage/records/control.py's layout): its offset, attributes, producer epoch
    and type. Its timestamp is when the transaction ended on that broker, so it is left out."""
    base_offset, attributes, epoch = (
        struct.unpack_from(">q", batch, 0)[0],
        struct.unpack_from(">h", batch, 21)[0],
        struct.unpack_from(">h", batch, 51)[0],
    )
    # The one record: length, attributes, timestampDelta, offsetDelta (varints of one byte here), key length
    # (varint 4 = 0x08), then the key: int16 version, int16 type.
    (kind,) = struct.unpack_from(">h", batch, 61 + 5 + 2)
    return {
        "base_offset": base_offset,
        "attributes": attributes,
        "producer_epoch": epoch,
        "control": _CONTROL_TYPES.get(kind, kind),
    }


def decode_batches(data: bytes) -> list[dict[str, Any]]:
    """Each whole batch's header fields and records; a partial batch at the end (a fetch cut at its byte
    limit) as {"partial": size}."""
    out: list[dict[str, Any]] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            out.append({"partial": len(data) - pos})
            break
        (length,) = struct.unpack_from(">i", data, pos + 8)
        if pos + 12 + length > len(data):
            out.append({"partial": len(data) - pos})
            break
        batch = data[pos : pos + 12 + length]
        if struct.unpack_from(">h", batch, 21)[0] & _CONTROL:
            out.append(_control(batch))
            pos += 12 + length
            continue
        header = records.read_header(batch, 0, True)
        out.append(
            {
                "base_offset": header.base_offset,
                "last_offset_delta": header.last_offset_delta,
                "attributes": header.attributes,
                "base_timestamp": header.base_timestamp,
                "max_timestamp": header.max_timestamp,
                # Producer ids are each broker's to hand out: only whether there is one is compared.
                "producer_id": header.producer_id if header.producer_id < 0 else "<producer id>",
                "producer_epoch": header.producer_epoch,
                "base_sequence": header.base_sequence,
                "records": [
                    [
                        r.offset,
                        r.timestamp,
                        r.key,
                        r.value,
                        [(h.key, h.value) for h in r.headers],
                    ]
                    for r in records.decode_records(batch)
                ],
            }
        )
        pos += 12 + length
    normalised: list[dict[str, Any]] = answer(out)
    return normalised
