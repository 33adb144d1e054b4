"""Consumer groups over HTTP: list and describe them, read and set their offsets, and reset offsets as
``kafka-consumer-groups --reset-offsets`` does. The groups are the Kafka door's (agents/group_coordinator.py):
one coordinator row per group and the ``group_offsets`` table, shared by both front doors.

- A group exists while it has a coordinator row or committed offsets; an offsets-only group is Empty with
  no protocol (as Kafka's ListGroups shows it). One with neither is 404 (40405).
- States and member lists are shown as the coordinator would see them now: members past their session
  timeout are dropped first (``group_state.expire``, what the sweep stores within a second), so the view
  agrees with the reset's "has active members" check.
- Permissions (agents/permissions.py): listing and describing need DESCRIBE on the group; the partitions
  (and assigned topics) of topics the principal may not describe are left out. Setting or resetting
  offsets needs READ on the group and on the topic, as Kafka's OffsetCommit.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Request

from agents import group_state as gs
from agents.consumer_protocol import assignment_partitions
from agents.group_doc import group_from_json
from agents.group_model import Group
from agents.permissions import GROUP, TOPIC, route
from api import authz, models
from api import group_models as gm
from api.context import HttpContext
from api.routes.common import ERRORS, CtxDep, group_id, topic_name
from storage.errors import BadRequest, GroupIdNotFound, UnknownPartition, UnknownTopic
from storage.metadata.rows import GroupRow, PartitionState

router = APIRouter()
_G = "/v1/groups/{group}"
_LIST = route("GET", "/v1/groups").need(GROUP)
_DESCRIBE = route("GET", _G)
_COMMIT = route("PUT", _G + "/offsets")
_OFFSETS = route("GET", _G + "/offsets")
_RESET = route("POST", _G + "/offsets/reset")

# The longest prefix and cursor taken. Both fit in one request line at 12 URL bytes per character (4-byte
# UTF-8, percent-encoded) under uvicorn's 64 KiB, even one past the bound; a group id that long does not
# occur in practice (the HTTP API's own ids stop at 249 characters).
_MAX_ID = 1000


# --- list and describe ---------------------------------------------------------------------------------
@router.get("/v1/groups", response_model=gm.GroupListOut, responses=ERRORS)
async def list_groups(
    http: Request,
    ctx: CtxDep,
    prefix: Annotated[str, Query(max_length=_MAX_ID, description="only group ids starting with this")] = "",
    after: Annotated[
        str | None, Query(max_length=_MAX_ID, description="start after this group id (a page's next_after)")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> gm.GroupListOut:
    """The groups the principal may describe, by id, a page at a time (Kafka's ListGroups)."""
    _no_nul("prefix", prefix)
    _no_nul("after", after)
    found: list[tuple[str, GroupRow | None]] = []
    cursor = after
    # Pages of limit + 1 tell whether another page follows. Groups the principal may not read are dropped
    # after the store's page, so a sparse grant reads on until the page is full or the groups run out.
    while True:
        page = await asyncio.to_thread(ctx.metadata.list_groups_page, prefix, cursor, limit + 1)
        found += [(gid, row) for gid, row in page if authz.may(http, _LIST, gid)]
        if len(found) > limit or len(page) <= limit:
            break
        cursor = page[-1][0]
    shown = found[:limit]
    return gm.GroupListOut(
        groups=[_summary(ctx, gid, row) for gid, row in shown],
        next_after=shown[-1][0] if len(found) > limit else None,
    )


@router.get("/v1/groups/{group}", response_model=gm.GroupOut, responses=ERRORS)
async def describe_group(http: Request, ctx: CtxDep, group: str) -> gm.GroupOut:
    """The group's state, members with their assignments, and each partition's committed offset and lag
    (``kafka-consumer-groups --describe``): DESCRIBE on the group."""
    gid = group_id(group)
    authz.check(http, _DESCRIBE.need(GROUP), gid)
    row = await asyncio.to_thread(ctx.metadata.load_group, gid)
    offsets = await asyncio.to_thread(ctx.metadata.group_offsets, gid)
    if row is None and not offsets:
        raise GroupIdNotFound(f"no group {gid!r}")
    current = _current(ctx, gid, row)
    members = [
        gm.GroupMemberOut(
            member_id=m.member_id,
            group_instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            assignment=[
                a
                for a in _assignment(current.protocol_type, m.assignment)
                if authz.may(http, _DESCRIBE.need(TOPIC), a.topic)
            ],
        )
        for m in current.members.values()
    ]
    committed = {
        (o.topic, o.partition): o.offset for o in offsets if authz.may(http, _DESCRIBE.need(TOPIC), o.topic)
    }
    wanted = set(committed) | {(a.topic, p) for m in members for a in m.assignment for p in a.partitions}
    states = await _partition_states(ctx, {topic for topic, _ in wanted})
    partitions = []
    for key in sorted(wanted):
        state = states.get(key)
        if state is None:
            continue  # an assigned partition that does not exist (offsets go with their topic)
        offset = committed.get(key)
        partitions.append(
            gm.GroupPartitionOut(
                topic=key[0],
                partition=key[1],
                committed_offset=offset,
                log_start_offset=state.log_start_offset,
                high_watermark=state.high_watermark,
                lag=None if offset is None else max(0, state.high_watermark - offset),
            )
        )
    return gm.GroupOut(
        group=gid,
        state=_state(current),
        protocol_type=current.protocol_type,
        protocol=current.protocol,
        generation=current.generation,
        members=members,
        partitions=partitions,
        total_lag=sum(p.lag for p in partitions if p.lag is not None),
    )


def _no_nul(name: str, value: str | None) -> None:
    # No group id holds NUL (PostgreSQL text cannot), and PostgreSQL refuses it as a parameter.
    if value is not None and "\x00" in value:
        raise BadRequest(f"{name} must not contain NUL characters")


def _current(ctx: HttpContext, gid: str, row: GroupRow | None) -> Group:
    """The group as its coordinator sees it now (module doc); an offsets-only group is a new Empty one."""
    if row is None:
        return Group(gid)
    group = group_from_json(gid, row.doc)
    coordinator = ctx.agent.groups
    gs.expire(group, coordinator.limits, coordinator.clock.now_ms())
    return group


def _state(group: Group) -> gm.GroupState:
    # GroupPhase's values are Kafka's state names, which GroupState lists.
    state: gm.GroupState = group.phase.value
    return state


def _summary(ctx: HttpContext, gid: str, row: GroupRow | None) -> gm.GroupSummaryOut:
    group = _current(ctx, gid, row)
    return gm.GroupSummaryOut(
        group=gid,
        state=_state(group),
        protocol_type=group.protocol_type,
        protocol=group.protocol,
        members=len(group.members),
    )


def _assignment(protocol_type: str | None, data: bytes) -> list[gm.AssignedTopicOut]:
    """A member's assignment for protocol type "consumer" (other protocols' bytes have other formats, shown
    as no assignment); bytes that do not parse are the client's and give no assignment."""
    if protocol_type != "consumer" or not data:
        return []
    found = assignment_partitions(data)
    return [gm.AssignedTopicOut(topic=t, partitions=ps) for t, ps in sorted(found.items())]


async def _partition_states(ctx: HttpContext, topics: set[str]) -> dict[tuple[str, int], PartitionState]:
    states: dict[tuple[str, int], PartitionState] = {}
    for topic in sorted(topics):
        try:
            found = await asyncio.to_thread(ctx.metadata.partition_states, topic)
        except UnknownTopic:
            continue  # deleted since a member was assigned it
        states.update({(topic, s.partition): s for s in found})
    return states


# --- offsets -----------------------------------------------------------------------------------------------
@router.put("/v1/groups/{group}/offsets", response_model=models.GroupOffsetsOut, responses=ERRORS)
async def commit_offsets(
    http: Request, ctx: CtxDep, group: str, body: models.GroupOffsetsIn
) -> models.GroupOffsetsOut:
    """Set the group's offsets (Kafka's OffsetCommit without a member): read on the group and on every
    topic committed for; 409 (40909) while the group has active Kafka members."""
    gid = group_id(group)
    authz.check(http, _COMMIT.need(GROUP), gid)
    triples = [(topic_name(o.topic), o.partition, o.offset) for o in body.offsets]
    for topic in sorted({t for t, _, _ in triples}):
        authz.check(http, _COMMIT.need(TOPIC), topic)
    await ctx.agent.groups.commit_from_outside(gid, triples)
    return await _group_offsets(http, ctx, gid)


@router.get("/v1/groups/{group}/offsets", response_model=models.GroupOffsetsOut, responses=ERRORS)
async def read_offsets(http: Request, ctx: CtxDep, group: str) -> models.GroupOffsetsOut:
    """The group's offsets (Kafka's OffsetFetch): DESCRIBE on the group; topics the principal may not describe
    are left out."""
    gid = group_id(group)
    authz.check(http, _OFFSETS.need(GROUP), gid)
    return await _group_offsets(http, ctx, gid)


async def _group_offsets(http: Request, ctx: HttpContext, gid: str) -> models.GroupOffsetsOut:
    rows = await asyncio.to_thread(ctx.metadata.group_offsets, gid)
    return models.GroupOffsetsOut(
        group=gid,
        offsets=[
            models.GroupOffsetOut(topic=r.topic, partition=r.partition, offset=r.offset)
            for r in rows
            if authz.may(http, _OFFSETS.need(TOPIC), r.topic)
        ],
    )


@router.post("/v1/groups/{group}/offsets/reset", response_model=gm.OffsetResetOut, responses=ERRORS)
async def reset_offsets(http: Request, ctx: CtxDep, group: str, body: gm.OffsetResetIn) -> gm.OffsetResetOut:
    """Reset the group's offsets of one topic (``kafka-consumer-groups --reset-offsets``; ``dry_run`` is
    its default, ``--execute`` is ``dry_run: false``): READ on the group and on the topic, as the tool's
    OffsetCommit needs; 409 (40909)
    while the group has active members, even in a dry run, as the tool refuses an active group."""
    gid = group_id(group)
    authz.check(http, _RESET.need(GROUP), gid)
    topic = topic_name(body.topic)
    authz.check(http, _RESET.need(TOPIC), topic)
    # Refused before the by-timestamp lookups, which may read data files. A real reset is checked again
    # in its commit's transaction (commit_from_outside), so a member that joins meanwhile still wins.
    await ctx.agent.groups.require_inactive(gid)
    states = await asyncio.to_thread(ctx.metadata.partition_states, topic)
    if body.partitions is None:
        chosen = states
    else:
        by_id = {s.partition: s for s in states}
        unknown = sorted(set(body.partitions) - set(by_id))
        if unknown:
            raise UnknownPartition(
                f"topic {topic!r} has {len(states)} partition(s): no partition {unknown[0]}"
            )
        chosen = [by_id[p] for p in sorted(set(body.partitions))]
    targets = [(topic, s.partition, await _reset_target(ctx, body, s)) for s in chosen]
    if not body.dry_run:
        await ctx.agent.groups.commit_from_outside(gid, targets)
    return gm.OffsetResetOut(
        group=gid,
        dry_run=body.dry_run,
        offsets=[models.GroupOffsetOut(topic=t, partition=p, offset=o) for t, p, o in targets],
    )


async def _reset_target(ctx: HttpContext, body: gm.OffsetResetIn, state: PartitionState) -> int:
    """The offset a reset sets in ``state``'s partition: always within [log start, high watermark]."""
    if body.to == "earliest":
        return state.log_start_offset
    if body.to == "latest":
        return state.high_watermark
    if body.to == "offset":
        assert body.offset is not None  # OffsetResetIn requires it with this mode
        return min(max(body.offset, state.log_start_offset), state.high_watermark)
    assert body.timestamp is not None  # OffsetResetIn requires it with this mode
    # The Kafka door's ListOffsets by timestamp (agents/fetch.py); None: no record is that late.
    found = await ctx.agent.fetcher.offset_for_timestamp(state.topic, state.partition, body.timestamp)
    return state.high_watermark if found is None else found[0]
