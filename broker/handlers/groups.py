"""The classic consumer group protocol: JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13).

Thin translations to ``agents/group_coordinator.py``, where the rules are (Kafka's GroupCoordinator, with
the state in the metadata store so that any agent coordinates any group). Version differences handled
here: JoinGroup v0 has no rebalance timeout (the session timeout stands in, as in Kafka), v4+ requires a
known member id (KIP-394), v5+ carries group.instance.id; SyncGroup v5 checks the protocol type and name;
LeaveGroup v3+ removes a batch of members, each answered on its own.
"""

from __future__ import annotations

from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

from agents import group_state as gs
from agents.permissions import GROUP, KAFKA, ApiKey
from broker import errors
from broker.context import BrokerContext
from storage.errors import MemberIdRequired, StrataError

_Member = JoinGroupResponse.JoinGroupResponseMember
_LeftMember = LeaveGroupResponse.MemberResponse


def _bytes(value: object) -> bytes:
    """Protocol metadata and assignments as the bytes the client sent (the library may hand back a view)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    encode = getattr(value, "encode", None)
    if callable(encode):  # a decoded structure: re-encode it to the bytes it came from
        return bytes(encode())
    raise TypeError(f"unexpected metadata type {type(value).__name__}")


def _client_id(req: JoinGroupRequest) -> str:
    header = req.header  # decoded with the request
    client_id = getattr(header, "client_id", None)
    return client_id if isinstance(client_id, str) and client_id else "consumer"


async def handle_join_group(ctx: BrokerContext, req: JoinGroupRequest) -> JoinGroupResponse:
    version = req.API_VERSION
    join = gs.JoinRequest(
        member_id=req.member_id,
        instance_id=req.group_instance_id if version >= 5 else None,
        client_id=_client_id(req),
        client_host=ctx.client_host,
        session_timeout_ms=req.session_timeout_ms,
        rebalance_timeout_ms=req.rebalance_timeout_ms if version >= 1 else req.session_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, _bytes(p.metadata)) for p in req.protocols],
        require_known_member_id=version >= 4,
    )
    try:
        ctx.require(KAFKA[ApiKey.JOIN_GROUP].need(GROUP), req.group_id)
        result = await ctx.agent.groups.join(req.group_id, join)
    except MemberIdRequired as exc:
        return _join_error(version, errors.MEMBER_ID_REQUIRED, exc.member_id)
    except StrataError as exc:
        return _join_error(version, errors.kafka_group_error(exc), req.member_id)
    return JoinGroupResponse[version](
        throttle_time_ms=0,
        error_code=errors.NONE,
        generation_id=result.generation,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol,
        leader=result.leader,
        skip_assignment=False,
        member_id=result.member_id,
        members=[
            _Member(member_id=member_id, group_instance_id=instance_id, metadata=metadata)
            for member_id, instance_id, metadata in result.members
        ],
    )


def _join_error(version: int, code: int, member_id: str) -> JoinGroupResponse:
    return JoinGroupResponse[version](
        throttle_time_ms=0,
        error_code=code,
        generation_id=-1,
        protocol_type=None,
        protocol_name="" if version < 7 else None,
        leader="",
        skip_assignment=False,
        member_id=member_id,
        members=[],
    )


async def handle_sync_group(ctx: BrokerContext, req: SyncGroupRequest) -> SyncGroupResponse:
    version = req.API_VERSION
    try:
        ctx.require(KAFKA[ApiKey.SYNC_GROUP].need(GROUP), req.group_id)
        result = await ctx.agent.groups.sync(
            req.group_id,
            req.member_id,
            req.group_instance_id if version >= 3 else None,
            req.generation_id,
            {a.member_id: _bytes(a.assignment) for a in req.assignments},
            req.protocol_type if version >= 5 else None,
            req.protocol_name if version >= 5 else None,
        )
    except StrataError as exc:
        return SyncGroupResponse[version](
            throttle_time_ms=0,
            error_code=errors.kafka_group_error(exc),
            protocol_type=None,
            protocol_name=None,
            assignment=b"",
        )
    # The protocol from the same snapshot as the assignment (SyncGroup v5, KIP-559).
    return SyncGroupResponse[version](
        throttle_time_ms=0,
        error_code=errors.NONE,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol,
        assignment=result.assignment,
    )


async def handle_heartbeat(ctx: BrokerContext, req: HeartbeatRequest) -> HeartbeatResponse:
    version = req.API_VERSION
    try:
        ctx.require(KAFKA[ApiKey.HEARTBEAT].need(GROUP), req.group_id)
        await ctx.agent.groups.heartbeat(
            req.group_id, req.member_id, req.group_instance_id if version >= 3 else None, req.generation_id
        )
        code = errors.NONE
    except StrataError as exc:
        code = errors.kafka_group_error(exc)
    return HeartbeatResponse[version](throttle_time_ms=0, error_code=code)


async def handle_leave_group(ctx: BrokerContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    version = req.API_VERSION
    if version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in req.members]
    else:
        members = [(req.member_id, None)]
    try:
        ctx.require(KAFKA[ApiKey.LEAVE_GROUP].need(GROUP), req.group_id)
        outcomes = await ctx.agent.groups.leave(req.group_id, members)
    except StrataError as exc:
        return LeaveGroupResponse[version](
            throttle_time_ms=0, error_code=errors.kafka_group_error(exc), members=[]
        )
    codes = [errors.NONE if e is None else errors.kafka_group_error(e) for e in outcomes]
    if version < 3:
        return LeaveGroupResponse[version](throttle_time_ms=0, error_code=codes[0], members=[])
    return LeaveGroupResponse[version](
        throttle_time_ms=0,
        error_code=errors.NONE,
        members=[
            _LeftMember(member_id=member_id, group_instance_id=instance_id, error_code=code)
            for (member_id, instance_id), code in zip(members, codes, strict=True)
        ],
    )
