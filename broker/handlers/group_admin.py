"""Group administration: ListGroups (16), DescribeGroups (15), DeleteGroups (42), as
``kafka-consumer-groups --list / --describe / --delete`` and the admin clients use them.

ListGroups shows every group with a coordinator state or committed offsets (an offsets-only group is
Empty, with no protocol type), filtered by state (v4+) and type (v5: only "classic" exists here).
DescribeGroups answers an unknown group as Kafka does: state Dead, no members, no error. DeleteGroups
deletes an Empty group and its committed offsets; one with members gets NON_EMPTY_GROUP, an unknown one
GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)

from agents.group_model import GroupPhase
from agents.permissions import GROUP, KAFKA, ApiKey
from broker import errors
from broker.context import BrokerContext
from storage.errors import StrataError

_Listed = ListGroupsResponse.ListedGroup
_Described = DescribeGroupsResponse.DescribedGroup
_DescribedMember = _Described.DescribedGroupMember
_Deleted = DeleteGroupsResponse.DeletableGroupResult
_LIST = KAFKA[ApiKey.LIST_GROUPS].need(GROUP)


async def handle_list_groups(ctx: BrokerContext, req: ListGroupsRequest) -> ListGroupsResponse:
    version = req.API_VERSION
    try:
        summaries = await ctx.agent.groups.list()
    except StrataError as exc:
        return ListGroupsResponse[version](
            throttle_time_ms=0, error_code=errors.kafka_group_error(exc), groups=[]
        )
    states = {s.lower() for s in req.states_filter} if version >= 4 else set()
    types = {t.lower() for t in req.types_filter} if version >= 5 else set()
    groups = [
        _Listed(
            group_id=s.group_id,
            protocol_type=s.protocol_type or "",
            group_state=s.phase,
            group_type="classic",
        )
        for s in summaries
        if ctx.may(_LIST, s.group_id)  # Kafka lists only the groups one may describe
        and (not states or s.phase.lower() in states)
        and (not types or "classic" in types)
    ]
    return ListGroupsResponse[version](throttle_time_ms=0, error_code=errors.NONE, groups=groups)


async def handle_describe_groups(ctx: BrokerContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    version = req.API_VERSION
    described = []
    for group_id in req.groups:
        try:
            ctx.require(KAFKA[ApiKey.DESCRIBE_GROUPS].need(GROUP), group_id)
            group = await ctx.agent.groups.describe(group_id)
        except StrataError as exc:
            described.append(_dead(group_id, errors.kafka_group_error(exc)))
            continue
        if group.phase is GroupPhase.EMPTY and not group.members and group.generation == 0:
            try:
                offsets_only = bool(await ctx.agent.groups.offsets(group_id))
            except StrataError as exc:
                described.append(_dead(group_id, errors.kafka_group_error(exc)))
                continue
            if not offsets_only:  # Kafka describes a group it does not know as Dead, without an error
                described.append(_dead(group_id, errors.NONE))
                continue
        # As Kafka: the protocol, the members' metadata and assignments only once the group is Stable.
        stable = group.phase is GroupPhase.STABLE
        members = [
            _DescribedMember(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata_for(group.protocol) if stable and group.protocol else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        described.append(
            _Described(
                error_code=errors.NONE,
                error_message=None,
                group_id=group_id,
                group_state=group.phase.value,
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol or "") if stable else "",
                members=members,
                authorized_operations=set(),  # no ACLs yet: nothing to report
            )
        )
    return DescribeGroupsResponse[version](throttle_time_ms=0, groups=described)


def _dead(group_id: str, code: int) -> DescribeGroupsResponse.DescribedGroup:
    return _Described(
        error_code=code,
        error_message=None,
        group_id=group_id,
        group_state="Dead",
        protocol_type="",
        protocol_data="",
        members=[],
        authorized_operations=set(),  # no ACLs yet: nothing to report
    )


async def handle_delete_groups(ctx: BrokerContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    results = []
    for group_id in req.groups_names:
        try:
            ctx.require(KAFKA[ApiKey.DELETE_GROUPS].need(GROUP), group_id)
            await ctx.agent.groups.delete(group_id)
            code = errors.NONE
        except StrataError as exc:
            code = errors.kafka_group_error(exc)
        results.append(_Deleted(group_id=group_id, error_code=code))
    return DeleteGroupsResponse[req.API_VERSION](throttle_time_ms=0, results=results)
