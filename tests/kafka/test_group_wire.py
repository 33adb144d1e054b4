"""The group APIs at the frame level: exact error codes for the cases clients rely on, and the metadata
store down answered with COORDINATOR_NOT_AVAILABLE at once (the store is a real one behind a switch)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

from broker import errors
from storage.errors import Unavailable
from storage.metadata import open_metadata_store
from storage.metadata.base import MetadataStore
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration

GROUP_METHODS = {"update_group", "load_group", "list_groups", "commit_offsets", "group_offsets"}


class Switchable:
    """A real metadata store whose group methods raise Unavailable while ``down`` (an unreachable database
    does the same through the backend)."""

    def __init__(self, inner: MetadataStore) -> None:
        self._inner = inner
        self.down = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in GROUP_METHODS:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise Unavailable("metadata store unreachable (injected)")
            return attr(*args, **kwargs)

        return call


def join(wire: Wire, member_id: str = "", version: int = 5) -> Any:
    request = JoinGroupRequest[version](
        group_id="w",
        session_timeout_ms=6000,
        rebalance_timeout_ms=6000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x00")
        ],
    )
    return wire.call(request, JoinGroupResponse)


def commit_request(group: str, generation: int, member_id: str, offset: int) -> Any:
    """OffsetCommit v7 of one offset of partition 0 of topic "t"."""
    topic = OffsetCommitRequest.OffsetCommitRequestTopic
    part = topic.OffsetCommitRequestPartition
    return OffsetCommitRequest[7](
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=None,
        topics=[
            topic(
                name="t",
                partitions=[
                    part(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )


def test_join_sync_heartbeat_commit_codes(kafka_factory: Callable[..., Any]) -> None:
    with kafka_factory(group_initial_rebalance_delay_ms=0) as broker, Wire(broker.port) as wire:
        first = join(wire)
        assert first.error_code == errors.MEMBER_ID_REQUIRED
        assert first.member_id
        joined = join(wire, first.member_id)
        assert (joined.error_code, joined.generation_id, joined.leader) == (errors.NONE, 1, first.member_id)
        assert [m.member_id for m in joined.members] == [first.member_id]
        unknown = join(wire, "nobody")
        assert unknown.error_code == errors.UNKNOWN_MEMBER_ID

        sync = SyncGroupRequest[3](
            group_id="w",
            generation_id=1,
            member_id=first.member_id,
            group_instance_id=None,
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=first.member_id, assignment=b"x")
            ],
        )
        synced = wire.call(sync, SyncGroupResponse)
        assert (synced.error_code, bytes(synced.assignment)) == (errors.NONE, b"x")

        beat = wire.call(
            HeartbeatRequest[3](
                group_id="w", generation_id=0, member_id=first.member_id, group_instance_id=None
            ),
            HeartbeatResponse,
        )
        assert beat.error_code == errors.ILLEGAL_GENERATION

        commit = commit_request("w", generation=0, member_id=first.member_id, offset=5)  # an old generation
        stale = wire.call(commit, OffsetCommitResponse, correlation_id=2)
        assert stale.topics[0].partitions[0].error_code == errors.ILLEGAL_GENERATION


def test_store_down_is_coordinator_not_available_then_recovers(
    tmp_path: Path, kafka_factory: Callable[..., Any]
) -> None:
    store = Switchable(open_metadata_store(f"sqlite:///{tmp_path / 'm.db'}"))
    broker_cm = kafka_factory(metadata=cast(MetadataStore, store), group_initial_rebalance_delay_ms=0)
    with broker_cm as broker, Wire(broker.port) as wire:
        store.down = True
        assert join(wire).error_code == errors.COORDINATOR_NOT_AVAILABLE
        fetch = OffsetFetchRequest[5](group_id="w", topics=None, require_stable=False)
        answer = wire.call(fetch, OffsetFetchResponse, correlation_id=2)
        assert answer.error_code == errors.COORDINATOR_NOT_AVAILABLE
        store.down = False
        first = join(wire)
        assert first.error_code == errors.MEMBER_ID_REQUIRED
        assert join(wire, first.member_id).error_code == errors.NONE


def test_pipelined_commits_land_in_order(kafka_factory: Callable[..., Any]) -> None:
    """50 OffsetCommits sent at once on one connection (a consumer's async commits): the last one wins."""
    with kafka_factory() as broker, Wire(broker.port) as wire:
        broker.runtime.metadata.create_topic("t", 1, {}, 0)
        frames = [
            wire.frame(
                commit_request("pipelined", generation=-1, member_id="", offset=offset), correlation_id=offset
            )
            for offset in range(1, 51)
        ]
        wire.send(*frames)
        for offset in range(1, 51):
            answer = wire.decode(wire.recv_frame(), OffsetCommitResponse, 7, offset)
            assert answer.topics[0].partitions[0].error_code == errors.NONE
        assert [o.offset for o in broker.runtime.metadata.group_offsets("pipelined")] == [50]
