"""The group coordinator over a real metadata store (SQLite and PostgreSQL): two coordinators on one store
stand for two agents, which share nothing but the store.

- a JoinGroup waiting on one agent completes when the last member joins on the other (within the
  ~100 ms poll), and both get the same generation;
- committed offsets carry Kafka's metadata string and leader epoch, and a commit from an old generation
  changes nothing;
- the store unavailable: the request fails at once with ``Unavailable`` (the Kafka door's
  COORDINATOR_NOT_AVAILABLE), not a hang.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, cast

import pytest

from agents import group_state as gs
from agents.group_coordinator import GroupCoordinator
from agents.group_model import GroupLimits, GroupPhase
from storage.clock import SystemClock
from storage.errors import (
    GroupIdNotFound,
    IllegalGeneration,
    MemberIdRequired,
    NonEmptyGroup,
    Unavailable,
    UnknownMemberId,
    UnknownTopic,
)
from storage.metadata import open_metadata_store, schema, sqlite_path
from storage.metadata.base import MetadataStore
from storage.metadata.coordination import GroupStore
from storage.metadata.postgres import PostgresBackend
from storage.metadata.rows import GroupRow, OffsetToCommit
from storage.metadata.sql import SqlMetadataStore, Tx
from storage.metadata.sqlite import SqliteBackend

pytestmark = pytest.mark.integration

LIMITS = GroupLimits(initial_delay_ms=0, min_session_timeout_ms=1000, max_session_timeout_ms=60_000)


def join_req(member_id: str = "", session: int = 10_000) -> gs.JoinRequest:
    return gs.JoinRequest(member_id, None, "c", "", session, 10_000, "consumer", [("range", b"meta")], True)


async def member_id(coordinator: GroupCoordinator, group: str) -> str:
    with pytest.raises(MemberIdRequired) as exc:
        await coordinator.join(group, join_req())
    return exc.value.member_id


async def test_a_join_on_one_agent_completes_when_the_other_agent_adds_the_last_member(
    metadata_store: MetadataStore,
) -> None:
    one = GroupCoordinator(metadata_store, SystemClock(), LIMITS)
    two = GroupCoordinator(metadata_store, SystemClock(), LIMITS)
    a = await member_id(one, "g")
    first = await one.join("g", join_req(a))  # alone: generation 1 at once (no initial delay here)
    assert first.generation == 1
    assert first.leader == a
    synced = await one.sync("g", a, None, 1, {a: b"all"})
    assert synced.assignment == b"all"

    b = await member_id(two, "g")  # a new member on the other agent: the group rebalances
    b_join = asyncio.create_task(two.join("g", join_req(b)))
    await asyncio.sleep(0.3)
    assert not b_join.done()  # waits for a, the only other member, to rejoin
    a_join = await asyncio.wait_for(one.join("g", join_req(a)), 5)
    b_result = await asyncio.wait_for(b_join, 5)
    assert a_join.generation == b_result.generation == 2
    assert a_join.leader == a
    assert [m[0] for m in a_join.members] == [a, b]

    # The leader's sync on one agent releases the follower's sync waiting on the other.
    b_sync = asyncio.create_task(two.sync("g", b, None, 2, {}))
    await asyncio.sleep(0.2)
    assert not b_sync.done()
    await one.sync("g", a, None, 2, {a: b"p0", b: b"p1"})
    assert (await asyncio.wait_for(b_sync, 5)).assignment == b"p1"


async def test_offsets_carry_metadata_and_an_old_generation_commits_nothing(
    metadata_store: MetadataStore,
) -> None:
    metadata_store.create_topic("t", 2, {}, 0)
    coordinator = GroupCoordinator(metadata_store, SystemClock(), LIMITS)
    a = await member_id(coordinator, "g")
    await coordinator.join("g", join_req(a))
    await coordinator.sync("g", a, None, 1, {})
    refused = await coordinator.commit(
        "g", a, None, 1, [OffsetToCommit("t", 0, 7, "note", 3), OffsetToCommit("nope", 0, 1)]
    )
    assert set(refused) == {("nope", 0)}
    assert isinstance(refused[("nope", 0)], UnknownTopic)
    [row] = await coordinator.offsets("g")
    assert (row.topic, row.partition, row.offset, row.metadata, row.leader_epoch) == ("t", 0, 7, "note", 3)
    with pytest.raises(IllegalGeneration):
        await coordinator.commit("g", a, None, 0, [OffsetToCommit("t", 0, 99)])
    assert [o.offset for o in await coordinator.offsets("g")] == [7]
    # The HTTP API's view of the same group.
    assert [o.offset for o in metadata_store.group_offsets("g")] == [7]

    with pytest.raises(NonEmptyGroup):
        await coordinator.delete("g")
    await coordinator.leave("g", [(a, None)])
    assert [s.phase for s in await coordinator.list()] == ["Empty"]
    await coordinator.delete("g")
    assert await coordinator.offsets("g") == []
    with pytest.raises(GroupIdNotFound):
        await coordinator.delete("g")


async def test_sweep_removes_members_whose_sessions_expired(metadata_store: MetadataStore) -> None:
    coordinator = GroupCoordinator(metadata_store, SystemClock(), LIMITS)
    a = await member_id(coordinator, "g")
    await coordinator.join("g", join_req(a, session=1000))
    await coordinator.sync("g", a, None, 1, {})
    assert await coordinator.sweep() == 0
    await asyncio.sleep(1.1)
    assert await coordinator.sweep() == 1
    group = await coordinator.describe("g")
    assert group.phase is GroupPhase.EMPTY
    assert not group.members


class FailingGroups:
    """A real store whose group methods fail as an unreachable database does, while ``down``."""

    def __init__(self, inner: GroupStore) -> None:
        self.inner = inner
        self.down = False

    def _call(self, name: str, *args: Any) -> Any:
        if self.down:
            raise Unavailable("metadata store unreachable (injected)")
        return getattr(self.inner, name)(*args)

    def update_group(self, group: str, change: Callable[[GroupRow | None], Any]) -> Any:
        return self._call("update_group", group, change)

    def load_group(self, group: str) -> GroupRow | None:
        return cast(GroupRow | None, self._call("load_group", group))

    def list_groups(self, active_only: bool = False) -> Any:
        return self._call("list_groups", active_only)

    def group_offsets(self, group: str) -> Any:
        return self._call("group_offsets", group)

    def commit_offsets(self, group: str, check: Any, offsets: Sequence[OffsetToCommit], now_ms: int) -> Any:
        return self._call("commit_offsets", group, check, offsets, now_ms)

    def delete_group(self, group: str, check: Any) -> bool:
        return bool(self._call("delete_group", group, check))

    def delete_group_offsets(self, group: str, check: Any, partitions: Any) -> None:
        self._call("delete_group_offsets", group, check, partitions)


async def test_store_unavailable_fails_fast_and_recovers(metadata_store: MetadataStore) -> None:
    store = FailingGroups(metadata_store)
    coordinator = GroupCoordinator(store, SystemClock(), LIMITS)
    a = await member_id(coordinator, "g")
    store.down = True
    with pytest.raises(Unavailable):
        await asyncio.wait_for(coordinator.join("g", join_req(a)), 5)
    with pytest.raises(Unavailable):
        await asyncio.wait_for(coordinator.heartbeat("g", a, None, 1), 5)
    store.down = False
    result = await asyncio.wait_for(coordinator.join("g", join_req(a)), 5)
    assert result.generation == 1


def test_migration_4_applies_to_a_version_3_database(metadata_url: str) -> None:
    """Offsets committed before consumer groups existed keep their values, with no metadata and epoch -1."""
    backend = (
        SqliteBackend(sqlite_path(metadata_url))
        if metadata_url.startswith("sqlite:")
        else PostgresBackend(metadata_url)
    )
    dialect = backend.dialect.name

    def version_3(tx: Tx) -> list[int]:
        applied = schema.migrate_to(tx, dialect, 0, 3)
        tx.execute("INSERT INTO topics (name, partitions, configs, created_ms) VALUES ('t', 1, '{}', 0)")
        tx.execute(
            "INSERT INTO group_offsets (group_id, topic, partition_id, committed_offset, committed_ms)"
            " VALUES ('g', 't', 0, 42, 1)"
        )
        return applied

    try:
        assert backend.run(version_3, write=True, what="test setup") == [1, 2, 3]
    finally:
        backend.close()
    store = open_metadata_store(metadata_url)
    try:
        assert isinstance(store, SqlMetadataStore)
        assert store.applied_migrations == tuple(range(4, schema.latest_version(dialect) + 1))
        [row] = store.group_offsets("g")
        assert (row.offset, row.metadata, row.leader_epoch) == (42, None, -1)
        assert store.list_groups() == [("g", None)]
    finally:
        store.close()


async def test_requests_for_unknown_groups_leave_no_group_behind(metadata_store: MetadataStore) -> None:
    coordinator = GroupCoordinator(metadata_store, SystemClock(), LIMITS)
    [outcome] = await coordinator.leave("ghost", [("m", None)])
    assert isinstance(outcome, UnknownMemberId)
    with pytest.raises(UnknownMemberId):
        await coordinator.heartbeat("ghost", "m", None, 1)
    assert await coordinator.list() == []
    # A simple commit (no members, generation -1) holds the group's row but leaves no state row behind.
    metadata_store.create_topic("t", 1, {}, 0)
    assert await coordinator.commit("simple", "", None, -1, [OffsetToCommit("t", 0, 3)]) == {}
    assert isinstance(metadata_store, SqlMetadataStore)
    rows = metadata_store._backend.run(
        lambda tx: tx.one("SELECT COUNT(*) FROM consumer_groups"), write=False, what="test"
    )
    assert rows is not None
    assert rows[0] == 0
    assert [(gid, row) for gid, row in metadata_store.list_groups()] == [("simple", None)]
    assert metadata_store.list_groups(active_only=True) == []
