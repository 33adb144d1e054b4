"""Produce (key 0): client batches go to the agent's buffer as they came, one request per topic.

Admission (``admit_produce``) is synchronous and runs before the connection handles its next request, so
pipelined requests on one connection enter the buffer in the order they were sent, and, since flushes
commit in cut order, get increasing offsets (invariant 8). It takes the request's topics from the agent's
topic cache (``admission_view``); on a miss the connection loads them first (``load_topics``) and holds
its later requests back meanwhile. Waiting for the flush runs concurrently with later requests. A request
holding a compressed batch is checked first in the listener's check threads (``check_off_loop``,
broker/batch_checks.py), its connection held back the same way, and admitted with what they found.

A request to a topic that validates schemas (registry/validate.py) is checked before admission on the
loop, with the schema cache only (``check_on_loop``); when the cache cannot answer (a schema not seen yet,
a subject list past its time to live, a refusal to confirm against the store), the request takes the
compressed path: checked in the check threads, which read the metadata store. A request to other topics
skips all of it.

acks=0 gets no response (the records are still admitted). Each partition is answered with the offset of
its first record, or its own error code; one partition's bad batch does not fail the others.

Each partition's batches go to the agent as a request of their own: that is Kafka's unit of append for an
idempotent producer, which the flush commit accepts, answers as a duplicate (with the original offset) or
rejects (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH) as a whole, without touching the other
partitions of the same produce request. A transactional producer's batches are refused there too unless
their partition is in its open transaction (INVALID_TXN_STATE, KIP-890 part 1); the request's
``transactional_id`` needs WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and transactional batches
without one are refused the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agents.agent import CachedTopic
from agents.buffer import PartitionBatch, Reservation
from agents.buffer import ProduceRequest as AgentRequest
from agents.offsets import FIRST_RECORD, RecordOffsets
from agents.permissions import KAFKA, TOPIC, TRANSACTIONAL_ID, ApiKey
from broker import errors
from broker.batches import BatchRejected, check_batches, has_compressed, schema_check
from broker.budget import Answer
from broker.context import BrokerContext
from broker.produce_codec import ProduceRequest, TopicData, encode_response
from registry.verdicts import Tally, Unresolved
from storage.errors import StrataError


@dataclass(slots=True)
class _PartitionResult:
    index: int
    error_code: int = errors.NONE
    error_message: str | None = None
    # (index of the record in its batch, why): Produce v8's record_errors, for INVALID_RECORD. A tuple
    # by default: no list made for every partition that has none.
    record_errors: Sequence[tuple[int, str]] = ()
    base_offset: int = -1
    # The batches' LogAppendTime stamp (a LogAppendTime topic's), answered once they commit; -1 otherwise,
    # as Kafka answers CreateTime topics and failed partitions.
    append_time: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    # The agent request of this partition's batches, once admitted: its one offset is the partition's.
    future: asyncio.Future[RecordOffsets] | None = None
    # Whether the batches carry a producer id: an idempotent producer's (broker/waiting.py).
    idempotent: bool = False


# A topic's name and its partitions' results, in request order: what its answer is encoded from.
_TopicPlan = tuple[str, list[_PartitionResult]]
_WRITE = KAFKA[ApiKey.PRODUCE].need(TOPIC)
_TRANSACTIONAL = KAFKA[ApiKey.PRODUCE].need(TRANSACTIONAL_ID)


Topics = dict[str, CachedTopic | StrataError]
# What checking each partition's batches gave, by (topic position, partition position) in the request.
Checked = dict[tuple[int, int], list[PartitionBatch] | BatchRejected | StrataError]


# A partition to check: its position in the request, topic, index, bytes and cached topic.
_Wanted = tuple[tuple[int, int], str, int, bytes | memoryview, CachedTopic]


def _wanted(ctx: BrokerContext, req: ProduceRequest, topics: Topics) -> list[_Wanted]:
    """The partitions ``admit_produce`` will take. Partitions it will refuse whatever their bytes (a
    refused request, a topic not allowed or unknown, a partition out of range) are not checked."""
    wanted: list[_Wanted] = []
    if _refusal(ctx, req) is None:
        for ti, topic_data in enumerate(req.topic_data):
            cached = topics[topic_data.name]
            if not isinstance(cached, CachedTopic) or not ctx.may(_WRITE, topic_data.name):
                continue
            for pi, pdata in enumerate(topic_data.partition_data):
                if 0 <= pdata.index < cached.info.partitions:
                    data = pdata.records if pdata.records is not None else b""
                    wanted.append(((ti, pi), topic_data.name, pdata.index, data, cached))
    return wanted


def _check_all(ctx: BrokerContext, req: ProduceRequest, wanted: list[_Wanted], load: bool) -> Checked:
    """Every wanted partition checked; Unresolved (``load`` False) when a schema check needs the store."""
    now = ctx.clock.now_ms()
    zstd_allowed = req.API_VERSION >= 7  # KIP-110
    out: Checked = {}
    tally = Tally()
    for at, name, partition, data, cached in wanted:
        schemas = schema_check(ctx.schema_validator, name, cached.config, load, tally)
        try:
            out[at] = check_batches(name, partition, data, cached.config, now, zstd_allowed, schemas)
        except (BatchRejected, StrataError) as exc:
            out[at] = exc.with_traceback(None)  # kept: its traceback would hold this frame and the data
    _record(ctx, tally)
    return out


async def check_off_loop(ctx: BrokerContext, req: ProduceRequest, topics: Topics) -> Checked:
    """The batches of every partition ``admit_produce`` will take, checked in ``ctx.batch_checks``'s
    threads (broker/batch_checks.py), where schema checks may read the metadata store."""
    wanted = _wanted(ctx, req, topics)
    return await ctx.batch_checks.run(lambda: _check_all(ctx, req, wanted, True))


def validates_schemas(topics: Topics) -> bool:
    """Whether a topic of the request validates schemas: its partitions are checked before admission."""
    for t in topics.values():  # noqa: SIM110 (a loop, not a generator: once per Produce request)
        if isinstance(t, CachedTopic) and t.config.schema_validation:
            return True
    return False


def check_on_loop(ctx: BrokerContext, req: ProduceRequest, topics: Topics) -> Checked | None:
    """``check_off_loop`` on the event loop, with cached schemas only: None when one is not cached (the
    request is then checked off the loop)."""
    try:
        return _check_all(ctx, req, _wanted(ctx, req, topics), False)
    except Unresolved:
        return None


def admission_view(ctx: BrokerContext, req: ProduceRequest) -> tuple[Topics | None, bool, bool]:
    """What decides whether ``req`` is admitted at once, in one pass over it (it runs for every request):
    every topic from the agent's topic cache (None if one must be loaded first), whether a partition holds
    a compressed batch (checked off the loop, ``check_off_loop``), and whether a cached topic validates
    schemas (checked first, ``check_on_loop``)."""
    topics: Topics | None = {}
    compressed = validating = False
    for topic_data in req.topic_data:
        if topics is not None:
            cached = ctx.agent.cached_topic(topic_data.name)
            if cached is None:
                topics = None
            else:
                topics[topic_data.name] = cached
                validating = validating or cached.config.schema_validation
        for pdata in topic_data.partition_data:
            if pdata.records and has_compressed(pdata.records):
                compressed = True
    return topics, compressed, validating


async def load_topics(ctx: BrokerContext, req: ProduceRequest) -> Topics:
    """Every topic of ``req``, loaded from the metadata store where the cache misses, or its error."""
    out: Topics = {}
    for topic_data in req.topic_data:
        if topic_data.name not in out:
            try:
                out[topic_data.name] = await ctx.agent.topic(topic_data.name)
            except StrataError as exc:
                out[topic_data.name] = exc.with_traceback(None)  # as in _check_all
    return out


def admit_produce(
    ctx: BrokerContext,
    req: ProduceRequest,
    reservation: Reservation,
    topics: Topics,
    answer: Callable[[Answer], None],
    checked: Checked | None = None,
) -> PendingAnswer | None:
    """Check and buffer the request now; ``answer`` gets its framed answer (None for acks=0) later.

    Synchronous, so a connection's requests enter the buffer in the order they came. No task and no
    timer per request: the answer is built by a callback when the last partition's flush settles, and the
    connection, which knows the request's deadline, calls ``PendingAnswer.expire`` if it passes first
    (measured at thousands of small requests a second: a task and an ``asyncio.wait`` per request were a
    tenth of the event loop, and a timer per request another 4 %). Returns None when the answer was
    given at once. The caller releases what ``reservation`` still holds. ``checked``: the batches checked
    already, off the loop (``check_off_loop``); without it they are checked here.
    """
    # Loops, not comprehensions, and the refusal and the time read once: this runs for every request.
    refusal, now = _refusal(ctx, req), ctx.clock.now_ms()
    plans, results = [], []
    for ti, topic_data in enumerate(req.topic_data):
        plan = _admit_topic(ctx, req, ti, topic_data, topics, reservation, checked, refusal, now)
        plans.append(plan)
        for result in plan[1]:
            if result.future is not None:
                results.append(result)
    if req.acks == 0:
        for result in results:
            assert result.future is not None
            result.future.add_done_callback(_ignore)
        answer(None)
        return None
    pending = PendingAnswer(req, plans, results, answer, ctx)
    if pending.waiting == 0:
        pending.finish()
        return None
    for result in results:
        assert result.future is not None
        if not result.future.done():
            result.future.add_done_callback(pending.settled)
    return pending


class PendingAnswer:
    """A Produce request waiting for its partitions' flushes; answered once, whichever comes first: the
    last flush settling, or ``expire`` (its timeout, REQUEST_TIMED_OUT for the partitions still waiting).

    It holds only what the answer needs: holding the request until its flush commits would keep the
    request's objects alive, unaccounted by the buffer's bound (its batches are the buffer's, counted).
    """

    __slots__ = (
        "_answer",
        "_latency",
        "_plans",
        "_results",
        "_started",
        "clock",
        "correlation_id",
        "idempotent",
        "version",
        "waiting",
    )

    def __init__(
        self,
        req: ProduceRequest,
        plans: list[_TopicPlan],
        results: list[_PartitionResult],
        answer: Callable[[Answer], None],
        ctx: BrokerContext,
    ) -> None:
        self.version, self.correlation_id = req.API_VERSION, req.correlation_id
        self._plans: list[_TopicPlan] | None = plans
        self._results = results
        self._answer = answer
        self.clock = ctx.clock
        self._latency = ctx.agent.metrics.kafka_produce_latency
        self._started = self.clock.monotonic()
        # Loops, not generators: this runs once per waiting Produce request.
        waiting, idempotent = 0, False
        for r in results:
            if r.future is not None and not r.future.done():
                waiting += 1
            idempotent = idempotent or r.idempotent
        self.waiting, self.idempotent = waiting, idempotent

    def settled(self, _: object) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.finish()

    def expire(self) -> None:
        """The request's timeout passed: answer now. The flush owns the futures, and a late commit stays
        committed."""
        self.finish()

    def finish(self) -> None:
        plans, self._plans = self._plans, None
        if plans is None:  # answered already: the timeout and the flush raced
            return
        _settle(self._results)
        self._answer(encode_response(self.correlation_id, self.version, plans))
        self._latency.observe(self.clock.monotonic() - self._started)


def _admit_topic(
    ctx: BrokerContext,
    req: ProduceRequest,
    ti: int,
    topic_data: TopicData,
    topics: Topics,
    reservation: Reservation,
    checked: Checked | None,
    refusal: tuple[int, str] | None,
    now: int,
) -> _TopicPlan:
    """One topic's partitions admitted; ``refusal``: the request's own (``_refusal``), if any."""
    plan = (topic_data.name, [_PartitionResult(p.index) for p in topic_data.partition_data])
    if refusal is None and not ctx.may(_WRITE, topic_data.name):
        # Before the topic's existence, as Kafka: a denied principal cannot probe which topics exist.
        refusal = errors.TOPIC_AUTHORIZATION_FAILED, f"not allowed to write topic {topic_data.name!r}"
    cached = topics[topic_data.name]
    if refusal is None and isinstance(cached, StrataError):
        refusal = errors.kafka_error(cached), cached.message
    if refusal is not None:
        for result in plan[1]:
            result.error_code, result.error_message = refusal
        return plan
    assert isinstance(cached, CachedTopic)
    zstd_allowed = req.API_VERSION >= 7  # KIP-110
    for pi, (result, pdata) in enumerate(zip(plan[1], topic_data.partition_data, strict=True)):
        if not 0 <= pdata.index < cached.info.partitions:
            result.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = f"topic {topic_data.name!r} has no partition {pdata.index}"
            continue
        data = pdata.records if pdata.records is not None else b""
        try:
            if checked is None:
                batches = _check_now(ctx, topic_data.name, pdata.index, data, cached, now, zstd_allowed)
            else:
                outcome = checked[(ti, pi)]
                if not isinstance(outcome, list):
                    raise outcome
                batches = outcome
            result.idempotent = batches[0].producer_id >= 0  # check_batches gives at least one
            if req.transactional_id is None and _any_transactional(batches):
                # As Kafka: transactional records come with the transactional id they are authorized by.
                result.error_code = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                result.error_message = "transactional batches need the request's transactional id"
                continue
            if cached.config.log_append_time:
                # check_batches stamped every batch with one time, also each batch's max timestamp; taken
                # from the batches because they may have been checked off the loop, at another now.
                result.append_time = batches[0].max_timestamp
            # The first record of the partition's first batch.
            result.future = ctx.agent.enqueue(
                AgentRequest(topic_data.name, batches, FIRST_RECORD), reservation
            )
        except BatchRejected as exc:
            result.error_code, result.error_message = exc.code, exc.message
            result.record_errors = exc.record_errors
        except Unresolved:
            result.error_code = errors.KAFKA_STORAGE_ERROR  # retriable: the next attempt loads the schema
            result.error_message = "the topic's schemas were not loaded yet; retry"
        except StrataError as exc:
            result.error_code, result.error_message = errors.kafka_error(exc), exc.message
    return plan


def _any_transactional(batches: list[PartitionBatch]) -> bool:
    for batch in batches:  # noqa: SIM110 (a loop, not a generator: once per partition of every request)
        if batch.transactional:
            return True
    return False


def _check_now(
    ctx: BrokerContext,
    name: str,
    partition: int,
    data: bytes | memoryview,
    cached: CachedTopic,
    now: int,
    zstd_allowed: bool,
) -> list[PartitionBatch]:
    """``check_batches`` on the loop. Admission checks a topic that validates schemas before (with
    ``check_on_loop``), so its schema check here is cache-only, and Unresolved only if a caller did not."""
    if not cached.config.schema_validation:  # the hot path: nothing of validation is made
        return check_batches(name, partition, data, cached.config, now, zstd_allowed)
    tally = Tally()
    schemas = schema_check(ctx.schema_validator, name, cached.config, False, tally)
    try:
        batches = check_batches(name, partition, data, cached.config, now, zstd_allowed, schemas)
    except BatchRejected:
        _record(ctx, tally)
        raise
    _record(ctx, tally)
    return batches


def _record(ctx: BrokerContext, tally: Tally) -> None:
    if ctx.schema_validator is not None and tally.counts:
        ctx.schema_validator.record(tally)


def _refusal(ctx: BrokerContext, req: ProduceRequest) -> tuple[int, str] | None:
    if req.acks not in (0, 1, -1):
        return errors.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, got {req.acks}"
    if req.transactional_id is not None and not ctx.may(_TRANSACTIONAL, req.transactional_id):
        return (
            errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            f"not allowed to write transactional id {req.transactional_id!r}",
        )
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
            offsets = future.result()
            # The Kafka door asks for its partition's first record only: batch 0's record 0, whose offset
            # is batch 0's base (read as is: no pair made per request).
            assert offsets.order == FIRST_RECORD
            result.base_offset = offsets.bases[0]
            result.log_append_time_ms = result.append_time
            if offsets.log_starts:
                result.log_start_offset = offsets.log_starts[0]


def _ignore(future: asyncio.Future[RecordOffsets]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved: nobody waits for an acks=0 or timed-out answer
