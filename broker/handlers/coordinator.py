"""FindCoordinator (key 10): the agent asked coordinates every group and every transactional id.

Group and transaction state live in the metadata store, and each coordinator request is one metadata
transaction, so any agent can coordinate any group (key type 0) or transactional id (key type 1); this
agent answers with itself. librdkafka also reads FindCoordinator's presence as "the broker is at least
0.8.2", which is what turns on its lz4 compression.
"""

from __future__ import annotations

from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from agents.permissions import GROUP, KAFKA, TRANSACTIONAL_ID, ApiKey
from broker import errors
from broker.context import BrokerContext

_GROUP = 0
_TRANSACTION = 1
_RULE = KAFKA[ApiKey.FIND_COORDINATOR]


async def handle_find_coordinator(ctx: BrokerContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    host, port = ctx.config.advertised
    key_type = req.key_type if req.API_VERSION >= 1 else _GROUP
    if key_type not in (_GROUP, _TRANSACTION):
        return FindCoordinatorResponse[req.API_VERSION](
            throttle_time_ms=0,
            error_code=errors.INVALID_REQUEST,
            error_message=f"unknown coordinator key type {key_type}",
            node_id=-1,
            host="",
            port=-1,
        )
    if key_type == _TRANSACTION and not ctx.may(_RULE.need(TRANSACTIONAL_ID), req.key):
        return FindCoordinatorResponse[req.API_VERSION](
            throttle_time_ms=0,
            error_code=errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            error_message=f"not allowed to use transactional id {req.key!r}",
            node_id=-1,
            host="",
            port=-1,
        )
    if key_type == _GROUP and not ctx.may(_RULE.need(GROUP), req.key):
        return FindCoordinatorResponse[req.API_VERSION](
            throttle_time_ms=0,
            error_code=errors.GROUP_AUTHORIZATION_FAILED,
            error_message=f"not allowed to use group {req.key!r}",
            node_id=-1,
            host="",
            port=-1,
        )
    return FindCoordinatorResponse[req.API_VERSION](
        throttle_time_ms=0,
        error_code=errors.NONE,
        error_message=None,
        node_id=ctx.config.node_id,
        host=host,
        port=port,
    )
