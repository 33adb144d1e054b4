"""Produce (key 0): client batches go to the agent's buffer as they came, one request per topic.

Admission runs before the connection reads its next request (``admit_produce``), so pipelined requests
on one connection enter the buffer in the order they were sent, and, since flushes commit in cut order,
get increasing offsets (invariant 8). Waiting for the flush runs concurrently with later requests.

acks=0 gets no response (the records are still admitted). Each partition is answered with the offset of
its first record, or its own error code; one partition's bad batch does not fail the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from agents.buffer import PartitionBatch, Reservation
from agents.buffer import ProduceRequest as AgentRequest
from broker import errors
from broker.batches import BatchRejected, check_batches
from broker.context import BrokerContext
from storage.errors import StrataError

_Topic = ProduceResponse.TopicProduceResponse
_Partition = _Topic.PartitionProduceResponse


@dataclass(slots=True)
class _PartitionResult:
    index: int
    error_code: int = errors.NONE
    error_message: str | None = None
    base_offset: int = -1


@dataclass(slots=True)
class _TopicPlan:
    name: str
    results: list[_PartitionResult] = field(default_factory=list)
    future: asyncio.Future[list[tuple[int, int]]] | None = None
    # Indices into ``results`` of the partitions in the agent request, in ``order``.
    admitted: list[int] = field(default_factory=list)


async def admit_produce(
    ctx: BrokerContext, req: ProduceRequest, reservation: Reservation
) -> Callable[[], Awaitable[ProduceResponse | None]]:
    """Check and buffer the request now; return what waits for the commit and builds the response."""
    plans = [await _admit_topic(ctx, req, topic_data, reservation) for topic_data in req.topic_data]
    reservation.release()  # whatever the admitted topics did not consume
    if req.acks == 0:
        for plan in plans:
            if plan.future is not None:
                plan.future.add_done_callback(_ignore)

        async def nothing() -> None:
            return None

        return nothing

    async def respond() -> ProduceResponse:
        await _settle(plans, req.timeout_ms / 1000)
        return _response(req, plans)

    return respond


async def _admit_topic(
    ctx: BrokerContext,
    req: ProduceRequest,
    topic_data: ProduceRequest.TopicProduceData,
    reservation: Reservation,
) -> _TopicPlan:
    plan = _TopicPlan(topic_data.name, [_PartitionResult(p.index) for p in topic_data.partition_data])
    refusal = _refusal(req)
    if refusal is not None:
        for result in plan.results:
            result.error_code, result.error_message = refusal
        return plan
    try:
        cached = await ctx.agent.topic(topic_data.name)
    except StrataError as exc:
        for result in plan.results:
            result.error_code, result.error_message = errors.kafka_error(exc), exc.message
        return plan
    now = ctx.clock.now_ms()
    batches: list[PartitionBatch] = []
    order: list[tuple[int, int]] = []
    for i, pdata in enumerate(topic_data.partition_data):
        result = plan.results[i]
        if not 0 <= pdata.index < cached.info.partitions:
            result.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = f"topic {topic_data.name!r} has no partition {pdata.index}"
            continue
        data = pdata.records if isinstance(pdata.records, bytes) else b""
        try:
            checked = check_batches(topic_data.name, pdata.index, data, cached.config, now)
        except BatchRejected as exc:
            result.error_code, result.error_message = exc.code, exc.message
            continue
        order.append((len(batches), 0))  # the first record of the partition's first batch
        plan.admitted.append(i)
        batches.extend(checked)
    if batches:
        request = AgentRequest(topic_data.name, batches, order)
        try:
            plan.future = ctx.agent.enqueue(request, reservation)
        except StrataError as exc:
            for i in plan.admitted:
                plan.results[i].error_code = errors.kafka_error(exc)
                plan.results[i].error_message = exc.message
            plan.admitted = []
    return plan


def _refusal(req: ProduceRequest) -> tuple[int, str] | None:
    if req.acks not in (0, 1, -1):
        return errors.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, got {req.acks}"
    if req.transactional_id is not None:
        return errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Strata does not support transactions"
    return None


async def _settle(plans: list[_TopicPlan], timeout_s: float) -> None:
    futures = [p.future for p in plans if p.future is not None]
    if futures:
        # Shielded: the flush owns the futures; timing out here only stops waiting for them.
        await asyncio.wait([asyncio.shield(f) for f in futures], timeout=max(timeout_s, 0.001))
    for plan in plans:
        future = plan.future
        if future is None:
            continue
        if not future.done():
            future.add_done_callback(_ignore)
            _fail(plan, errors.REQUEST_TIMED_OUT, "the flush did not commit within the request timeout")
        elif future.exception() is not None:
            exc = future.exception()
            assert isinstance(exc, StrataError)
            _fail(plan, errors.kafka_error(exc), exc.message)
        else:
            for i, (_, offset) in zip(plan.admitted, future.result(), strict=True):
                plan.results[i].base_offset = offset


def _fail(plan: _TopicPlan, code: int, message: str) -> None:
    for i in plan.admitted:
        plan.results[i].error_code, plan.results[i].error_message = code, message


def _ignore(future: asyncio.Future[list[tuple[int, int]]]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved: nobody waits for an acks=0 or timed-out answer


def _response(req: ProduceRequest, plans: list[_TopicPlan]) -> ProduceResponse:
    return ProduceResponse[req.API_VERSION](
        responses=[
            _Topic(
                name=plan.name,
                partition_responses=[
                    _Partition(
                        index=r.index,
                        error_code=r.error_code,
                        base_offset=r.base_offset,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                        record_errors=[],
                        error_message=r.error_message,
                    )
                    for r in plan.results
                ],
            )
            for plan in plans
        ],
        throttle_time_ms=0,
    )
