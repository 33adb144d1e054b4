"""The consumer group coordinator: Kafka's classic group protocol over the metadata store, on any agent.

Each group request is one short write transaction on the group's row (``GroupStore.update_group``)
applying one function of ``agents/group_state.py``; the state is never kept in memory between requests,
so every agent coordinates every group, and an agent that dies loses nothing but its waiting requests
(their members rejoin elsewhere).

Waiting. A JoinGroup waits for its rebalance to complete and a follower's SyncGroup for the leader's
assignment. A waiting request re-reads the group (a read transaction) when a change made on this agent
wakes it, or every ``poll_s`` (0.1 s) for changes made on other agents. Time-driven changes (a rebalance
deadline, an expired session) are applied by whichever request or sweep sees them due: a waiter that finds
one applies it in a write transaction, and ``sweep`` does the same for every group that is not Empty, from
the agent's background loop.

Metadata store failures come out as ``Unavailable`` (the Kafka door answers COORDINATOR_NOT_AVAILABLE,
which clients retry); a request never hangs past its deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from agents import group_state as gs
from agents.consumer_protocol import subscribed_topics
from agents.group_doc import group_from_json, group_to_json
from agents.group_model import Group, GroupLimits, GroupPhase
from storage.clock import Clock
from storage.errors import (
    GroupIdNotFound,
    InvalidGroupId,
    MemberIdRequired,
    NonEmptyGroup,
    RebalanceInProgress,
    StrataError,
)
from storage.metadata.coordination import GroupStore
from storage.metadata.rows import GroupOffset, GroupRow, OffsetToCommit

R = TypeVar("R")

# A waiting JoinGroup or SyncGroup gives up this long after its member's rebalance timeout, answering
# REBALANCE_IN_PROGRESS (retriable) rather than holding the client past its own request timeout.
_WAIT_MARGIN_S = 5.0


@dataclass(frozen=True, slots=True)
class _Kept:
    """An error answer whose group changes are stored all the same (``GroupCoordinator._update``)."""

    error: MemberIdRequired | RebalanceInProgress


@dataclass(slots=True)
class _Turn:
    """One group's commits on this agent, one at a time in arrival order; ``users`` counts the commits
    holding or waiting for the lock, so the entry goes when the last one is done."""

    lock: asyncio.Lock
    users: int = 0


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    phase: str
    protocol_type: str | None


def _row(group: Group) -> GroupRow:
    return GroupRow(group.phase.value, group.protocol_type, group_to_json(group))


def group_of(group_id: str, row: GroupRow | None) -> Group:
    """The group a stored row holds (a group with no row is new and empty)."""
    return group_from_json(group_id, row.doc) if row is not None else Group(group_id)


def check_group_id(group_id: str) -> None:
    if not group_id:
        raise InvalidGroupId("the group id is empty")


class GroupCoordinator:
    def __init__(self, store: GroupStore, clock: Clock, limits: GroupLimits, poll_s: float = 0.1) -> None:
        self.store = store
        self.clock = clock
        self.limits = limits
        self.poll_s = poll_s
        self._changed: dict[str, asyncio.Event] = {}
        self._commit_order: dict[str, _Turn] = {}

    # --- plumbing -----------------------------------------------------------------------------------------
    async def _update(self, group_id: str, apply: Callable[[Group], R]) -> R:
        """One write transaction: load, expire what is due, ``apply``, store; wakes this agent's waiters."""
        now = self.clock.now_ms()

        def change(row: GroupRow | None) -> tuple[GroupRow | None, R | _Kept]:
            group = group_of(group_id, row)
            gs.expire(group, self.limits, now)
            try:
                result: R | _Kept = apply(group)
            except (MemberIdRequired, RebalanceInProgress) as exc:
                # Answers that still change the group, which is stored: the member id handed out must be
                # known when the member comes back with it, and a heartbeat answered with
                # REBALANCE_IN_PROGRESS still keeps its member alive (Kafka reschedules it too).
                result = _Kept(exc)
            if row is None and group.generation == 0 and not group.members and not group.pending:
                return None, result  # nothing to keep: no row for a group that never had a member
            return _row(group), result

        try:
            result = await asyncio.to_thread(self.store.update_group, group_id, change)
        finally:
            self._wake(group_id)
        if isinstance(result, _Kept):
            raise result.error
        return result

    async def _load(self, group_id: str) -> Group:
        return group_of(group_id, await asyncio.to_thread(self.store.load_group, group_id))

    def _wake(self, group_id: str) -> None:
        event = self._changed.pop(group_id, None)
        if event is not None:
            event.set()

    async def _changed_or_poll(self, group_id: str, limit_s: float) -> None:
        event = self._changed.setdefault(group_id, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), max(0.0, min(self.poll_s, limit_s)))
        except TimeoutError:
            pass

    async def _wait(self, group_id: str, limit_s: float, ready: Callable[[Group], R | None]) -> R:
        """Re-read the group until ``ready`` gives an answer; apply due expiries seen meanwhile."""
        deadline = self.clock.monotonic() + limit_s
        while True:
            group = await self._load(group_id)
            if gs.expire(group, self.limits, self.clock.now_ms()):  # something is due: apply it for real
                group = await self._update(group_id, lambda g: g)
            answer = ready(group)
            if answer is not None:
                return answer
            left = deadline - self.clock.monotonic()
            if left <= 0:
                raise RebalanceInProgress(
                    f"group {group_id!r} did not complete its rebalance in time; rejoin"
                )
            await self._changed_or_poll(group_id, left)

    # --- the group protocol -------------------------------------------------------------------------------
    async def join(self, group_id: str, req: gs.JoinRequest) -> gs.JoinResult:
        check_group_id(group_id)

        def apply(group: Group) -> tuple[str, int]:
            before = group.generation
            member_id = gs.join(group, req, self.limits, self.clock.now_ms())
            gs.try_complete_join(group, self.clock.now_ms())
            return member_id, before

        member_id, before = await self._update(group_id, apply)
        limit = req.rebalance_timeout_ms / 1000 + _WAIT_MARGIN_S
        return await self._wait(group_id, limit, lambda g: gs.join_result(g, member_id, before))

    async def sync(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        assignments: dict[str, bytes],
        protocol_type: str | None = None,
        protocol: str | None = None,
    ) -> gs.SyncResult:
        check_group_id(group_id)

        def apply(group: Group) -> int:
            now = self.clock.now_ms()
            gs.sync(group, member_id, instance_id, generation, assignments, now, protocol_type, protocol)
            return group.members[member_id].rebalance_timeout_ms

        rebalance_timeout_ms = await self._update(group_id, apply)
        limit = rebalance_timeout_ms / 1000 + _WAIT_MARGIN_S
        return await self._wait(group_id, limit, lambda g: gs.sync_result(g, member_id, generation))

    async def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> None:
        check_group_id(group_id)
        await self._update(
            group_id, lambda g: gs.heartbeat(g, member_id, instance_id, generation, self.clock.now_ms())
        )

    async def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> list[StrataError | None]:
        """Remove each (member id, instance id); the error of each that could not be, in order."""
        check_group_id(group_id)

        def apply(group: Group) -> list[StrataError | None]:
            out: list[StrataError | None] = []
            for member_id, instance_id in members:
                try:
                    gs.leave(group, member_id, instance_id, self.clock.now_ms())
                    out.append(None)
                except StrataError as exc:
                    out.append(exc)
            return out

        return await self._update(group_id, apply)

    # --- offsets ------------------------------------------------------------------------------------------
    async def commit(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        offsets: Sequence[OffsetToCommit],
    ) -> dict[tuple[str, int], StrataError]:
        """Commit, if the member may (``group_state.check_commit``); the partitions refused, by key. The
        empty group id is allowed here, as Kafka allows it for offsets (older clients commit with it)."""

        def check(row: GroupRow | None) -> None:
            group = None if row is None else group_of(group_id, row)
            gs.check_commit(group, member_id, instance_id, generation)

        return await self._in_commit_order(
            group_id, lambda: self.store.commit_offsets(group_id, check, offsets, self.clock.now_ms())
        )

    async def _in_commit_order(self, group_id: str, work: Callable[[], R]) -> R:
        """Run ``work`` in a thread after the group's earlier commits. In arrival order: a consumer
        pipelines its async commits, and run concurrently a later commit could land first and be
        overwritten by an earlier one (librdkafka's 0030_offset_commit: 50 pipelined commits left offset
        4 committed). The handlers reach here in arrival order, and an asyncio.Lock is FIFO."""
        entry = self._commit_order.setdefault(group_id, _Turn(asyncio.Lock()))
        entry.users += 1
        try:
            async with entry.lock:
                return await asyncio.to_thread(work)
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._commit_order[group_id]

    async def commit_from_outside(self, group_id: str, offsets: Sequence[tuple[str, int, int]]) -> None:
        """Set a group's offsets from outside the group (HTTP ``PUT /v1/groups/{g}/offsets``, a reset):
        all or nothing, and refused with NonEmptyGroup while the group has live members, whose own commits
        would race it, as ``kafka-consumer-groups --reset-offsets`` refuses an active group (and Kafka's
        coordinator refuses a commit without a member id, UNKNOWN_MEMBER_ID on the Kafka door)."""
        now = self.clock.now_ms()
        await self._in_commit_order(
            group_id,
            lambda: self.store.commit_group_offsets(
                group_id, offsets, now, lambda row: self._refuse_if_active(group_id, row, now)
            ),
        )

    async def require_inactive(self, group_id: str) -> None:
        """NonEmptyGroup if ``commit_from_outside`` would refuse the group now: a dry run's answer, which
        commits nothing (a real commit checks again in its transaction)."""
        row = await asyncio.to_thread(self.store.load_group, group_id)
        self._refuse_if_active(group_id, row, self.clock.now_ms())

    def _refuse_if_active(self, group_id: str, row: GroupRow | None, now_ms: int) -> None:
        if row is not None:
            group = group_of(group_id, row)
            gs.expire(group, self.limits, now_ms)
            if group.members:
                raise NonEmptyGroup(
                    f"group {group_id!r} has {len(group.members)} active member(s); stop its consumers "
                    "before setting its offsets"
                )

    async def offsets(self, group_id: str) -> list[GroupOffset]:
        return await asyncio.to_thread(self.store.group_offsets, group_id)

    # --- administration -----------------------------------------------------------------------------------
    async def describe(self, group_id: str) -> Group:
        check_group_id(group_id)
        return await self._load(group_id)

    async def list(self) -> list[GroupSummary]:
        rows = await asyncio.to_thread(self.store.list_groups)
        return [
            GroupSummary(
                gid, row.phase if row else GroupPhase.EMPTY.value, row.protocol_type if row else None
            )
            for gid, row in rows
        ]

    async def delete(self, group_id: str) -> None:
        """DeleteGroups: only a group without members (NON_EMPTY_GROUP), and only one that exists."""
        check_group_id(group_id)
        now = self.clock.now_ms()

        def check(row: GroupRow | None) -> None:
            if row is not None:
                group = group_of(group_id, row)
                gs.expire(group, self.limits, now)
                if group.members:
                    raise NonEmptyGroup(f"group {group_id!r} has {len(group.members)} active member(s)")

        if not await asyncio.to_thread(self.store.delete_group, group_id, check):
            raise GroupIdNotFound(f"no group {group_id!r}")

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """OffsetDelete: forget the group's offsets of ``partitions`` except those of topics its members
        subscribe to. Returns the partitions kept because of that (GROUP_SUBSCRIBED_TO_TOPIC), mapped to 0.
        GroupIdNotFound if the group has neither a state nor offsets; NonEmptyGroup for a group with
        members whose subscriptions cannot be read (not the "consumer" protocol)."""
        check_group_id(group_id)
        group = await self._load(group_id)
        if group.generation == 0 and not group.members and not await self.offsets(group_id):
            raise GroupIdNotFound(f"no group {group_id!r}")
        now = self.clock.now_ms()

        def blocked(g: Group) -> set[str]:
            gs.expire(g, self.limits, now)
            if g.members and g.protocol_type != "consumer":
                raise NonEmptyGroup(f"group {group_id!r} has active members")
            return subscribed_topics(g)

        subscribed = blocked(group)
        kept = {key: 0 for key in partitions if key[0] in subscribed}
        doomed = [key for key in partitions if key[0] not in subscribed]

        def check(row: GroupRow | None) -> None:
            if row is not None and blocked(group_of(group_id, row)) & {topic for topic, _ in doomed}:
                raise RebalanceInProgress(f"group {group_id!r} changed its subscriptions; retry")

        await asyncio.to_thread(self.store.delete_group_offsets, group_id, check, doomed)
        return kept

    async def sweep(self) -> int:
        """Apply due expiries and rebalance deadlines to every group that is not Empty; returns how many
        groups changed. Run from the agent's background loop, so a group whose members all died without a
        request reaching any agent still moves on."""
        changed = 0
        for group_id, row in await asyncio.to_thread(self.store.list_groups, True):
            # The listed row is the group as stored: a write only for the groups with something due.
            if gs.expire(group_of(group_id, row), self.limits, self.clock.now_ms()):
                await self._update(group_id, lambda g: g)
                changed += 1
        return changed
