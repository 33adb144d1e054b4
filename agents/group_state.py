"""A consumer group's state and Kafka's classic group protocol as pure functions of (state, request, now).

Every agent coordinates every group, so the state cannot live in one agent's memory: it is a row of the
metadata store, and each group request is one short transaction that loads it, applies one function of
this module, and writes it back (``agents/group_coordinator.py``). Nothing here does I/O or reads a clock;
the caller passes ``now_ms``. The rules are Kafka's ``GroupCoordinator`` (classic protocol):

- **States.** Empty (no members) -> PreparingRebalance (members join; ends when every known member has
  rejoined, or at the rebalance deadline) -> CompletingRebalance (a new generation; the leader computes
  the assignment) -> Stable (the leader's SyncGroup stored it). A join of a new member, a member's changed
  protocols, the leader's rejoin, a leave or an expired member sends a Stable or CompletingRebalance group
  back to PreparingRebalance.
- **Members.** A join without a member id gets one, with MEMBER_ID_REQUIRED, and must rejoin with it
  (KIP-394); the id waits in ``pending`` until then, for one session timeout. A static member
  (``group.instance.id``, KIP-345) keeps its place across restarts: a join with a known instance id takes
  over the member, and a request naming the instance id with another member id is fenced
  (FENCED_INSTANCE_ID). Static members are not removed when a rebalance ends without them; only their
  session timeout removes them.
- **The initial rebalance delay.** A join that finds the group Empty waits ``initial_delay_ms``, extended
  by each new member up to the rebalance timeout (Kafka's ``group.initial.rebalance.delay.ms``), so a
  group starting many consumers at once does not rebalance once per consumer.
- **Protocol selection by vote.** Among the protocols every member supports, each member votes for its
  most preferred one, and the most votes win (ties: the first in the leader's order).
- **Expiry.** A member not heard from (join, sync or heartbeat) for its session timeout is removed, and
  a heartbeat answered with REBALANCE_IN_PROGRESS still counts; a dynamic member that has not rejoined by
  the rebalance deadline is removed when the rebalance completes.
- **Join answers are never withdrawn.** A completed rebalance's answers (``last_round``) stay readable
  after the group moved on, so a JoinGroup waiting on another agent, which sees the group up to 100 ms
  late, still gets its generation (Kafka answers every waiting join at completion).

Invariants: ``generation`` only grows; every member id in ``members`` is unique and so is every instance
id; ``leader`` is a member whenever the state is CompletingRebalance or Stable.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from agents.group_model import Group, GroupLimits, GroupPhase, Member, Round
from storage.errors import (
    FencedInstanceId,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidSessionTimeout,
    MemberIdRequired,
    RebalanceInProgress,
    UnknownMemberId,
)


@dataclass(frozen=True, slots=True)
class JoinRequest:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    # JoinGroup v4+ (KIP-394): a new member must first get its id and rejoin with it.
    require_known_member_id: bool


@dataclass(frozen=True, slots=True)
class JoinResult:
    """What a JoinGroup answers once its rebalance completed."""

    generation: int
    protocol_type: str | None
    protocol: str | None
    leader: str
    member_id: str
    # Only the leader gets the members: (member id, instance id, metadata for the chosen protocol).
    members: list[tuple[str, str | None, bytes]]


def join(group: Group, req: JoinRequest, limits: GroupLimits, now_ms: int) -> str:
    """Record ``req``'s join; returns the member id, whose join then waits for ``join_result``.

    Raises MemberIdRequired (with the new id) for a first join that must come back with it.
    """
    if not limits.min_session_timeout_ms <= req.session_timeout_ms <= limits.max_session_timeout_ms:
        raise InvalidSessionTimeout(
            f"session timeout {req.session_timeout_ms} ms is outside the broker's "
            f"[{limits.min_session_timeout_ms}, {limits.max_session_timeout_ms}]"
        )
    if not req.protocol_type or not req.protocols:
        raise InconsistentGroupProtocol("a JoinGroup needs a protocol type and at least one protocol")
    if group.members and req.protocol_type != group.protocol_type:
        raise InconsistentGroupProtocol(
            f"protocol type {req.protocol_type!r} differs from the group's {group.protocol_type!r}"
        )
    if group.members and not _supported_by_all(group, req.protocols, exclude=req.member_id):
        raise InconsistentGroupProtocol("none of the member's protocols is supported by every other member")
    expire(group, limits, now_ms)
    if req.member_id == "":
        return _join_new(group, req, limits, now_ms)
    if req.member_id in group.pending:
        del group.pending[req.member_id]
        _add_member(group, req, req.member_id, limits, now_ms)
        return req.member_id
    member = _known(group, req.member_id, req.instance_id)
    changed = member.protocols != req.protocols
    member.protocols = list(req.protocols)
    member.session_timeout_ms = req.session_timeout_ms
    member.rebalance_timeout_ms = req.rebalance_timeout_ms
    member.last_seen_ms = now_ms
    member.joining = True
    if group.phase is GroupPhase.PREPARING_REBALANCE:
        return member.member_id
    # Kafka answers an unchanged rejoin with the current generation: in CompletingRebalance always, in
    # Stable unless it is the leader's (the leader rejoining asks for a new assignment).
    if not changed and (group.phase is GroupPhase.COMPLETING_REBALANCE or member.member_id != group.leader):
        member.joining = False
        return member.member_id
    _prepare_rebalance(group, now_ms)
    return member.member_id


def _join_new(group: Group, req: JoinRequest, limits: GroupLimits, now_ms: int) -> str:
    new_id = f"{req.client_id}-{uuid.uuid4()}"
    if req.instance_id is not None:
        old = _by_instance(group, req.instance_id)
        if old is not None:
            # A static member's restart: it takes over the old member's place; the old id, named with
            # this instance id, is fenced from now on (_known).
            del group.members[old.member_id]
            if group.leader == old.member_id:
                group.leader = new_id
            if group.phase is GroupPhase.STABLE and old.protocols == req.protocols:
                # KIP-345: the same subscription, so no rebalance: the new member keeps the assignment.
                group.members[new_id] = _member(req, new_id, now_ms, old.assignment, joining=False)
            else:
                _add_member(group, req, new_id, limits, now_ms, assignment=old.assignment)
            return new_id
        _add_member(group, req, new_id, limits, now_ms)
        return new_id
    if req.require_known_member_id:
        group.pending[new_id] = now_ms + req.session_timeout_ms
        raise MemberIdRequired(new_id)
    _add_member(group, req, new_id, limits, now_ms)
    return new_id


def _add_member(
    group: Group, req: JoinRequest, member_id: str, limits: GroupLimits, now_ms: int, assignment: bytes = b""
) -> None:
    was_empty = group.phase is GroupPhase.EMPTY
    group.members[member_id] = _member(req, member_id, now_ms, assignment, joining=True)
    group.protocol_type = req.protocol_type
    if was_empty:
        _prepare_rebalance(group, now_ms)
        # Kafka's InitialDelayedJoin: wait for more members, at most the rebalance timeout in all.
        group.delay_until_ms = now_ms + min(limits.initial_delay_ms, req.rebalance_timeout_ms)
        group.rebalance_deadline_ms = max(group.rebalance_deadline_ms, group.delay_until_ms)
    elif group.phase is GroupPhase.PREPARING_REBALANCE:
        if group.delay_until_ms > now_ms:  # still in the initial delay: each new member extends it
            group.delay_until_ms = min(now_ms + limits.initial_delay_ms, group.rebalance_deadline_ms)
    else:
        _prepare_rebalance(group, now_ms)


def _member(req: JoinRequest, member_id: str, now_ms: int, assignment: bytes, *, joining: bool) -> Member:
    return Member(
        member_id,
        req.instance_id,
        req.client_id,
        req.client_host,
        req.session_timeout_ms,
        req.rebalance_timeout_ms,
        req.protocol_type,
        list(req.protocols),
        assignment,
        now_ms,
        joining=joining,
    )


def _by_instance(group: Group, instance_id: str) -> Member | None:
    return next((m for m in group.members.values() if m.instance_id == instance_id), None)


def _known(group: Group, member_id: str, instance_id: str | None) -> Member:
    """The member a request names. With an instance id, Kafka's rule (ClassicGroup.validateMember): the
    instance id decides, and a member id other than its owner's is a zombie of a replaced static member."""
    if instance_id is not None:
        owner = _by_instance(group, instance_id)
        if owner is None:
            raise UnknownMemberId(
                f"no member of group {group.group_id!r} has group.instance.id {instance_id!r}"
            )
        if owner.member_id != member_id:
            raise FencedInstanceId(f"group.instance.id {instance_id!r} now belongs to another member")
        return owner
    member = group.members.get(member_id)
    if member is None:
        raise UnknownMemberId(f"member {member_id!r} is not in group {group.group_id!r}")
    return member


def _prepare_rebalance(group: Group, now_ms: int) -> None:
    group.phase = GroupPhase.PREPARING_REBALANCE
    group.rebalance_deadline_ms = now_ms + max(
        (m.rebalance_timeout_ms for m in group.members.values()), default=0
    )
    group.delay_until_ms = 0


def _supported_by_all(group: Group, protocols: list[tuple[str, bytes]], exclude: str) -> bool:
    names = {name for name, _ in protocols}
    for member in group.members.values():
        if member.member_id != exclude:
            names &= {name for name, _ in member.protocols}
    return bool(names)


def try_complete_join(group: Group, now_ms: int) -> bool:
    """End PreparingRebalance once every member (and every id handed out) has joined, after the initial
    delay, or at the deadline. Returns whether the group changed."""
    if group.phase is not GroupPhase.PREPARING_REBALANCE:
        return False
    all_joined = all(m.joining for m in group.members.values()) and not group.pending
    if not (all_joined and now_ms >= group.delay_until_ms) and now_ms < group.rebalance_deadline_ms:
        return False
    # Dynamic members that did not rejoin leave; static ones stay until their session expires (KIP-345).
    for member in [m for m in group.members.values() if not m.joining and m.instance_id is None]:
        _remove(group, member.member_id)
    joined = [m for m in group.members.values() if m.joining]
    if group.members and not joined:
        # Only static members that have not rejoined: wait another rebalance timeout, as Kafka does.
        group.rebalance_deadline_ms = now_ms + max(m.rebalance_timeout_ms for m in group.members.values())
        return True
    group.generation += 1
    group.delay_until_ms = group.rebalance_deadline_ms = 0
    if not group.members:
        # The protocol type stays, as Kafka's: DescribeGroups and ListGroups still show an empty group's.
        group.phase, group.protocol, group.leader = GroupPhase.EMPTY, None, None
        return True
    group.protocol = _vote(group)
    if group.leader not in group.members or not group.members[group.leader].joining:
        group.leader = joined[0].member_id
    protocol = group.protocol
    group.last_round = Round(
        group.generation, group.protocol_type, protocol, group.leader, _roster(group, protocol)
    )
    for member in group.members.values():
        member.joining = False
        member.assignment = b""
        member.last_seen_ms = now_ms  # the session timer starts again with the join response
    group.phase = GroupPhase.COMPLETING_REBALANCE
    return True


def _roster(group: Group, protocol: str) -> list[tuple[str, str | None, bytes]]:
    """What the leader's JoinGroup answer lists: every member with its metadata for ``protocol``."""
    return [(m.member_id, m.instance_id, m.metadata_for(protocol)) for m in group.members.values()]


def _vote(group: Group) -> str:
    members = list(group.members.values())
    candidates = set.intersection(*({name for name, _ in m.protocols} for m in members))
    votes: dict[str, int] = {}
    for member in members:
        choice = next(name for name, _ in member.protocols if name in candidates)
        votes[choice] = votes.get(choice, 0) + 1
    leader = group.members.get(group.leader or "", members[0])
    order = [name for name, _ in leader.protocols if name in candidates]
    return max(order, key=lambda name: (votes.get(name, 0), -order.index(name)))


def join_result(group: Group, member_id: str, after_generation: int) -> JoinResult | None:
    """The answer to a JoinGroup recorded while the group was at ``after_generation``: the first
    completed rebalance after that which the member is part of; None while it still waits. Raises
    UnknownMemberId once the member is gone."""
    member = group.members.get(member_id)
    rnd = group.last_round
    if (
        rnd is not None
        and rnd.generation > after_generation
        and any(m == member_id for m, _, _ in rnd.members)
    ):
        members = rnd.members if member_id == rnd.leader else []
        return JoinResult(
            rnd.generation, rnd.protocol_type, rnd.protocol, rnd.leader, member_id, list(members)
        )
    if member is None:
        raise UnknownMemberId(f"member {member_id!r} is no longer in group {group.group_id!r}")
    if member.joining or group.phase is GroupPhase.PREPARING_REBALANCE:
        return None
    # Answered without a rebalance (an unchanged rejoin): the current generation.
    assert group.leader is not None  # CompletingRebalance or Stable
    assert group.protocol is not None
    protocol = group.protocol
    members = _roster(group, protocol) if member_id == group.leader else []
    return JoinResult(group.generation, group.protocol_type, group.protocol, group.leader, member_id, members)


def _check_member(group: Group, member_id: str, instance_id: str | None, generation: int) -> Member:
    member = _known(group, member_id, instance_id)
    if generation != group.generation:
        raise IllegalGeneration(
            f"generation {generation} is not group {group.group_id!r}'s current generation {group.generation}"
        )
    return member


@dataclass(frozen=True, slots=True)
class SyncResult:
    assignment: bytes
    protocol_type: str | None
    protocol: str | None


def sync(
    group: Group,
    member_id: str,
    instance_id: str | None,
    generation: int,
    assignments: dict[str, bytes],
    now_ms: int,
    protocol_type: str | None = None,
    protocol: str | None = None,
) -> None:
    """Record a SyncGroup; the leader's stores every member's assignment and makes the group Stable.

    Raises RebalanceInProgress after refreshing the member's session (the caller stores the group either
    way, as Kafka reschedules the heartbeat). SyncGroup v5's protocol type and name, when given, must be
    the group's (INCONSISTENT_GROUP_PROTOCOL), checked after the member and generation as Kafka does."""
    member = _check_member(group, member_id, instance_id, generation)
    member.last_seen_ms = now_ms
    if protocol_type is not None and group.protocol_type not in (None, protocol_type):
        raise InconsistentGroupProtocol(f"the group's protocol type is {group.protocol_type!r}")
    if protocol is not None and group.protocol not in (None, protocol):
        raise InconsistentGroupProtocol(f"the group's protocol is {group.protocol!r}")
    if group.phase is GroupPhase.PREPARING_REBALANCE:
        raise RebalanceInProgress(f"group {group.group_id!r} is rebalancing; rejoin")
    if group.phase is GroupPhase.COMPLETING_REBALANCE and member_id == group.leader:
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        group.phase = GroupPhase.STABLE


def sync_result(group: Group, member_id: str, generation: int) -> SyncResult | None:
    """The member's assignment once the leader synced; None while it waits."""
    member = _check_member(group, member_id, None, generation)
    if group.phase is GroupPhase.PREPARING_REBALANCE:
        raise RebalanceInProgress(f"group {group.group_id!r} is rebalancing; rejoin")
    if group.phase is GroupPhase.COMPLETING_REBALANCE:
        return None
    return SyncResult(member.assignment, group.protocol_type, group.protocol)


def heartbeat(group: Group, member_id: str, instance_id: str | None, generation: int, now_ms: int) -> None:
    """Refresh the member's session; REBALANCE_IN_PROGRESS (after the refresh: the caller stores the group
    either way) while the group rebalances, so that the member rejoins."""
    member = _check_member(group, member_id, instance_id, generation)
    member.last_seen_ms = now_ms
    if group.phase is GroupPhase.PREPARING_REBALANCE:
        raise RebalanceInProgress(f"group {group.group_id!r} is rebalancing; rejoin")


def leave(group: Group, member_id: str, instance_id: str | None, now_ms: int) -> None:
    """Remove a member, by member id, or by instance id for a static member leaving (LeaveGroup v3+); a
    member id handed out but not joined yet is simply forgotten."""
    if instance_id is None and member_id in group.pending:
        del group.pending[member_id]
        try_complete_join(group, now_ms)
        return
    if instance_id is not None:
        member = _by_instance(group, instance_id)
        if member is None:
            raise UnknownMemberId(
                f"no member of group {group.group_id!r} has group.instance.id {instance_id!r}"
            )
        if member_id and member.member_id != member_id:
            raise FencedInstanceId(f"group.instance.id {instance_id!r} belongs to another member")
        member_id = member.member_id
    if member_id not in group.members:
        raise UnknownMemberId(f"member {member_id!r} is not in group {group.group_id!r}")
    _remove(group, member_id)
    _after_removal(group, now_ms)


def _remove(group: Group, member_id: str) -> None:
    del group.members[member_id]
    if group.leader == member_id:
        group.leader = next(iter(group.members), None)


def _after_removal(group: Group, now_ms: int) -> None:
    if group.phase in (GroupPhase.STABLE, GroupPhase.COMPLETING_REBALANCE):
        _prepare_rebalance(group, now_ms)
    if group.phase is GroupPhase.PREPARING_REBALANCE:
        try_complete_join(group, now_ms)


def expire(group: Group, limits: GroupLimits, now_ms: int) -> bool:
    """Drop members past their session timeout, and pending ids past theirs; complete a due rebalance.
    Returns whether the group changed."""
    changed = False
    for key in [k for k, until in group.pending.items() if until <= now_ms]:
        del group.pending[key]
        changed = True
    # A member waiting in a join is answered by the rebalance deadline instead.
    dead = [
        m.member_id
        for m in group.members.values()
        if not m.joining and m.last_seen_ms + m.session_timeout_ms <= now_ms
    ]
    for member_id in dead:
        _remove(group, member_id)
    if dead:
        changed = True
        _after_removal(group, now_ms)
    return try_complete_join(group, now_ms) or changed


def check_commit(group: Group | None, member_id: str, instance_id: str | None, generation: int) -> None:
    """OffsetCommit's rule (Kafka's ClassicGroup.validateOffsetCommit): a commit with generation -1 and no
    member id (a consumer without a group, or an admin tool) is accepted unless the group has members; any
    other commit must come from a member of the current generation. While the group rebalances the
    members keep committing (they do, when their partitions are revoked), except in CompletingRebalance,
    between the join and the assignment."""
    if generation < 0 and member_id == "":
        if group is not None and group.members:
            raise UnknownMemberId(
                f"group {group.group_id!r} has active members; commit as one of them, with its generation"
            )
        return
    if group is None:
        raise IllegalGeneration(f"there is no generation {generation}: the group has no members")
    _check_member(group, member_id, instance_id, generation)
    if group.phase is GroupPhase.COMPLETING_REBALANCE:
        raise RebalanceInProgress(f"group {group.group_id!r} is rebalancing; rejoin")
