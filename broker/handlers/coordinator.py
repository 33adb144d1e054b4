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
    """v0-3 name one key; v4 (KIP-699) a batch of keys of one type, each answered on its own."""
    version = req.API_VERSION
    key_type = req.key_type if version >= 1 else _GROUP
    if version >= 4:
        answers = [(key, *_answer(ctx, key_type, key)) for key in req.coordinator_keys]
        return FindCoordinatorResponse[version](
            throttle_time_ms=0,
            coordinators=[
                FindCoordinatorResponse.Coordinator(
                    key=key, node_id=node, host=host, port=port, error_code=code, error_message=message
                )
                for key, code, message, node, host, port in answers
            ],
        )
    code, message, node, host, port = _answer(ctx, key_type, req.key)
    return FindCoordinatorResponse[version](
        throttle_time_ms=0, error_code=code, error_message=message, node_id=node, host=host, port=port
    )


def _answer(ctx: BrokerContext, key_type: int, key: str) -> tuple[int, str | None, int, str, int]:
    """(error code, message, node id, host, port) for one key: this agent, or why not."""
    if key_type not in (_GROUP, _TRANSACTION):
        return errors.INVALID_REQUEST, f"unknown coordinator key type {key_type}", -1, "", -1
    if key_type == _TRANSACTION and not ctx.may(_RULE.need(TRANSACTIONAL_ID), key):
        return (
            errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            f"not allowed to use transactional id {key!r}",
            -1,
            "",
            -1,
        )
    if key_type == _GROUP and not ctx.may(_RULE.need(GROUP), key):
        return errors.GROUP_AUTHORIZATION_FAILED, f"not allowed to use group {key!r}", -1, "", -1
    host, port = ctx.config.advertised
    return errors.NONE, None, ctx.config.node_id, host, port
