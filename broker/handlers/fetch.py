"""Fetch (key 1): stored batches served as they are, with absolute base offsets patched in.

Long poll: if fewer than ``min_bytes`` are ready, wait up to ``max_wait_ms`` for a commit, woken at once by
this agent's own flushes and re-reading every 100 ms for other agents' (as the HTTP long poll does).
Limits: ``partition_max_bytes`` per partition and ``max_bytes`` per response, except that the first batch
of the response is sent whole even if larger (KIP-74), so a large batch never stalls a consumer.
No fetch sessions (KIP-227): every answer has session id 0, so clients send full requests.
Transactions: ``isolation_level`` read_committed serves only below each partition's last stable offset
and lists the aborted transactions of the range; at either level the answer carries the commit and abort
markers as control batches at their offsets, which clients skip but count (agents/txn_fetch.py).
Before Fetch v10 a partition of a topic whose ``compression.type`` is ``zstd`` gets
UNSUPPORTED_COMPRESSION_TYPE and no data (KIP-110), exactly where Kafka's broker refuses it
(``KafkaApis.maybeConvertFetchedData``): a topic that keeps each producer's codec is served as stored.
Stored data that fails its checks (a CRC, or an uncompressed batch whose records do not parse) is
CORRUPT_MESSAGE for its partition, as Kafka answers a corrupt log: the consumer gets an error it can act
on (Java's consumer raises it to the application, librdkafka reports it as a consumer error), never bytes
its client would skip in silence.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field

from kafka.protocol.consumer.fetch import FetchRequest

from agents.chunks import BatchRead
from agents.fetch import POLL_INTERVAL_S
from agents.permissions import KAFKA, TOPIC, ApiKey
from broker import errors
from broker.budget import Held
from broker.context import BrokerContext
from broker.fetch_codec import FetchedPartition, encode_response
from storage.errors import StrataError


@dataclass(slots=True)
class _Read:
    topic: str
    partition: int
    offset: int
    max_bytes: int
    error_code: int = errors.NONE
    batches: list[tuple[memoryview, int]] = field(default_factory=list)
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    aborted: list[tuple[int, int]] | None = None


async def handle_fetch(ctx: BrokerContext, req: FetchRequest) -> Held:
    """The answer, holding its grant of the listener's fetch budget until the connection has written it.

    Each read of the long poll takes a grant; one that does not answer gives it back before waiting, so
    a consumer waiting for new records holds no budget.
    """
    every = [
        _Read(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes)
        for t in req.topics
        for p in t.partitions
    ]
    read_committed = req.isolation_level == READ_COMMITTED
    reads = []
    for r in every:
        if ctx.may(_READ, r.topic):
            reads.append(r)
        else:
            r.error_code = errors.TOPIC_AUTHORIZATION_FAILED  # answered at once, with the others' records
    denied = len(reads) < len(every)
    response_max = req.max_bytes if req.API_VERSION >= 3 else 2**31 - 1
    # No answer can carry more than its partitions' limits (KIP-74's first-batch overshoot aside), so the
    # grant asks for no more: clients' fetch.max.bytes defaults to 50 MiB whatever the partitions hold.
    wanted = min(response_max, sum(max(r.max_bytes, 0) for r in reads))
    budget = ctx.fetch_budget
    deadline = ctx.clock.monotonic() + max(req.max_wait_ms, 0) / 1000
    while True:
        # Wait for room until the Fetch's deadline at most (at least a moment, for a deadline already
        # passed): then answer without records, which frees this connection's later answers.
        try:
            async with asyncio.timeout(max(deadline - ctx.clock.monotonic(), MIN_BUDGET_WAIT_S)):
                grant = await budget.acquire(wanted)
        except TimeoutError:
            await _states_only(ctx, reads, read_committed)
            return Held(_response(req, every), _nothing)
        try:
            total = await _read_all(ctx, reads, grant, req.API_VERSION >= 10, read_committed)
        except BaseException:
            budget.release(grant)
            raise
        remaining = deadline - ctx.clock.monotonic()
        errored = denied or any(r.error_code != errors.NONE for r in reads)
        if total >= max(req.min_bytes, 1) or remaining <= 0 or errored or not reads:
            return Held(_response(req, every), functools.partial(budget.release, grant))
        budget.release(grant)
        first = reads[0]
        await ctx.agent.watch.wait(first.topic, first.partition, min(remaining, POLL_INTERVAL_S))


# How long a Fetch whose deadline has passed still waits for fetch budget before answering without records.
MIN_BUDGET_WAIT_S = 0.1
# Fetch's isolation_level (v4+): 0 read_uncommitted, 1 read_committed.
READ_COMMITTED = 1
_READ = KAFKA[ApiKey.FETCH].need(TOPIC)


def _nothing() -> None:
    """An answer without records holds no grant."""


async def _states_only(ctx: BrokerContext, reads: list[_Read], read_committed: bool) -> None:
    """No budget in time: each partition's offsets without records (its error, if it has one)."""
    for r in reads:
        try:
            state = await ctx.agent.fetcher.state(r.topic, r.partition)
        except StrataError as exc:
            r.error_code, r.batches = errors.kafka_error(exc), []
            continue
        r.error_code, r.batches = errors.NONE, []
        r.high_watermark, r.log_start_offset = state.high_watermark, state.log_start_offset
        r.last_stable_offset = state.last_stable_offset
        r.aborted = [] if read_committed else None


async def _read_all(
    ctx: BrokerContext, reads: list[_Read], response_max: int, zstd_allowed: bool, read_committed: bool
) -> int:
    """Read every partition at once (one GET per file range, across partitions); bytes returned."""
    wanted = [BatchRead(r.topic, r.partition, r.offset, r.max_bytes, read_committed) for r in reads]
    results = await ctx.agent.fetcher.read_batches_many(wanted, response_max)
    total = 0
    for r, result in zip(reads, results, strict=True):
        if isinstance(result, StrataError):
            r.error_code, r.batches = errors.kafka_fetch_error(result), []
            continue
        r.error_code = errors.NONE
        if not zstd_allowed and await _zstd_topic(ctx, r.topic):
            r.error_code, r.batches = errors.UNSUPPORTED_COMPRESSION_TYPE, []
            continue
        r.batches, r.high_watermark, r.log_start_offset = (
            result.batches,
            result.high_watermark,
            result.log_start_offset,
        )
        r.last_stable_offset, r.aborted = result.last_stable_offset, result.aborted
        total += result.size
    ctx.agent.metrics.fetch_bytes.inc(total)
    return total


async def _zstd_topic(ctx: BrokerContext, topic: str) -> bool:
    """Whether the topic's ``compression.type`` is zstd (the read succeeded, so the topic exists)."""
    cached = ctx.agent.cached_topic(topic)
    if cached is None:
        try:
            cached = await ctx.agent.topic(topic)
        except StrataError:
            return False  # deleted since: the next read says so
    return cached.config.compression_type == "zstd"


@dataclass(slots=True)
class _Answer:
    """The Fetch answer, encoded once the connection knows its correlation id (broker/fetch_codec.py)."""

    version: int
    topics: list[tuple[str, list[FetchedPartition]]]

    def frame(self, correlation_id: int) -> bytes:
        return encode_response(correlation_id, self.version, self.topics)


def _response(req: FetchRequest, reads: list[_Read]) -> _Answer:
    by_topic: dict[str, list[FetchedPartition]] = {}
    for r in reads:
        by_topic.setdefault(r.topic, []).append(
            FetchedPartition(
                r.partition,
                r.error_code,
                r.high_watermark,
                r.log_start_offset,
                r.batches,
                r.last_stable_offset if r.error_code == errors.NONE else -1,
                # As Kafka: a partition refused before its log is read (unknown, not allowed) has an empty
                # list; one whose read failed (an offset out of range) has the read's (null below
                # read_committed).
                r.aborted if r.error_code in (errors.NONE, errors.OFFSET_OUT_OF_RANGE) else [],
            )
        )
    return _Answer(req.API_VERSION, list(by_topic.items()))
