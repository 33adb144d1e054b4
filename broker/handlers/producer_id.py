"""InitProducerId (key 22): producer ids and epochs for idempotent producers, from the metadata store.

- ``transactional_id`` null: a new producer id at epoch 0 (v0-2, or v3+ with producer id -1); v3+ with
  the producer's current id and epoch bumps the epoch (KIP-360), which kafka-python and librdkafka ask for
  after an error that leaves their sequences unknown. The rules are ``ProducerStore.init_producer_id``'s.
  A stale epoch gets PRODUCER_FENCED at v4 and INVALID_PRODUCER_EPOCH before (older clients do not know
  code 90; Kafka's KafkaApis.handleInitProducerIdRequest converts it the same way).
- a transactional id (WRITE on it): the transaction coordinator's producer id and epoch for it, which
  fences every earlier incarnation and aborts what it left open (agents/transactions.py,
  storage/metadata/txn_state.py); a timeout above ``transaction.max.timeout.ms`` is
  INVALID_TRANSACTION_TIMEOUT, an empty id INVALID_REQUEST.
The ids are stored, so any agent continues any producer, and they hold across agent restarts.
"""

from __future__ import annotations

import asyncio

from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

from agents.permissions import CLUSTER, KAFKA, TRANSACTIONAL_ID, ApiKey
from broker import errors
from broker.context import BrokerContext
from storage.errors import ProducerFenced, StrataError
from storage.metadata.rows import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, ProducerIdAndEpoch

# The first version whose clients understand PRODUCER_FENCED (KIP-588).
_FENCED_FROM_VERSION = 4
_RULE = KAFKA[ApiKey.INIT_PRODUCER_ID]


async def handle_init_producer_id(ctx: BrokerContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    version = req.API_VERSION
    transactional_id = req.transactional_id
    if transactional_id is not None and not ctx.may(_RULE.need(TRANSACTIONAL_ID), transactional_id):
        return _response(version, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if transactional_id is None and not ctx.may(_RULE.need(CLUSTER)):
        # IDEMPOTENT_WRITE on the cluster, which WRITE on any topic implies (KIP-679).
        return _response(version, errors.CLUSTER_AUTHORIZATION_FAILED)
    # v0-2 have no such fields: the defaults are -1.
    producer_id = req.producer_id if version >= 3 else NO_PRODUCER_ID
    epoch = req.producer_epoch if version >= 3 else NO_PRODUCER_EPOCH
    if (producer_id == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH) or producer_id < -1 or epoch < -1:
        # Kafka's InitProducerIdRequest: the id and the epoch are given together or not at all.
        return _response(version, errors.INVALID_REQUEST)
    current = None if producer_id == NO_PRODUCER_ID else ProducerIdAndEpoch(producer_id, epoch)
    try:
        if transactional_id is None:
            given = await asyncio.to_thread(ctx.metadata.init_producer_id, current, ctx.clock.now_ms())
        elif not transactional_id:
            return _response(version, errors.INVALID_REQUEST)
        else:
            given = await ctx.agent.transactions.init_producer(
                transactional_id, req.transaction_timeout_ms, current
            )
    except StrataError as exc:
        code = errors.kafka_txn_error(exc, version, _FENCED_FROM_VERSION)
        if transactional_id is None and not isinstance(exc, ProducerFenced):
            code = errors.kafka_error(exc)  # no coordinator is involved: the store's own code
        return _response(version, code)
    return _response(version, errors.NONE, given)


def _response(version: int, code: int, given: ProducerIdAndEpoch | None = None) -> InitProducerIdResponse:
    return InitProducerIdResponse[version](
        throttle_time_ms=0,
        error_code=code,
        producer_id=NO_PRODUCER_ID if given is None else given.producer_id,
        producer_epoch=NO_PRODUCER_EPOCH if given is None else given.epoch,
    )
