"""Scenarios on topics and their logs: create and delete, produce and fetch, ListOffsets, DeleteRecords."""

from __future__ import annotations

import time
from typing import Any

from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
)
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest

from storage import records
from tests.differential.base import (
    T0,
    Answers,
    batch,
    create_topic,
    idempotent,
    metadata,
    produce,
    scenario,
    settled_metadata,
)
from tests.differential.wire import Side


def _creatable(
    name: str, partitions: int, rf: int = 1, configs: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": rf,
        "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }


def fetch(
    side: Side,
    topic: str,
    partition: int,
    offset: int,
    max_bytes: int = 1 << 20,
    version: int | None = None,
    isolation_level: int = 0,
) -> Any:
    return side.call(
        FetchRequest,
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 24,
            "isolation_level": isolation_level,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": partition,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "log_start_offset": -1,
                            "partition_max_bytes": max_bytes,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
        version,
    )


def list_offsets(
    side: Side, topic: str, *specs: tuple[int, int], version: int | None = None, isolation_level: int = 0
) -> Any:
    """One ListOffsets request: ``specs`` are (partition, timestamp) pairs, each partition at most once
    (Kafka answers INVALID_REQUEST to every copy of a partition asked twice)."""
    return side.call(
        ListOffsetsRequest,
        {
            "replica_id": -1,
            "isolation_level": isolation_level,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": p,
                            "current_leader_epoch": -1,
                            "timestamp": ts,
                            "max_num_offsets": 1,
                        }
                        for p, ts in specs
                    ],
                }
            ],
        },
        version,
    )


@scenario(quick=True)
def create_and_delete_topics(side: Side, prefix: str) -> Answers:
    """CreateTopics with good and bad arguments, Metadata, CreatePartitions and DeleteTopics."""
    t = f"{prefix}-topics"
    out: Answers = {}

    def create(step: str, *topics: dict[str, Any], validate_only: bool = False) -> None:
        out[step] = side.call(
            CreateTopicsRequest, {"topics": list(topics), "timeout_ms": 10000, "validate_only": validate_only}
        )

    create("create", _creatable(t, 3, configs={"retention.ms": "100000"}))
    create("create again", _creatable(t, 3))
    create("validate only", _creatable(f"{t}-v", 2), validate_only=True)
    create("bad name", _creatable("bad name!", 1))
    create("name of dots", _creatable("..", 1))
    create("zero partitions", _creatable(f"{t}-0", 0))
    create("replication factor 3", _creatable(f"{t}-rf", 1, rf=3))
    create("replication factor 0", _creatable(f"{t}-rf0", 1, rf=0))
    create("unknown config", _creatable(f"{t}-c", 1, configs={"no.such.config": "1"}))
    create("bad config value", _creatable(f"{t}-c", 1, configs={"retention.ms": "soon"}))
    create("bad cleanup policy", _creatable(f"{t}-c", 1, configs={"cleanup.policy": "shred"}))
    create("two in one", _creatable(f"{t}-a", 1), _creatable(f"{t}-b", 2))
    out["metadata"] = settled_metadata(side, {t: 3, f"{t}-a": 1, f"{t}-b": 2}, f"{t}-v", f"{t}-missing")
    for step, count in (("partitions to 5", 5), ("partitions to 2", 2), ("partitions to 5 again", 5)):
        out[step] = side.call(
            CreatePartitionsRequest,
            {
                "topics": [{"name": t, "count": count, "assignments": None}],
                "timeout_ms": 10000,
                "validate_only": False,
            },
        )
    out["partitions of unknown topic"] = side.call(
        CreatePartitionsRequest,
        {
            "topics": [{"name": f"{t}-missing", "count": 2, "assignments": None}],
            "timeout_ms": 10000,
            "validate_only": False,
        },
    )
    out["metadata after"] = settled_metadata(side, {t: 5})
    out["delete"] = side.call(DeleteTopicsRequest, _delete_topics(side, [f"{t}-a", f"{t}-missing"]))
    deadline = time.monotonic() + 10
    while metadata(side, f"{t}-a")["topics"][0]["error_code"] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    out["metadata of deleted"] = metadata(side, f"{t}-a")
    return out


def _delete_topics(side: Side, names: list[str]) -> dict[str, Any]:
    version = side.common[DeleteTopicsRequest.API_KEY]
    if version >= 6:
        return {"topics": [{"name": n} for n in names], "timeout_ms": 10000}
    return {"topic_names": names, "timeout_ms": 10000}


@scenario(quick=True)
def produce_and_fetch(side: Side, prefix: str) -> Answers:
    """Produce at several versions and codecs, then Fetch from the start, the middle, the end and past it."""
    t = f"{prefix}-log"
    out: Answers = {"create": create_topic(side, t, 2)}
    out["produce 3"] = produce(side, t, 0, batch([b"a", b"b", b"c"]))
    out["produce 2 gzip"] = produce(side, t, 0, batch([b"d", None], t0=T0 + 10, codec=1))
    out["produce headers"] = produce(
        side, t, 1, batch([b"h"], headers=(records.Header("h1", b"x"), records.Header("h2", None)))
    )
    out["produce v3"] = produce(side, t, 1, batch([b"old"], t0=T0 + 20), version=3)
    out["produce acks 1"] = produce(side, t, 1, batch([b"one"], t0=T0 + 30), acks=1)
    out["produce unknown partition"] = produce(side, t, 7, batch([b"x"]))
    out["produce unknown topic"] = produce(side, f"{t}-missing", 0, batch([b"x"]))
    for start in (0, 3, 5, 6, -1):
        out[f"fetch p0 at {start}"] = fetch(side, t, 0, start)
    out["fetch p1"] = fetch(side, t, 1, 0)
    out["fetch p1 v4"] = fetch(side, t, 1, 0, version=4)
    out["fetch one byte"] = fetch(side, t, 0, 0, max_bytes=1)
    out["fetch unknown partition"] = fetch(side, t, 9, 0)
    out["fetch unknown topic"] = fetch(side, f"{t}-missing", 0, 0)
    return out


RETRIABLE = frozenset({7, 14, 15})  # REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS, NOT_AVAILABLE


@scenario(quick=True)
def idempotent_producer(side: Side, prefix: str) -> Answers:
    """An idempotent producer's sequence checks: in order, duplicate, gap, and a stale epoch."""
    t = f"{prefix}-idem"
    out: Answers = {"create": create_topic(side, t, 1)}
    deadline = time.monotonic() + 10
    while True:  # a new Kafka cluster answers COORDINATOR_LOAD_IN_PROGRESS until its id blocks are ready
        got = side.call(InitProducerIdRequest, {"transactional_id": None, "transaction_timeout_ms": -1})
        if got["error_code"] not in RETRIABLE or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    pid, epoch = got["producer_id"], got["producer_epoch"]
    out["init producer id"] = {"error_code": got["error_code"], "epoch": epoch}
    first = idempotent(batch([b"a", b"b"]), pid, epoch, 0)
    out["first"] = produce(side, t, 0, first)
    out["duplicate"] = produce(side, t, 0, first)
    out["next"] = produce(side, t, 0, idempotent(batch([b"c"]), pid, epoch, 2))
    out["gap"] = produce(side, t, 0, idempotent(batch([b"e"]), pid, epoch, 9))
    out["unknown producer"] = produce(side, t, 0, idempotent(batch([b"u"]), pid + 1000, 0, 5))
    out["fetch"] = fetch(side, t, 0, 0)
    return out


@scenario(quick=True)
def list_offsets_by_time(side: Side, prefix: str) -> Answers:
    """ListOffsets: earliest, latest, max timestamp, and by time before, at, between and after records."""
    t = f"{prefix}-times"
    out: Answers = {"create": create_topic(side, t, 2)}
    for ts in (-2, -1, -3, T0):
        out[f"empty at {ts}"] = list_offsets(side, t, (0, ts))
    out["one partition twice"] = list_offsets(side, t, (0, -2), (0, -1))
    produce(side, t, 0, batch([b"a", b"b", b"c"], t0=T0))
    produce(side, t, 0, batch([b"d", b"e"], t0=T0 + 100))
    produce(side, t, 0, batch([b"late"], t0=T0 + 50))  # timestamps need not rise
    for ts in (-2, -1, -3, T0 - 1, T0, T0 + 2, T0 + 3, T0 + 60, T0 + 101, T0 + 102):
        out[f"at {ts}"] = list_offsets(side, t, (0, ts), (1, ts))
        out[f"v1 at {ts}"] = list_offsets(side, t, (0, ts), version=1)
    out["unknown partition"] = list_offsets(side, t, (5, -1))
    out["unknown topic"] = list_offsets(side, f"{t}-missing", (0, -1))
    return out


@scenario(quick=True)
def delete_records(side: Side, prefix: str) -> Answers:
    """DeleteRecords: to an offset, to the high watermark (-1), past it; then the log start everywhere."""
    t = f"{prefix}-dr"
    out: Answers = {"create": create_topic(side, t, 1)}
    produce(side, t, 0, batch([b"a", b"b", b"c", b"d", b"e"]))

    def delete(step: str, offset: int, partition: int = 0, topic: str = t) -> None:
        out[step] = side.call(
            DeleteRecordsRequest,
            {
                "topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}],
                "timeout_ms": 10000,
            },
        )

    delete("to 2", 2)
    for ts in (-2, -1, T0, T0 + 3):
        out[f"list offsets at {ts}"] = list_offsets(side, t, (0, ts))
    out["fetch below start"] = fetch(side, t, 0, 0)
    out["fetch at start"] = fetch(side, t, 0, 2)
    delete("backwards to 1", 1)
    delete("past the end", 10)
    delete("to -1", -1)
    for ts in (-2, -1, -3):
        out[f"after -1 at {ts}"] = list_offsets(side, t, (0, ts))
    delete("unknown partition", 0, partition=4)
    delete("unknown topic", 0, topic=f"{t}-missing")
    return out
