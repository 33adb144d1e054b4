"""The Kafka handlers called directly (no socket), on a context of real parts (tests/fixtures/broker.py):
ListOffsets, DeleteRecords, OffsetCommit/OffsetFetch, FindCoordinator and InitProducerId.

Records are produced through the started agent (the same flush the Kafka door's Produce waits for), with
timestamps relative to the context's manual clock.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.consumer.group import OffsetFetchRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest

from agents.encode import ProduceRecord
from broker import errors
from tests.fixtures.broker import BrokerParts, call, commit_codes, commit_request, fetched

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


async def produce(parts: BrokerParts, topic: str, ages_ms: list[int]) -> int:
    """Records on partition 0 of ``topic``, stamped ``now - age``; the clock's now."""
    now = parts.clock.now_ms()
    recs = [
        ProduceRecord(b"k", b"v%d" % i, partition=0, timestamp=now - age) for i, age in enumerate(ages_ms)
    ]
    offsets = await parts.agent.produce_records(topic, recs)
    assert [offset for _, offset in offsets] == list(range(len(ages_ms)))
    return now


# --- ListOffsets ----------------------------------------------------------------------------------------
def list_offsets_request(topic: str, specs: list[tuple[int, int]], version: int = 7) -> Any:
    t = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest[version](
        replica_id=-1,
        isolation_level=0,
        topics=[
            t(
                name=topic,
                partitions=[
                    t.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=ts)
                    for p, ts in specs
                ],
            )
        ],
    )


async def test_list_offsets_earliest_latest_and_by_timestamp(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("t", 2, {}, 0)
    now = await produce(broker_parts, "t", [3000, 1000, 2000])
    cases = [
        ((0, EARLIEST), (errors.NONE, 0, -1)),
        ((0, LATEST), (errors.NONE, 3, -1)),
        ((0, MAX_TIMESTAMP), (errors.NONE, 1, now - 1000)),
        ((0, now - 2500), (errors.NONE, 1, now - 1000)),  # the first record at or after it: offset 1
        ((0, now - 1000), (errors.NONE, 1, now - 1000)),
        ((0, now + 1), (errors.NONE, -1, -1)),  # none
        ((1, LATEST), (errors.NONE, 0, -1)),  # an empty partition
        ((9, LATEST), (errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)),
    ]
    for spec, expected in cases:
        answer = await call(broker_parts.ctx, list_offsets_request("t", [spec]))
        (p,) = answer.topics[0].partitions
        assert (p.partition_index, p.error_code, p.offset, p.timestamp) == (spec[0], *expected)
        assert p.leader_epoch == -1


async def test_list_offsets_refuses_what_kafka_refuses(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("t", 2, {}, 0)
    await produce(broker_parts, "t", [10])
    # A partition asked twice: one answer for it, INVALID_REQUEST; the other partition is answered.
    answer = await call(
        broker_parts.ctx, list_offsets_request("t", [(0, LATEST), (1, LATEST), (0, EARLIEST)])
    )
    got = [(p.partition_index, p.error_code, p.offset) for p in answer.topics[0].partitions]
    assert got == [(0, errors.INVALID_REQUEST, -1), (1, errors.NONE, 0)]
    # MAX_TIMESTAMP came with version 7.
    for version, code in [(6, errors.UNSUPPORTED_VERSION), (7, errors.NONE)]:
        answer = await call(broker_parts.ctx, list_offsets_request("t", [(0, MAX_TIMESTAMP)], version))
        assert answer.topics[0].partitions[0].error_code == code


async def test_list_offsets_of_an_unknown_topic(broker_parts: BrokerParts) -> None:
    answer = await call(broker_parts.ctx, list_offsets_request("never", [(0, LATEST)], version=1))
    (partition,) = answer.topics[0].partitions
    assert (partition.error_code, partition.offset) == (errors.UNKNOWN_TOPIC_OR_PARTITION, -1)


# --- DeleteRecords --------------------------------------------------------------------------------------
def delete_records_request(topic: str, offsets: list[tuple[int, int]]) -> Any:
    t = DeleteRecordsRequest.DeleteRecordsTopic
    return DeleteRecordsRequest[2](
        topics=[
            t(
                name=topic,
                partitions=[t.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in offsets],
            )
        ],
        timeout_ms=1000,
    )


async def test_delete_records_moves_the_log_start(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("t", 1, {}, 0)
    await produce(broker_parts, "t", [3, 2, 1, 0])

    async def delete(offset: int) -> tuple[int, int]:
        answer = await call(broker_parts.ctx, delete_records_request("t", [(0, offset)]))
        (p,) = answer.topics[0].partitions
        return p.error_code, p.low_watermark

    assert await delete(2) == (errors.NONE, 2)
    assert await delete(1) == (errors.NONE, 2)  # the log start never moves back
    assert await delete(9) == (errors.OFFSET_OUT_OF_RANGE, -1)
    earliest = await call(broker_parts.ctx, list_offsets_request("t", [(0, EARLIEST)]))
    assert earliest.topics[0].partitions[0].offset == 2
    assert await delete(-1) == (errors.NONE, 4)  # -1: the high watermark
    assert broker_parts.metadata.partition_state("t", 0).log_start_offset == 4


async def test_delete_records_refusals(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("compacted", 1, {"cleanup.policy": "compact"}, 0)
    answer = await call(broker_parts.ctx, delete_records_request("compacted", [(0, -1)]))
    assert answer.topics[0].partitions[0].error_code == errors.POLICY_VIOLATION
    answer = await call(broker_parts.ctx, delete_records_request("never", [(0, 1)]))
    assert answer.topics[0].partitions[0].error_code == errors.UNKNOWN_TOPIC_OR_PARTITION


# --- OffsetCommit, OffsetFetch --------------------------------------------------------------------------
async def test_offset_commit_then_fetch(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("t", 3, {}, 0)
    answer = await call(
        broker_parts.ctx,
        commit_request(
            "g",
            [
                ("t", 0, 42, "mine"),
                ("t", 1, 7, None),
                ("t", 5, 1, None),
                ("never", 0, 1, None),
                ("t", 2, 8, "x" * 4097),
            ],
        ),
    )
    assert commit_codes(answer) == {
        ("t", 0): errors.NONE,
        ("t", 1): errors.NONE,
        ("t", 2): errors.OFFSET_METADATA_TOO_LARGE,
        ("t", 5): errors.UNKNOWN_TOPIC_OR_PARTITION,
        ("never", 0): errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    every = await call(
        broker_parts.ctx, OffsetFetchRequest[7](group_id="g", topics=None, require_stable=False)
    )
    assert every.error_code == errors.NONE
    assert fetched(every) == {("t", 0): (42, "mine"), ("t", 1): (7, "")}
    t = OffsetFetchRequest.OffsetFetchRequestTopic
    named = await call(
        broker_parts.ctx, OffsetFetchRequest[1](group_id="g", topics=[t(name="t", partition_indexes=[1, 0])])
    )
    assert fetched(named) == {("t", 1): (7, ""), ("t", 0): (42, "mine")}
    nothing = await call(
        broker_parts.ctx, OffsetFetchRequest[1](group_id="other", topics=[t(name="t", partition_indexes=[0])])
    )
    assert fetched(nothing) == {("t", 0): (-1, "")}  # no commit: offset -1 and no error
    assert nothing.topics[0].partitions[0].error_code == errors.NONE


async def test_offset_commit_with_a_generation_of_a_group_without_members(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("t", 1, {}, 0)
    answer = await call(broker_parts.ctx, commit_request("g", [("t", 0, 1, None)], generation=3))
    assert commit_codes(answer) == {("t", 0): errors.ILLEGAL_GENERATION}
    every = await call(
        broker_parts.ctx, OffsetFetchRequest[7](group_id="g", topics=None, require_stable=False)
    )
    assert every.topics == []


# --- FindCoordinator ------------------------------------------------------------------------------------
async def test_find_coordinator(broker_parts: BrokerParts) -> None:
    group = await call(broker_parts.ctx, FindCoordinatorRequest[3](key="g", key_type=0))
    assert (group.error_code, group.node_id, group.host, group.port) == (errors.NONE, 5, "127.0.0.1", 9092)
    v0 = await call(broker_parts.ctx, FindCoordinatorRequest[0](key="g"))
    assert (v0.error_code, v0.node_id) == (errors.NONE, 5)
    txn = await call(broker_parts.ctx, FindCoordinatorRequest[3](key="txn", key_type=1))
    # Any agent coordinates any transactional id, as any group: this one answers with itself.
    assert (txn.error_code, txn.node_id, txn.port) == (errors.NONE, 5, 9092)
    unknown = await call(broker_parts.ctx, FindCoordinatorRequest[3](key="x", key_type=2))
    assert (unknown.error_code, unknown.node_id) == (errors.INVALID_REQUEST, -1)


# --- InitProducerId -------------------------------------------------------------------------------------
def init_request(
    version: int, producer_id: int = -1, epoch: int = -1, transactional_id: str | None = None
) -> Any:
    fields: dict[str, Any] = {"transactional_id": transactional_id, "transaction_timeout_ms": -1}
    if version >= 3:
        fields.update(producer_id=producer_id, producer_epoch=epoch)
    return InitProducerIdRequest[version](**fields)


async def test_init_producer_id_gives_ids_and_bumps_epochs(broker_parts: BrokerParts) -> None:
    first = await call(broker_parts.ctx, init_request(4))
    second = await call(broker_parts.ctx, init_request(0))
    assert (first.error_code, first.producer_epoch, second.error_code, second.producer_epoch) == (0, 0, 0, 0)
    assert first.producer_id >= 0
    assert second.producer_id not in (-1, first.producer_id)
    bumped = await call(broker_parts.ctx, init_request(4, first.producer_id, 0))
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (
        errors.NONE,
        first.producer_id,
        1,
    )
    # The epoch before the latest is a retry of the bump: answered with the latest, unchanged.
    retry = await call(broker_parts.ctx, init_request(4, first.producer_id, 0))
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (errors.NONE, first.producer_id, 1)
    again = await call(broker_parts.ctx, init_request(4, first.producer_id, 1))
    assert (again.error_code, again.producer_epoch) == (errors.NONE, 2)
    # Older epochs are fenced: v4 says so, v3 (before KIP-588) gets INVALID_PRODUCER_EPOCH.
    stale = await call(broker_parts.ctx, init_request(4, first.producer_id, 0))
    assert (stale.error_code, stale.producer_id, stale.producer_epoch) == (errors.PRODUCER_FENCED, -1, -1)
    stale = await call(broker_parts.ctx, init_request(3, first.producer_id, 0))
    assert stale.error_code == errors.INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (init_request(4, transactional_id=""), errors.INVALID_REQUEST),  # an empty transactional id
        (init_request(4, producer_id=12), errors.INVALID_REQUEST),  # an id without its epoch
        (init_request(4, producer_id=-5, epoch=0), errors.INVALID_REQUEST),
    ],
)
async def test_init_producer_id_refusals(broker_parts: BrokerParts, request_: Any, code: int) -> None:
    answer = await call(broker_parts.ctx, request_)
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (code, -1, -1)
