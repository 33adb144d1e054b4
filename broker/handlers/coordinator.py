"""FindCoordinator (key 10): in single-broker mode this agent coordinates every group.

Group state lives in the metadata store (the consumer-group APIs come next), so any agent can coordinate
any group; this agent answers with itself. Transaction coordinators do not exist (no transactions):
COORDINATOR_NOT_AVAILABLE. librdkafka also reads FindCoordinator's presence as "the broker is at least
0.8.2", which is what turns on its lz4 compression.
"""

from __future__ import annotations

from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from agents.permissions import GROUP, KAFKA, TRANSACTIONAL_ID, ApiKey
from broker import errors
from broker.context import BrokerContext

_GROUP = 0
_RULE = KAFKA[ApiKey.FIND_COORDINATOR]


async def handle_find_coordinator(ctx: BrokerContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    host, port = ctx.config.advertised
    key_type = req.key_type if req.API_VERSION >= 1 else _GROUP
    if key_type != _GROUP:
        allowed = ctx.may(_RULE.need(TRANSACTIONAL_ID), req.key)
        return FindCoordinatorResponse[req.API_VERSION](
            throttle_time_ms=0,
            error_code=errors.COORDINATOR_NOT_AVAILABLE
            if allowed
            else errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            error_message="Strata has no transactions, so no transaction coordinator",
            node_id=-1,
            host="",
            port=-1,
        )
    if not ctx.may(_RULE.need(GROUP), req.key):
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
