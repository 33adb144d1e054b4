"""The permission table (agents/permissions.py), walked over the Kafka door: every API the listener
advertises has an entry and a request here; for each of its needs, a principal holding every permission but
that one is denied with the resource's *_AUTHORIZATION_FAILED code (or, for a need that filters, does not
see the item), and the same request with every permission is not denied.

A real agent over TCP: the probe principal authenticates with SASL/PLAIN; its ACLs are replaced through the
metadata store and loaded before each request.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse
from kafka.protocol.admin.acl import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.consumer.fetch import FetchResponse
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from agents.permissions import AUTO_CREATE, KAFKA, ApiKey, Need
from broker import apis, errors
from storage.acl_model import ResourceType
from tests.fixtures.kafka import RunningBroker
from tests.fixtures.permissions import PROBE, PROBE_PASSWORD, PROBE_TOML, everything_but, only_just, set_acls
from tests.kafka.permission_txn_cases import txn_case
from tests.kafka.test_protocol import batch, produce
from tests.kafka.test_sasl import _commit, _fetch, _lo_topic
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration

DENIED = {
    ResourceType.TOPIC: errors.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: errors.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: errors.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
# A code that stands for "the item was left out" where a need filters.
FILTERED = -1000


@dataclass
class Case:
    """One request for one need: ``code`` reads the answer's code for that need (FILTERED when left out)."""

    request: Any
    response: Any
    code: Callable[[Any], int]
    # Set when the same request with every permission still answers the denial code for a reason of its
    # own: then only the denial is checked.
    denied_anyway: bool = False


class Names:
    """Fresh names, so that a request allowed once (a delete, a creation) leaves the next case as it was."""

    def __init__(self, broker: RunningBroker) -> None:
        self.broker = broker
        self._n = itertools.count()

    def topic(self) -> str:
        name = f"walk-{next(self._n)}"
        self.broker.runtime.metadata.create_topic(name, 1, {}, 0)
        return name

    def group(self, topic: str) -> str:
        name = f"walk-g-{next(self._n)}"
        self.broker.runtime.metadata.commit_group_offsets(name, [(topic, 0, 1)], 0)
        return name

    def unused(self) -> str:
        return f"walk-new-{next(self._n)}"


def _first_partition_code(answer: Any) -> int:
    return int(answer.topics[0].partitions[0].error_code)


def case(key: int, need: Need, names: Names) -> Case:
    """The request for ``need`` of API ``key``."""
    r = need.resource
    topic = names.topic()
    group = names.group(topic)
    txn = txn_case(key, r, topic, group, batch([b"v"]), FILTERED, names.broker.runtime.metadata)
    if txn is not None:
        return Case(*txn)
    if key == ApiKey.PRODUCE:
        return Case(
            produce(topic, {0: batch([b"v"])}, acks=1),
            ProduceResponse,
            lambda a: a.responses[0].partition_responses[0].error_code,
        )
    if key == ApiKey.FETCH:
        return Case(_fetch([topic]), FetchResponse, lambda a: a.responses[0].partitions[0].error_code)
    if key == ApiKey.LIST_OFFSETS:
        req = ListOffsetsRequest[7](replica_id=-1, isolation_level=0, topics=[_lo_topic(topic)])
        return Case(req, ListOffsetsResponse, _first_partition_code)
    if key == ApiKey.METADATA:
        name = names.unused() if need.key == AUTO_CREATE else topic
        req = MetadataRequest[12](
            topics=[MetadataRequest[12].MetadataRequestTopic(name=name, topic_id=None)],
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
        return Case(req, MetadataResponse, lambda a: a.topics[0].error_code)
    if key == ApiKey.OFFSET_COMMIT:
        return Case(_commit(group, [(topic, 2)]), OffsetCommitResponse, _first_partition_code)
    if key == ApiKey.OFFSET_FETCH:
        req = OffsetFetchRequest[7](group_id=group, topics=None, require_stable=False)
        if r is ResourceType.GROUP:
            return Case(req, OffsetFetchResponse, lambda a: a.error_code)
        return Case(
            req, OffsetFetchResponse, lambda a: 0 if any(t.name == topic for t in a.topics) else FILTERED
        )
    if key == ApiKey.FIND_COORDINATOR:
        if r is ResourceType.GROUP:
            return Case(
                FindCoordinatorRequest[3](key=group, key_type=0),
                FindCoordinatorResponse,
                lambda a: a.error_code,
            )
        return Case(
            FindCoordinatorRequest[3](key="tx", key_type=1), FindCoordinatorResponse, lambda a: a.error_code
        )
    if key == ApiKey.JOIN_GROUP:
        protocol = JoinGroupRequest[5].JoinGroupRequestProtocol(name="range", metadata=b"")
        req = JoinGroupRequest[5](
            group_id=group,
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[protocol],
        )
        return Case(req, JoinGroupResponse, lambda a: a.error_code)
    if key == ApiKey.HEARTBEAT:
        req = HeartbeatRequest[4](group_id=group, generation_id=1, member_id="m", group_instance_id=None)
        return Case(req, HeartbeatResponse, lambda a: a.error_code)
    if key == ApiKey.LEAVE_GROUP:
        member = LeaveGroupRequest[4].MemberIdentity(member_id="m", group_instance_id=None)
        return Case(
            LeaveGroupRequest[4](group_id=group, members=[member]), LeaveGroupResponse, lambda a: a.error_code
        )
    if key == ApiKey.SYNC_GROUP:
        req = SyncGroupRequest[5](
            group_id=group,
            generation_id=1,
            member_id="m",
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[],
        )
        return Case(req, SyncGroupResponse, lambda a: a.error_code)
    if key == ApiKey.DESCRIBE_GROUPS:
        req = DescribeGroupsRequest[5](groups=[group], include_authorized_operations=False)
        return Case(req, DescribeGroupsResponse, lambda a: a.groups[0].error_code)
    if key == ApiKey.LIST_GROUPS:
        return Case(
            ListGroupsRequest[4](states_filter=[]),
            ListGroupsResponse,
            lambda a: 0 if any(g.group_id == group for g in a.groups) else FILTERED,
        )
    if key == ApiKey.CREATE_TOPICS:
        t = CreateTopicsRequest[5].CreatableTopic(
            name=names.unused(), num_partitions=1, replication_factor=-1, assignments=[], configs=[]
        )
        req = CreateTopicsRequest[5](topics=[t], timeout_ms=5000, validate_only=False)
        return Case(req, CreateTopicsResponse, lambda a: a.topics[0].error_code)
    if key == ApiKey.DELETE_TOPICS:
        return Case(
            DeleteTopicsRequest[4](topic_names=[topic], timeout_ms=5000),
            DeleteTopicsResponse,
            lambda a: a.responses[0].error_code,
        )
    if key == ApiKey.DELETE_RECORDS:
        t = DeleteRecordsRequest[2].DeleteRecordsTopic
        req = DeleteRecordsRequest[2](
            topics=[t(name=topic, partitions=[t.DeleteRecordsPartition(partition_index=0, offset=0)])],
            timeout_ms=5000,
        )
        return Case(req, DeleteRecordsResponse, lambda a: a.topics[0].partitions[0].error_code)
    if key == ApiKey.INIT_PRODUCER_ID:
        req = InitProducerIdRequest[4](
            transactional_id="tx" if r is ResourceType.TRANSACTIONAL_ID else None,
            transaction_timeout_ms=60_000,
            producer_id=-1,
            producer_epoch=-1,
        )
        return Case(req, InitProducerIdResponse, lambda a: a.error_code)
    if key == ApiKey.DESCRIBE_ACLS:
        req = DescribeAclsRequest[1](
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
        return Case(req, DescribeAclsResponse, lambda a: a.error_code)
    if key == ApiKey.CREATE_ACLS:
        c = CreateAclsRequest[1].AclCreation(
            resource_type=2,
            resource_name="zzz",
            resource_pattern_type=3,
            principal="User:nobody",
            host="*",
            operation=3,
            permission_type=3,
        )
        return Case(
            CreateAclsRequest[1](creations=[c]), CreateAclsResponse, lambda a: a.results[0].error_code
        )
    if key == ApiKey.DELETE_ACLS:
        f = DeleteAclsRequest[1].DeleteAclsFilter(
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter="User:nobody",
            host_filter=None,
            operation=1,
            permission_type=1,
        )
        return Case(
            DeleteAclsRequest[1](filters=[f]), DeleteAclsResponse, lambda a: a.filter_results[0].error_code
        )
    if key == ApiKey.DESCRIBE_CONFIGS:
        resource = DescribeConfigsRequest[4].DescribeConfigsResource(
            resource_type=2 if r is ResourceType.TOPIC else 4,
            resource_name=topic if r is ResourceType.TOPIC else "0",
            configuration_keys=None,
        )
        req = DescribeConfigsRequest[4](
            resources=[resource], include_synonyms=False, include_documentation=False
        )
        return Case(req, DescribeConfigsResponse, lambda a: a.results[0].error_code)
    if key in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        return _alter_configs(key, r, topic)
    if key == ApiKey.CREATE_PARTITIONS:
        t = CreatePartitionsRequest[1].CreatePartitionsTopic(name=topic, count=2, assignments=None)
        req = CreatePartitionsRequest[1](topics=[t], timeout_ms=5000, validate_only=True)
        return Case(req, CreatePartitionsResponse, lambda a: a.results[0].error_code)
    if key == ApiKey.DELETE_GROUPS:
        return Case(
            DeleteGroupsRequest[2](groups_names=[group]),
            DeleteGroupsResponse,
            lambda a: a.results[0].error_code,
        )
    if key == ApiKey.OFFSET_DELETE:
        t = OffsetDeleteRequest[0].OffsetDeleteRequestTopic
        req = OffsetDeleteRequest[0](
            group_id=group,
            topics=[t(name=topic, partitions=[t.OffsetDeleteRequestPartition(partition_index=0)])],
        )
        if r is ResourceType.GROUP:
            return Case(req, OffsetDeleteResponse, lambda a: a.error_code)
        return Case(req, OffsetDeleteResponse, lambda a: a.topics[0].partitions[0].error_code)
    if key == ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS:
        return Case(
            DescribeUserScramCredentialsRequest[0](users=None),
            DescribeUserScramCredentialsResponse,
            lambda a: a.error_code,
        )
    if key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
        d = AlterUserScramCredentialsRequest[0].ScramCredentialDeletion(name="nobody", mechanism=1)
        req = AlterUserScramCredentialsRequest[0](deletions=[d], upsertions=[])
        return Case(req, AlterUserScramCredentialsResponse, lambda a: a.results[0].error_code)
    if key == ApiKey.DESCRIBE_CLUSTER:
        req = DescribeClusterRequest[1](include_cluster_authorized_operations=False, endpoint_type=1)
        return Case(req, DescribeClusterResponse, lambda a: a.error_code)
    raise AssertionError(f"no request for API {key}: add one with its entry in agents/permissions.py")


def _alter_configs(key: int, r: ResourceType, topic: str) -> Case:
    resource_type, name = (2, topic) if r is ResourceType.TOPIC else (4, "0")
    if key == ApiKey.ALTER_CONFIGS:
        a = AlterConfigsRequest[1].AlterConfigsResource
        resource = a(
            resource_type=resource_type,
            resource_name=name,
            configs=[a.AlterableConfig(name="retention.ms", value="1000")],
        )
        return Case(
            AlterConfigsRequest[1](resources=[resource], validate_only=True),
            AlterConfigsResponse,
            lambda x: x.responses[0].error_code,
        )
    i = IncrementalAlterConfigsRequest[1].AlterConfigsResource
    config = i.AlterableConfig(name="retention.ms", config_operation=0, value="1000")
    resource = i(resource_type=resource_type, resource_name=name, configs=[config])
    req = IncrementalAlterConfigsRequest[1](resources=[resource], validate_only=True)
    return Case(req, IncrementalAlterConfigsResponse, lambda x: x.responses[0].error_code)


@pytest.fixture
def walked(kafka_factory: Callable[..., Any], tmp_path: Path) -> Iterator[RunningBroker]:
    path = tmp_path / "probe.toml"
    path.write_text(PROBE_TOML)
    with kafka_factory(principals_file=str(path)) as running:
        yield running


def _ask(broker: RunningBroker, c: Case) -> int:
    with Wire(broker.port) as wire:
        handshake = wire.call(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse)
        assert handshake.error_code == errors.NONE
        token = f"\0{PROBE}\0{PROBE_PASSWORD}".encode()
        assert (
            wire.call(SaslAuthenticateRequest[2](auth_bytes=token), SaslAuthenticateResponse, 2).error_code
            == 0
        )
        return c.code(wire.call(c.request, c.response, correlation_id=3))


def test_every_advertised_api_has_an_entry() -> None:
    assert set(apis.TABLE) == set(KAFKA), "an API advertised without a permission entry, or the reverse"
    assert set(KAFKA) == {int(k) for k in ApiKey}


def test_each_need_is_enforced(walked: RunningBroker) -> None:
    names = Names(walked)
    checked = 0
    for key, rule in sorted(KAFKA.items()):
        if not rule.needs:
            assert rule.open, key
            continue
        for need in rule.needs:
            denied_code = FILTERED if need.filters else DENIED[need.resource]
            set_acls(walked.runtime, everything_but(need))
            got = _ask(walked, case(key, need, names))
            assert got == denied_code, (ApiKey(key).name, need.describe(), got)
            set_acls(walked.runtime, only_just(need))
            got = _ask(walked, case(key, need, names))
            if not case(key, need, names).denied_anyway:
                assert got != denied_code, (ApiKey(key).name, need.describe(), "denied with only the need")
            checked += 1
    assert checked == sum(len(r.needs) for r in KAFKA.values())


def test_open_apis_are_served_to_a_principal_without_acls(walked: RunningBroker) -> None:
    set_acls(walked.runtime, [])
    with Wire(walked.port) as wire:
        from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse

        assert (
            wire.call(
                ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
                ApiVersionsResponse,
            ).error_code
            == 0
        )
        assert KAFKA[ApiKey.API_VERSIONS].open
        assert KAFKA[ApiKey.SASL_HANDSHAKE].open
