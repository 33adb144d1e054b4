"""The scenario registry and the request pieces scenarios share.

A scenario is a function of one ``Side`` and a name prefix (fresh per run, the same on both sides) that
sends its workload and returns its answers as ``{step: answer}``; the runner sends it to both brokers and
compares the two dicts step by step. ``quick`` scenarios run in ``make test``; all run in
``make differential``.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crc32c import crc32c
from kafka.protocol.admin.topics import CreateTopicsRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest

from storage import records
from tests.differential.wire import Side

Answers = dict[str, Any]
ScenarioFn = Callable[[Side, str], Answers]

# A fixed base time, in the past: both brokers keep CreateTime timestamps within any age by default.
T0 = 1_700_000_000_000


@dataclass(frozen=True)
class Scenario:
    name: str
    run: ScenarioFn
    quick: bool
    doc: str


SCENARIOS: dict[str, Scenario] = {}


def scenario(quick: bool = False) -> Callable[[ScenarioFn], ScenarioFn]:
    def register(fn: ScenarioFn) -> ScenarioFn:
        name = fn.__name__.replace("_", "-")
        SCENARIOS[name] = Scenario(name, fn, quick, (fn.__doc__ or "").strip().split("\n")[0])
        return fn

    return register


def batch(
    values: list[bytes | None],
    *,
    keys: list[bytes | None] | None = None,
    t0: int = T0,
    codec: int = 0,
    headers: tuple[records.Header, ...] = (),
) -> bytes:
    """One RecordBatch v2 of ``values`` (keys ``k0``, ``k1``... unless given), timestamps t0, t0+1, ..."""
    keys = keys if keys is not None else [f"k{i}".encode() for i in range(len(values))]
    recs = [records.Record(i, t0 + i, keys[i], v, headers) for i, v in enumerate(values)]
    return records.encode_batch(recs, codec=codec)


def patched(data: bytes, at: int, fmt: str, *values: int, fix_crc: bool = True) -> bytes:
    """``data`` with ``values`` packed (big-endian ``fmt``) at ``at``, and its CRC-32C written again."""
    out = bytearray(data)
    struct.pack_into(">" + fmt, out, at, *values)
    if fix_crc:
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def idempotent(data: bytes, producer_id: int, epoch: int, sequence: int) -> bytes:
    """The batch as an idempotent producer's: producerId (byte 43), producerEpoch (51), baseSequence (53)."""
    return patched(data, 43, "qhi", producer_id, epoch, sequence)


def create_topic(side: Side, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> Any:
    """CreateTopics for one topic; returns once Metadata shows it (see ``settled_metadata``)."""
    created = side.call(
        CreateTopicsRequest,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            "timeout_ms": 10000,
            "validate_only": False,
        },
    )
    settled_metadata(side, {name: partitions})
    led(side, name, partitions)
    for topic in created["topics"]:
        topic.pop("configs", None)  # compared where configs are the point (scenarios_admin.py)
    return created


def led(side: Side, topic: str, partitions: int) -> None:
    """Wait until every partition answers ListOffsets: a new Kafka partition answers
    NOT_LEADER_OR_FOLLOWER until its broker has made itself leader, after Metadata already shows it."""
    request = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1, "max_num_offsets": 1}
                    for p in range(partitions)
                ],
            }
        ],
    }
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = side.call(ListOffsetsRequest, request)
        if all(p["error_code"] == 0 for t in got["topics"] for p in t["partitions"]):
            return
        time.sleep(0.1)


def produce(
    side: Side, topic: str, partition: int, data: bytes, acks: int = -1, version: int | None = None
) -> Any:
    return side.call(
        ProduceRequest,
        {
            "transactional_id": None,
            "acks": acks,
            "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": data}]}],
        },
        version,
    )


def metadata(side: Side, *topics: str, auto_create: bool = False) -> Any:
    return side.call(
        MetadataRequest,
        {
            "topics": [{"name": t} for t in topics],
            "allow_auto_topic_creation": auto_create,
            "include_topic_authorized_operations": False,
        },
    )


def settled_metadata(side: Side, expected: dict[str, int], *also: str) -> Any:
    """Metadata for ``expected`` (topic -> partitions) and ``also``, once every expected topic shows its
    partitions: Kafka's brokers learn of new topics and partitions from the controller a moment after
    CreateTopics answers, and a workload that asks at once sees UNKNOWN_TOPIC_OR_PARTITION there."""
    deadline = time.monotonic() + 10
    while True:
        got = metadata(side, *expected, *also)
        shown = {t["name"]: len(t["partitions"]) for t in got["topics"] if t["error_code"] == 0}
        if all(shown.get(t) == n for t, n in expected.items()) or time.monotonic() > deadline:
            return got
        time.sleep(0.1)
