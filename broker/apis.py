"""The one table from API key to the versions Strata serves and the handler that serves them.

ApiVersions is derived from this table, so what is advertised is exactly what is handled. The ranges are
the overlap every client Strata is tested with (tests/kafka) negotiates down to; the maxima stop before
topic ids in Produce/Fetch. Produce's first phase (admission) runs before the connection reads the next
request, to keep a connection's writes in order; SASL runs there too, since it decides what the next
request may do. Rows are in API key order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.admin.acl import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from kafka.protocol.admin.cluster import DescribeClusterRequest
from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.admin.topics import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.admin.users import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.consumer.offsets import ListOffsetsRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from broker import errors
from broker.budget import Held
from broker.context import BrokerContext
from broker.handlers.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from broker.handlers.configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from broker.handlers.coordinator import handle_find_coordinator
from broker.handlers.delete_records import handle_delete_records
from broker.handlers.fetch import handle_fetch
from broker.handlers.group_admin import handle_delete_groups, handle_describe_groups, handle_list_groups
from broker.handlers.group_offsets import handle_offset_commit, handle_offset_delete, handle_offset_fetch
from broker.handlers.groups import handle_heartbeat, handle_join_group, handle_leave_group, handle_sync_group
from broker.handlers.metadata import handle_describe_cluster, handle_metadata
from broker.handlers.offsets import handle_list_offsets
from broker.handlers.producer_id import handle_init_producer_id
from broker.handlers.scram import handle_alter_user_scram_credentials, handle_describe_user_scram_credentials
from broker.handlers.topics import handle_create_partitions, handle_create_topics, handle_delete_topics
from broker.handlers.transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_end_txn,
    handle_txn_offset_commit,
)
from broker.handlers.txn_admin import (
    handle_describe_producers,
    handle_describe_transactions,
    handle_list_transactions,
)

# A handler answers with a response, None (no answer), or a response held against a budget until written.
Handler = Callable[[BrokerContext, Any], Awaitable[ApiMessage | Held | None]]


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    min_version: int
    max_version: int
    request: type[ApiMessage]
    # None where the connection itself serves the API, in order with the requests around it: Produce
    # (admitted before the next request is read, broker/handlers/produce.py) and SASL (broker/sasl.py),
    # whose outcome decides what the next request may do.
    handler: Handler | None


async def handle_api_versions(ctx: BrokerContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    return api_versions_response(req.API_VERSION, errors.NONE)


def api_versions_response(version: int, error_code: int) -> ApiVersionsResponse:
    """Every API in TABLE, and no tagged fields (librdkafka 2.0.2 misreads more than one)."""
    keys = [
        ApiVersionsResponse.ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version)
        for a in TABLE.values()
    ]
    return ApiVersionsResponse[version](error_code=error_code, api_keys=keys, throttle_time_ms=0)


TABLE: dict[int, Api] = {
    api.key: api
    for api in (
        Api(0, 3, 9, ProduceRequest, None),
        Api(1, 4, 12, FetchRequest, handle_fetch),
        Api(2, 1, 7, ListOffsetsRequest, handle_list_offsets),
        Api(3, 0, 12, MetadataRequest, handle_metadata),
        Api(8, 2, 8, OffsetCommitRequest, handle_offset_commit),
        Api(9, 1, 7, OffsetFetchRequest, handle_offset_fetch),
        Api(10, 0, 4, FindCoordinatorRequest, handle_find_coordinator),
        Api(11, 0, 7, JoinGroupRequest, handle_join_group),
        Api(12, 0, 4, HeartbeatRequest, handle_heartbeat),
        Api(13, 0, 4, LeaveGroupRequest, handle_leave_group),
        Api(14, 0, 5, SyncGroupRequest, handle_sync_group),
        Api(15, 0, 5, DescribeGroupsRequest, handle_describe_groups),
        Api(16, 0, 5, ListGroupsRequest, handle_list_groups),
        # v0 SaslHandshake is followed by raw tokens outside Kafka's framing (broker/sasl.py).
        Api(17, 0, 1, SaslHandshakeRequest, None),
        Api(18, 0, 4, ApiVersionsRequest, handle_api_versions),
        Api(19, 2, 5, CreateTopicsRequest, handle_create_topics),
        Api(20, 1, 4, DeleteTopicsRequest, handle_delete_topics),
        Api(21, 0, 2, DeleteRecordsRequest, handle_delete_records),
        Api(22, 0, 4, InitProducerIdRequest, handle_init_producer_id),
        Api(24, 0, 3, AddPartitionsToTxnRequest, handle_add_partitions_to_txn),
        Api(25, 0, 3, AddOffsetsToTxnRequest, handle_add_offsets_to_txn),
        Api(26, 0, 3, EndTxnRequest, handle_end_txn),
        Api(28, 0, 3, TxnOffsetCommitRequest, handle_txn_offset_commit),
        Api(29, 1, 3, DescribeAclsRequest, handle_describe_acls),
        Api(30, 1, 3, CreateAclsRequest, handle_create_acls),
        Api(31, 1, 3, DeleteAclsRequest, handle_delete_acls),
        Api(32, 1, 4, DescribeConfigsRequest, handle_describe_configs),
        Api(33, 0, 2, AlterConfigsRequest, handle_alter_configs),
        Api(36, 0, 2, SaslAuthenticateRequest, None),
        Api(37, 0, 3, CreatePartitionsRequest, handle_create_partitions),
        Api(42, 0, 2, DeleteGroupsRequest, handle_delete_groups),
        Api(44, 0, 1, IncrementalAlterConfigsRequest, handle_incremental_alter_configs),
        Api(47, 0, 0, OffsetDeleteRequest, handle_offset_delete),
        Api(50, 0, 0, DescribeUserScramCredentialsRequest, handle_describe_user_scram_credentials),
        Api(51, 0, 0, AlterUserScramCredentialsRequest, handle_alter_user_scram_credentials),
        Api(60, 0, 1, DescribeClusterRequest, handle_describe_cluster),
        Api(61, 0, 0, DescribeProducersRequest, handle_describe_producers),
        Api(65, 0, 0, DescribeTransactionsRequest, handle_describe_transactions),
        Api(66, 0, 1, ListTransactionsRequest, handle_list_transactions),
    )
}
PRODUCE = 0
API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
