"""Kafka transactions over HTTP, for operators: list them (with their partitions, so a hanging one and the
read_committed readers it holds are visible) and abort one, as ``kafka-transactions --abort`` does.

- ``GET /v1/transactions``: every transactional id the principal may describe (DESCRIBE on it), with the
  partitions of topics it may describe; ``state=Ongoing`` lists only open ones.
- ``POST /v1/transactions/{transactional_id}/abort``: fence the producer (epoch + 1) and abort its open
  transaction, in one metadata transaction: markers, the aborted index, pending offsets dropped. Its late
  EndTxn, AddPartitionsToTxn and transactional batches are refused from then on. WRITE on the id. 404
  (40407) for an unknown id, 422 (42217, INVALID_TXN_STATE) when nothing is open.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from agents.permissions import TOPIC, TRANSACTIONAL_ID, route
from api import authz
from api import txn_models as out
from api.routes.common import ERRORS, CtxDep
from storage.metadata.txn_state import TxnDescription, TxnState

router = APIRouter()
_LIST = route("GET", "/v1/transactions")
_ABORT = route("POST", "/v1/transactions/{transactional_id}/abort").need(TRANSACTIONAL_ID)
# At most 1000 characters, as group ids here: one that long fits a request line (12 URL bytes per character,
# 4-byte UTF-8 percent-encoded) under uvicorn's 64 KiB; a transactional id that long does not occur.
TxnIdPath = Annotated[str, Path(min_length=1, max_length=1000, description="the transactional id")]


@router.get("/v1/transactions", response_model=out.TransactionListOut, responses=ERRORS)
async def list_transactions(
    http: Request,
    ctx: CtxDep,
    state: Annotated[TxnState | None, Query(description="only transactions in this state")] = None,
) -> out.TransactionListOut:
    """Transactions by id, the ones the principal may describe."""
    now = ctx.clock.now_ms()
    listed = []
    for described in await ctx.agent.transactions.describe_all():
        txn = described.txn
        if state is not None and txn.state is not state:
            continue
        if not authz.may(http, _LIST.need(TRANSACTIONAL_ID), txn.transactional_id):
            continue
        listed.append(_out(http, described, now))
    return out.TransactionListOut(transactions=listed)


@router.post("/v1/transactions/{transactional_id}/abort", response_model=out.TransactionOut, responses=ERRORS)
async def abort_transaction(http: Request, ctx: CtxDep, transactional_id: TxnIdPath) -> out.TransactionOut:
    """Abort the id's open transaction and fence its producer."""
    authz.check(http, _ABORT, transactional_id)
    await ctx.agent.transactions.abort(transactional_id)
    return _out(http, await ctx.agent.transactions.describe(transactional_id), ctx.clock.now_ms())


def _out(http: Request, described: TxnDescription, now_ms: int) -> out.TransactionOut:
    txn = described.txn
    age = None if txn.started_ms is None else max(now_ms - txn.started_ms, 0)
    return out.TransactionOut(
        transactional_id=txn.transactional_id,
        producer_id=txn.producer_id,
        producer_epoch=txn.epoch,
        state=txn.state.value,
        timeout_ms=txn.timeout_ms,
        started_ms=txn.started_ms,
        age_ms=age,
        hanging=age is not None and age > txn.timeout_ms,
        partitions=[
            out.TxnPartitionOut(topic=p.topic, partition=p.partition, first_offset=p.first_offset)
            for p in described.partitions
            if authz.may(http, _LIST.need(TOPIC), p.topic)
        ],
        groups=described.groups,
    )
