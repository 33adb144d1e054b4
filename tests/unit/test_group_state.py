"""Kafka's classic group protocol as pure functions (agents/group_state.py): every rule without I/O."""

from __future__ import annotations

import pytest

from agents import group_state as gs
from agents.group_doc import group_from_json, group_to_json
from agents.group_model import Group, GroupLimits, GroupPhase
from storage.errors import (
    FencedInstanceId,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidSessionTimeout,
    MemberIdRequired,
    RebalanceInProgress,
    UnknownMemberId,
)

LIMITS = GroupLimits(initial_delay_ms=100, min_session_timeout_ms=1000, max_session_timeout_ms=60_000)


def req(
    member_id: str = "",
    protocols: list[tuple[str, bytes]] | None = None,
    instance: str | None = None,
    session: int = 10_000,
    rebalance: int = 30_000,
    require_known: bool = True,
    ptype: str = "consumer",
) -> gs.JoinRequest:
    return gs.JoinRequest(
        member_id,
        instance,
        "client",
        "",
        session,
        rebalance,
        ptype,
        protocols or [("range", b"m")],
        require_known,
    )


def new_member(group: Group, now: int, **kw: object) -> str:
    """A v4+ first join: MEMBER_ID_REQUIRED, then the rejoin with the id."""
    with pytest.raises(MemberIdRequired) as exc:
        gs.join(group, req(**kw), LIMITS, now)  # type: ignore[arg-type]
    member_id = exc.value.member_id
    assert gs.join(group, req(member_id, **kw), LIMITS, now) == member_id  # type: ignore[arg-type]
    return member_id


def stable_group(*members: int) -> tuple[Group, list[str]]:
    group = Group("g")
    ids = [new_member(group, 0) for _ in members]
    assert gs.try_complete_join(group, 100)  # after the initial delay, everyone joined
    assert group.leader is not None
    gs.sync(group, group.leader, None, group.generation, {m: m.encode() for m in ids}, 100)
    assert group.phase is GroupPhase.STABLE
    return group, ids


def test_first_join_needs_a_member_id_and_the_initial_delay_holds_the_rebalance() -> None:
    group = Group("g")
    a = new_member(group, 0)
    assert group.phase is GroupPhase.PREPARING_REBALANCE
    assert not gs.try_complete_join(group, 50)  # everyone joined, but the initial delay runs until 100
    assert gs.join_result(group, a, 0) is None
    b = new_member(group, 60)  # a second member extends the delay
    assert not gs.try_complete_join(group, 120)
    assert gs.try_complete_join(group, 160)
    assert group.phase is GroupPhase.COMPLETING_REBALANCE
    assert group.generation == 1
    result_a, result_b = gs.join_result(group, a, 0), gs.join_result(group, b, 0)
    assert result_a is not None
    assert result_b is not None
    assert result_a.leader == a == result_b.leader
    assert [m[0] for m in result_a.members] == [a, b]  # only the leader gets the members
    assert result_b.members == []


def test_a_join_without_a_member_id_before_v4_joins_at_once() -> None:
    group = Group("g")
    member_id = gs.join(group, req(require_known=False), LIMITS, 0)
    assert member_id in group.members


def test_pending_member_ids_expire_after_the_session_timeout() -> None:
    group = Group("g")
    with pytest.raises(MemberIdRequired) as exc:
        gs.join(group, req(), LIMITS, 0)
    gs.expire(group, LIMITS, 10_001)
    with pytest.raises(UnknownMemberId):
        gs.join(group, req(exc.value.member_id), LIMITS, 10_001)


def test_protocol_is_chosen_by_vote_among_those_every_member_supports() -> None:
    group = Group("g")
    new_member(group, 0, protocols=[("range", b""), ("roundrobin", b""), ("sticky", b"")])
    new_member(group, 0, protocols=[("roundrobin", b""), ("range", b"")])
    new_member(group, 0, protocols=[("roundrobin", b""), ("sticky", b""), ("range", b"")])
    assert gs.try_complete_join(group, 100)
    assert group.protocol == "roundrobin"  # 2 votes against 1; sticky is not supported by everyone


def test_inconsistent_protocols_and_bad_session_timeouts_are_refused() -> None:
    group, _ = stable_group(1)
    with pytest.raises(InconsistentGroupProtocol):
        gs.join(group, req(protocols=[("other", b"")]), LIMITS, 200)
    with pytest.raises(InconsistentGroupProtocol):
        gs.join(group, req(ptype="connect"), LIMITS, 200)
    with pytest.raises(InvalidSessionTimeout):
        gs.join(group, req(session=10), LIMITS, 200)


def test_generation_and_rebalance_errors() -> None:
    group, (a, b) = stable_group(1, 2)
    gs.heartbeat(group, b, None, group.generation, 200)
    with pytest.raises(IllegalGeneration):
        gs.heartbeat(group, b, None, group.generation - 1, 200)
    with pytest.raises(UnknownMemberId):
        gs.heartbeat(group, "nobody", None, group.generation, 200)
    c = new_member(group, 300)  # a new member: the group rebalances
    assert group.phase is GroupPhase.PREPARING_REBALANCE
    with pytest.raises(RebalanceInProgress):
        gs.heartbeat(group, a, None, group.generation, 300)
    gs.check_commit(group, a, None, group.generation)  # members commit while preparing (on revoke)
    # a and b rejoin; then all three are in the next generation
    gs.join(group, req(a), LIMITS, 310)
    gs.join(group, req(b), LIMITS, 320)
    assert gs.try_complete_join(group, 320)
    assert set(group.members) == {a, b, c}
    assert group.generation == 2


def test_members_that_do_not_rejoin_by_the_deadline_are_removed() -> None:
    group, (a, b) = stable_group(1, 2)
    gs.join(group, req(a, protocols=[("range", b"changed")]), LIMITS, 1000)  # changed metadata: rebalance
    assert not gs.try_complete_join(group, 1000 + 29_999)
    assert gs.try_complete_join(group, 1000 + 30_000)  # b's rebalance timeout passed
    assert set(group.members) == {a}
    with pytest.raises(UnknownMemberId):
        gs.join_result(group, b, 1)


def test_a_follower_rejoining_a_stable_group_unchanged_gets_the_current_generation() -> None:
    group, (a, b) = stable_group(1, 2)
    follower = b if group.leader == a else a
    gs.join(group, req(follower), LIMITS, 200)
    assert group.phase is GroupPhase.STABLE
    result = gs.join_result(group, follower, group.generation)
    assert result is not None
    assert result.generation == group.generation


def test_sync_waits_for_the_leader_and_delivers_each_assignment() -> None:
    group = Group("g")
    a, b = new_member(group, 0), new_member(group, 0)
    assert gs.try_complete_join(group, 100)
    follower = b if group.leader == a else a
    gs.sync(group, follower, None, 1, {}, 100)
    assert gs.sync_result(group, follower, 1) is None  # the leader has not synced
    assert group.leader is not None
    gs.sync(group, group.leader, None, 1, {follower: b"yours"}, 110)
    assert gs.sync_result(group, follower, 1) == gs.SyncResult(b"yours", "consumer", "range")
    assert gs.sync_result(group, group.leader, 1) == gs.SyncResult(b"", "consumer", "range")  # left out


def test_expired_sessions_leave_and_the_last_one_empties_the_group() -> None:
    group, (a, _b) = stable_group(1, 2)
    gs.heartbeat(group, a, None, 1, 5_000)
    assert gs.expire(group, LIMITS, 10_100)  # b last seen at 100, session 10 s
    assert set(group.members) == {a}
    assert group.phase is GroupPhase.PREPARING_REBALANCE
    gs.leave(group, a, None, 10_200)
    assert group.phase is GroupPhase.EMPTY
    assert group.generation == 2  # every rebalance end, even to Empty, is a new generation
    assert (group.protocol_type, group.protocol) == ("consumer", None)  # Kafka keeps an empty group's type
    gs.check_commit(group, "", None, -1)  # an empty group takes simple commits


def test_simple_commits_are_refused_while_the_group_has_members() -> None:
    group, (a,) = stable_group(1)
    with pytest.raises(UnknownMemberId):
        gs.check_commit(group, "", None, -1)
    gs.check_commit(group, a, None, group.generation)
    with pytest.raises(IllegalGeneration):
        gs.check_commit(group, a, None, group.generation + 1)


def test_a_static_member_restart_takes_over_and_fences_the_old_id() -> None:
    group = Group("g")
    old = gs.join(group, req(instance="host-1"), LIMITS, 0)  # static members join without MEMBER_ID_REQUIRED
    assert gs.try_complete_join(group, 100)
    gs.sync(group, old, "host-1", 1, {old: b"p0"}, 100)
    new = gs.join(group, req(instance="host-1"), LIMITS, 200)
    assert new != old
    assert group.phase is GroupPhase.STABLE  # same subscription: no rebalance, the assignment stays
    assert gs.sync_result(group, new, 1) == gs.SyncResult(b"p0", "consumer", "range")
    with pytest.raises(FencedInstanceId):
        gs.heartbeat(group, old, "host-1", 1, 300)


def test_the_state_survives_its_json_form() -> None:
    group, _ = stable_group(1, 2)
    again = group_from_json("g", group_to_json(group))
    assert again == group


def test_a_completed_join_answer_is_not_taken_back_by_the_next_rebalance() -> None:
    """A waiter on another agent reads the group up to 100 ms late: the group may already be rebalancing
    again, and the answer for the generation it joined must still be there."""
    group = Group("g")
    a, b = new_member(group, 0), new_member(group, 0)
    assert gs.try_complete_join(group, 100)
    new_member(group, 150)  # a third member starts the next rebalance before b's waiter looks
    assert group.phase is GroupPhase.PREPARING_REBALANCE
    result = gs.join_result(group, b, 0)
    assert result is not None
    assert (result.generation, result.leader) == (1, a)


def test_a_heartbeat_while_preparing_still_counts() -> None:
    group, (a, b) = stable_group(1, 2)
    gs.join(group, req(a, protocols=[("range", b"new")]), LIMITS, 1_000)  # a rebalance, deadline 31 s
    with pytest.raises(RebalanceInProgress):
        gs.heartbeat(group, b, None, 1, 9_000)
    assert group.members[b].last_seen_ms == 9_000
    gs.expire(group, LIMITS, 12_000)  # b's session (10 s) counts from its heartbeat, not from 100
    assert b in group.members


def test_static_members_stay_when_a_rebalance_ends_without_them() -> None:
    group = Group("g")
    s1 = gs.join(group, req(instance="s1"), LIMITS, 0)
    s2 = gs.join(group, req(instance="s2"), LIMITS, 0)
    assert gs.try_complete_join(group, 100)
    gs.join(group, req(s1, instance="s1", protocols=[("range", b"new")]), LIMITS, 200)
    assert gs.try_complete_join(group, 200 + 30_000)  # s2 did not rejoin by the deadline
    assert set(group.members) == {s1, s2}  # but it is static: it stays until its session expires
    assert group.leader == s1  # the leader is a member that joined


def test_a_zombie_static_member_is_fenced_whatever_the_time() -> None:
    group = Group("g")
    old = gs.join(group, req(instance="host-1"), LIMITS, 0)
    assert gs.try_complete_join(group, 100)
    gs.sync(group, old, "host-1", 1, {old: b"p0"}, 100)
    new = gs.join(group, req(instance="host-1"), LIMITS, 200)  # the restarted instance takes over
    gs.heartbeat(group, new, "host-1", 1, 10_000)  # and stays alive
    for later in (300, 15_000):  # long after the old member's own session would have ended
        with pytest.raises(FencedInstanceId):
            gs.heartbeat(group, old, "host-1", 1, later)
        with pytest.raises(FencedInstanceId):
            gs.join(group, req(old, instance="host-1"), LIMITS, later)
    with pytest.raises(UnknownMemberId):
        gs.heartbeat(group, old, "host-9", 1, 300)  # an instance id nobody has


def test_an_unchanged_rejoin_while_completing_is_answered_without_a_new_rebalance() -> None:
    group = Group("g")
    a, b = new_member(group, 0), new_member(group, 0)
    assert gs.try_complete_join(group, 100)
    gs.join(group, req(b), LIMITS, 110)  # b lost its JoinGroup answer and asks again
    assert group.phase is GroupPhase.COMPLETING_REBALANCE
    assert group.generation == 1
    result = gs.join_result(group, b, 1)
    assert result is not None
    assert result.generation == 1
    assert a in group.members


def test_a_pending_member_id_can_leave_and_holds_the_rebalance_until_then() -> None:
    group = Group("g")
    a = new_member(group, 0)
    with pytest.raises(MemberIdRequired) as exc:
        gs.join(group, req(), LIMITS, 10)
    assert not gs.try_complete_join(group, 200)  # an id was handed out: wait for it (Kafka does)
    gs.leave(group, exc.value.member_id, None, 210)
    assert group.phase is GroupPhase.COMPLETING_REBALANCE
    assert set(group.members) == {a}


def test_sync_v5_checks_the_member_before_the_protocol() -> None:
    group, (a, _) = stable_group(1, 2)
    with pytest.raises(IllegalGeneration):
        gs.sync(group, a, None, 0, {}, 200, "consumer", "another")
    with pytest.raises(InconsistentGroupProtocol):
        gs.sync(group, a, None, 1, {}, 200, "consumer", "another")
