"""The Kafka handlers called directly (no socket), on a context of real parts (tests/fixtures/broker.py):
DescribeGroups, ListGroups and DeleteGroups on groups with members or only offsets, and what a principal
without the grant is refused, API by API.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.admin.configs import AlterConfigsRequest
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.admin.topics import CreateTopicsRequest, DeleteTopicsRequest
from kafka.protocol.consumer.group import JoinGroupRequest, OffsetFetchRequest, SyncGroupRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest

from broker import errors
from broker.context import BrokerContext
from tests.fixtures.broker import BrokerParts, call, commit_codes, commit_request, fetched, grant


async def join_and_sync(ctx: BrokerContext, group: str) -> str:
    """One member joins ``group`` (JoinGroup v3: no member id round trip) and, as its leader, assigns
    itself b"x": the group is Stable. Its member id."""
    joined = await call(
        ctx,
        JoinGroupRequest[3](
            group_id=group,
            session_timeout_ms=6000,
            rebalance_timeout_ms=6000,
            member_id="",
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"meta")],
        ),
    )
    assert (joined.error_code, joined.generation_id, joined.leader) == (errors.NONE, 1, joined.member_id)
    synced = await call(
        ctx,
        SyncGroupRequest[3](
            group_id=group,
            generation_id=1,
            member_id=joined.member_id,
            group_instance_id=None,
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"x")
            ],
        ),
    )
    assert (synced.error_code, bytes(synced.assignment)) == (errors.NONE, b"x")
    member_id: str = joined.member_id
    return member_id


async def describe(ctx: BrokerContext, *groups: str) -> dict[str, Any]:
    answer = await call(
        ctx, DescribeGroupsRequest[5](groups=list(groups), include_authorized_operations=False)
    )
    return {g.group_id: g for g in answer.groups}


async def test_describe_groups_with_members_with_offsets_only_and_unknown(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("t", 1, {}, 0)
    member = await join_and_sync(replace(broker_parts.ctx, client_host="/10.1.2.3"), "active")
    committed = await call(broker_parts.ctx, commit_request("offsets-only", [("t", 0, 5, None)]))
    assert commit_codes(committed) == {("t", 0): errors.NONE}
    groups = await describe(broker_parts.ctx, "active", "offsets-only", "unknown")
    active = groups["active"]
    assert (active.error_code, active.group_state, active.protocol_type, active.protocol_data) == (
        errors.NONE,
        "Stable",
        "consumer",
        "range",
    )
    assert [
        (m.member_id, m.client_id, m.client_host, bytes(m.member_metadata), bytes(m.member_assignment))
        for m in active.members
    ] == [(member, "handler-test", "/10.1.2.3", b"meta", b"x")]
    only = groups["offsets-only"]
    assert (only.error_code, only.group_state, only.protocol_type, only.members) == (
        errors.NONE,
        "Empty",
        "",
        [],
    )
    unknown = groups["unknown"]
    assert (unknown.error_code, unknown.group_state, unknown.members) == (errors.NONE, "Dead", [])


async def test_list_groups_and_its_state_filter(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("t", 1, {}, 0)
    await join_and_sync(broker_parts.ctx, "active")
    await call(broker_parts.ctx, commit_request("offsets-only", [("t", 0, 5, None)]))
    every = await call(broker_parts.ctx, ListGroupsRequest[0]())
    assert every.error_code == errors.NONE
    assert sorted((g.group_id, g.protocol_type) for g in every.groups) == [
        ("active", "consumer"),
        ("offsets-only", ""),
    ]
    stable = await call(broker_parts.ctx, ListGroupsRequest[4](states_filter=["Stable"]))
    assert [(g.group_id, g.group_state) for g in stable.groups] == [("active", "Stable")]
    empty = await call(broker_parts.ctx, ListGroupsRequest[4](states_filter=["empty"]))  # any case
    assert [(g.group_id, g.group_state) for g in empty.groups] == [("offsets-only", "Empty")]


async def test_delete_groups(broker_parts: BrokerParts) -> None:
    broker_parts.metadata.create_topic("t", 1, {}, 0)
    await join_and_sync(broker_parts.ctx, "active")
    await call(broker_parts.ctx, commit_request("offsets-only", [("t", 0, 5, None)]))
    answer = await call(
        broker_parts.ctx, DeleteGroupsRequest[2](groups_names=["offsets-only", "active", "unknown"])
    )
    assert {r.group_id: r.error_code for r in answer.results} == {
        "offsets-only": errors.NONE,
        "active": errors.NON_EMPTY_GROUP,
        "unknown": errors.GROUP_ID_NOT_FOUND,
    }
    gone = await call(
        broker_parts.ctx, OffsetFetchRequest[7](group_id="offsets-only", topics=None, require_stable=False)
    )
    assert fetched(gone) == {}
    assert (await describe(broker_parts.ctx, "active"))["active"].group_state == "Stable"


# --- authorization --------------------------------------------------------------------------------------
# bob may read orders.* and use the billing-* groups, nothing else.
BOB = grant("bob", topics={"read": ["orders."]}, groups={"read": ["billing-"]})


async def test_a_principal_without_the_grant_is_refused_topic_administration(
    broker_parts: BrokerParts,
) -> None:
    for name in ("orders.x", "secret"):
        broker_parts.metadata.create_topic(name, 1, {}, 0)
    await call(broker_parts.ctx, commit_request("billing-a", [("orders.x", 0, 1, None)]))
    await call(broker_parts.ctx, commit_request("other", [("orders.x", 0, 1, None)]))
    bob = broker_parts.as_principal(BOB)

    listed = await call(bob, MetadataRequest[12](topics=None, allow_auto_topic_creation=False))
    assert [t.name for t in listed.topics] == ["orders.x"]  # only what bob may describe
    named = await call(bob, MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name="secret")]))
    assert named.topics[0].error_code == errors.TOPIC_AUTHORIZATION_FAILED

    topic = CreateTopicsRequest.CreatableTopic
    created = await call(
        bob,
        CreateTopicsRequest[5](
            topics=[
                topic(name="orders.new", num_partitions=1, replication_factor=1, assignments=[], configs=[])
            ],
            timeout_ms=1000,
            validate_only=False,
        ),
    )
    assert created.topics[0].error_code == errors.TOPIC_AUTHORIZATION_FAILED
    deleted = await call(bob, DeleteTopicsRequest[4](topic_names=["orders.x"], timeout_ms=1000))
    assert deleted.responses[0].error_code == errors.TOPIC_AUTHORIZATION_FAILED
    resource = AlterConfigsRequest.AlterConfigsResource
    altered = await call(
        bob,
        AlterConfigsRequest[2](
            resources=[
                resource(
                    resource_type=2,
                    resource_name="orders.x",
                    configs=[resource.AlterableConfig(name="retention.ms", value="1")],
                )
            ],
            validate_only=False,
        ),
    )
    assert altered.responses[0].error_code == errors.TOPIC_AUTHORIZATION_FAILED
    t = DeleteRecordsRequest.DeleteRecordsTopic
    trimmed = await call(
        bob,
        DeleteRecordsRequest[2](
            topics=[t(name="orders.x", partitions=[t.DeleteRecordsPartition(partition_index=0, offset=-1)])],
            timeout_ms=1000,
        ),
    )
    assert trimmed.topics[0].partitions[0].error_code == errors.TOPIC_AUTHORIZATION_FAILED
    # Nothing refused changed anything.
    assert sorted(broker_parts.metadata.list_topics()) == ["orders.x", "secret"]
    assert dict(broker_parts.metadata.get_topic("orders.x").configs) == {}


async def test_a_principal_without_the_grant_is_refused_groups_and_producer_ids(
    broker_parts: BrokerParts,
) -> None:
    for name in ("orders.x", "secret"):
        broker_parts.metadata.create_topic(name, 1, {}, 0)
    await call(broker_parts.ctx, commit_request("billing-a", [("orders.x", 0, 1, None)]))
    await call(broker_parts.ctx, commit_request("other", [("orders.x", 0, 1, None)]))
    bob = broker_parts.as_principal(BOB)

    coordinator = await call(bob, FindCoordinatorRequest[3](key="other", key_type=0))
    assert (coordinator.error_code, coordinator.node_id) == (errors.GROUP_AUTHORIZATION_FAILED, -1)
    assert (await call(bob, FindCoordinatorRequest[3](key="billing-a", key_type=0))).error_code == errors.NONE
    commit = await call(bob, commit_request("other", [("orders.x", 0, 9, None)]))
    assert commit_codes(commit) == {("orders.x", 0): errors.GROUP_AUTHORIZATION_FAILED}
    commit = await call(bob, commit_request("billing-a", [("secret", 0, 9, None), ("orders.x", 0, 9, None)]))
    assert commit_codes(commit) == {
        ("secret", 0): errors.TOPIC_AUTHORIZATION_FAILED,
        ("orders.x", 0): errors.NONE,
    }
    offsets = await call(bob, OffsetFetchRequest[7](group_id="other", topics=None, require_stable=False))
    assert offsets.error_code == errors.GROUP_AUTHORIZATION_FAILED
    listed = await call(bob, ListGroupsRequest[4](states_filter=[]))
    assert [g.group_id for g in listed.groups] == ["billing-a"]
    assert (await describe(bob, "other"))["other"].error_code == errors.GROUP_AUTHORIZATION_FAILED
    deleted = await call(bob, DeleteGroupsRequest[2](groups_names=["billing-a"]))  # needs admin on it
    assert deleted.results[0].error_code == errors.GROUP_AUTHORIZATION_FAILED
    producer = await call(
        bob,
        InitProducerIdRequest[4](
            transactional_id=None, transaction_timeout_ms=-1, producer_id=-1, producer_epoch=-1
        ),
    )
    assert (producer.error_code, producer.producer_id) == (errors.CLUSTER_AUTHORIZATION_FAILED, -1)
    # Nothing refused changed a committed offset.
    every = await call(
        broker_parts.ctx, OffsetFetchRequest[7](group_id="other", topics=None, require_stable=False)
    )
    assert fetched(every) == {("orders.x", 0): (1, "")}
    every = await call(
        broker_parts.ctx, OffsetFetchRequest[7](group_id="billing-a", topics=None, require_stable=False)
    )
    assert fetched(every) == {("orders.x", 0): (9, "")}


async def test_a_connection_that_has_not_authenticated_is_refused_everything(
    broker_parts: BrokerParts,
) -> None:
    broker_parts.metadata.create_topic("orders.x", 1, {}, 0)
    # principals configured, no principal yet: what a handler would see before SASL (the connection never
    # lets such a request through; the handlers refuse it anyway).
    nobody = replace(broker_parts.as_principal(BOB), principal=None)
    listed = await call(nobody, MetadataRequest[12](topics=None, allow_auto_topic_creation=False))
    assert listed.topics == []
    coordinator = await call(nobody, FindCoordinatorRequest[3](key="billing-a", key_type=0))
    assert coordinator.error_code == errors.GROUP_AUTHORIZATION_FAILED
