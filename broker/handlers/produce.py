"""Produce (key 0): client batches go to the agent's buffer as they came, one request per topic.

Admission runs before the connection reads its next request (``admit_produce``), so pipelined requests
on one connection enter the buffer in the order they were sent, and, since flushes commit in cut order,
get increasing offsets (invariant 8). Waiting for the flush runs concurrently with later requests.

acks=0 gets no response (the records are still admitted). Each partition is answered with the offset of
its first record, or its own error code; one partition's bad batch does not fail the others.

Each partition's batches go to the agent as a request of their own: that is Kafka's unit of append for an
idempotent producer, which the flush commit accepts, answers as a duplicate (with the original offset) or
rejects (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH) as a whole, without touching the other
partitions of the same produce request.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agents.buffer import PartitionBatch, Reservation
from agents.buffer import ProduceRequest as AgentRequest
from broker import errors
from broker.batches import BatchRejected, check_batches
from broker.budget import Answer
from broker.context import BrokerContext
from broker.produce_codec import PartitionResponse, ProduceRequest, TopicData, encode_response
from storage.errors import StrataError


@dataclass(slots=True)
class _PartitionResult:
    index: int
    error_code: int = errors.NONE
    error_message: str | None = None
    base_offset: int = -1
    # The agent request of this partition's batches, once admitted: its one offset is the partition's.
    future: asyncio.Future[list[tuple[int, int]]] | None = None


@dataclass(slots=True)
class _TopicPlan:
    name: str
    results: list[_PartitionResult] = field(default_factory=list)


async def admit_produce(
    ctx: BrokerContext, req: ProduceRequest, reservation: Reservation
) -> asyncio.Future[Answer]:
    """Check and buffer the request now; return the future of its framed answer (None for acks=0).

    No task per request: the answer is built by a callback when the last partition's flush settles, or
    by a timer at the request's timeout (measured: at thousands of small requests a second, a task and an
    ``asyncio.wait`` per request were a tenth of the event loop).
    """
    plans = [await _admit_topic(ctx, req, topic_data, reservation) for topic_data in req.topic_data]
    reservation.release()  # whatever the admitted topics did not consume
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[Answer] = loop.create_future()
    results = [r for plan in plans for r in plan.results if r.future is not None]
    if req.acks == 0:
        for result in results:
            assert result.future is not None
            result.future.add_done_callback(_ignore)
        answer.set_result(None)
        return answer

    # The answer needs only these: holding ``req`` until the flush commits would keep a second copy of
    # every buffered batch alive (the decoded request's records), unaccounted by the buffer's bound.
    version, correlation_id = req.API_VERSION, req.correlation_id
    waiting = sum(1 for r in results if r.future is not None and not r.future.done())

    def finish() -> None:
        if answer.done():  # the connection closed and cancelled it, or the timer and the flush raced
            return
        timer.cancel()
        _settle(results)
        answer.set_result(_response(correlation_id, version, plans))

    def settled(_: object) -> None:
        nonlocal waiting
        waiting -= 1
        if waiting == 0:
            finish()

    # The timer only stops the waiting: the flush owns the futures, and a late commit stays committed.
    timer = loop.call_later(max(req.timeout_ms / 1000, 0.001), finish)
    if waiting == 0:
        finish()
    else:
        for result in results:
            assert result.future is not None
            if not result.future.done():
                result.future.add_done_callback(settled)
    return answer


async def _admit_topic(
    ctx: BrokerContext,
    req: ProduceRequest,
    topic_data: TopicData,
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
    zstd_allowed = req.API_VERSION >= 7  # KIP-110
    checked: list[tuple[_PartitionResult, list[PartitionBatch]]] = []
    for result, pdata in zip(plan.results, topic_data.partition_data, strict=True):
        if not 0 <= pdata.index < cached.info.partitions:
            result.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = f"topic {topic_data.name!r} has no partition {pdata.index}"
            continue
        data = pdata.records if isinstance(pdata.records, bytes) else b""
        try:
            batches = check_batches(topic_data.name, pdata.index, data, cached.config, now, zstd_allowed)
            checked.append((result, batches))
        except BatchRejected as exc:
            result.error_code, result.error_message = exc.code, exc.message
    # No await from here on: the partitions enter the buffer back to back, in request order.
    for result, batches in checked:
        try:
            # The first record of the partition's first batch.
            result.future = ctx.agent.enqueue(AgentRequest(topic_data.name, batches, [(0, 0)]), reservation)
        except StrataError as exc:
            result.error_code, result.error_message = errors.kafka_error(exc), exc.message
    return plan


def _refusal(req: ProduceRequest) -> tuple[int, str] | None:
    if req.acks not in (0, 1, -1):
        return errors.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, got {req.acks}"
    if req.transactional_id is not None:
        return errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Strata does not support transactions"
    return None


def _settle(results: list[_PartitionResult]) -> None:
    """Each admitted partition's code and offset from its future; still pending means timed out."""
    for result in results:
        future = result.future
        assert future is not None
        if not future.done():
            future.add_done_callback(_ignore)
            result.error_code = errors.REQUEST_TIMED_OUT
            result.error_message = "the flush did not commit within the request timeout"
        elif (exc := future.exception()) is not None:
            assert isinstance(exc, StrataError)
            result.error_code, result.error_message = errors.kafka_error(exc), exc.message
        else:
            [(_, result.base_offset)] = future.result()


def _ignore(future: asyncio.Future[list[tuple[int, int]]]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved: nobody waits for an acks=0 or timed-out answer


def _response(correlation_id: int, version: int, plans: list[_TopicPlan]) -> bytes:
    return encode_response(
        correlation_id,
        version,
        [
            (
                plan.name,
                [
                    PartitionResponse(r.index, r.error_code, r.base_offset, r.error_message)
                    for r in plan.results
                ],
            )
            for plan in plans
        ],
    )
