"""The stateless agent: takes produce requests, flushes them as one file per interval, serves fetches.

"Stateless" means nothing here must survive a restart: records are acknowledged only after their flush is
committed to the metadata store, and every cache can be dropped. Any number of agents can share one bucket
and one metadata store.

The agent core is front-door neutral: ``produce`` takes a ``ProduceRequest`` that is already validated,
partitioned and encoded, plus the memory ``Reservation`` the front door took before reading it
(agents/buffer.py). HTTP builds requests with ``prepare`` (agents/encode.py); Kafka clients send encoded
batches.

Flush trigger: the flush policy of the buffered topics' classes (agents/flush_policy.py: an interval, a
size, an idle cut, and the low-latency class's bound). Up to ``inflight_flushes`` flushes may upload and
commit at once; the buffer keeps filling meanwhile, bounded by ``buffer_bytes`` (open + in flight).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.buffer import PendingFlush, PendingRequest, ProduceBuffer, ProduceRequest, Reservation
from agents.cache import ObjectCache
from agents.chunks import ChunksResult, FetchResult
from agents.encode import ProduceRecord, RequestEncoder
from agents.fetch import Fetcher
from agents.flush_policy import (
    FLUSH_CLASSES,
    LOW_LATENCY,
    LOW_LATENCY_PIPELINE_BYTES,
    STANDARD,
    FlushCause,
    FlushPolicy,
    pipeline_full,
)
from agents.flusher import Flusher
from agents.group_coordinator import GroupCoordinator
from agents.group_model import GroupLimits
from agents.housekeeping import group_sweep, housekeeping
from agents.inflight import InflightAppends, append_key
from agents.metrics import Metrics
from agents.offsets import RecordOffsets
from agents.sequencer import CommitSequencer
from agents.transactions import TransactionCoordinator, TxnLimits
from agents.watch import PartitionWatch
from storage.clock import Clock
from storage.errors import SettingsError, StrataError, Unavailable, UnknownTopic
from storage.metadata.base import AgentMetadata
from storage.metadata.rows import PRODUCER_ID_EXPIRATION_MS, TopicInfo
from storage.objectstore.base import AsyncObjectStore
from storage.topic_config import FLUSH_CLASS, TopicConfig

log = logging.getLogger("strata.agent")

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class AgentConfig:
    flush_interval_ms: int = 250
    flush_bytes: int = 8 * MiB
    # The idle cut: a buffer holding at least flush_idle_bytes is cut once no request has arrived for
    # flush_idle_ms (0 turns it off). Producers that wait for their acks before sending more stop sending
    # once their requests are all in the buffer, and waiting out the interval then only adds latency. An
    # idempotent librdkafka producer is the common case: it keeps one request in flight per partition
    # (docs/benchmarks.md), so its bytes in flight are about partitions x batch.size and its throughput
    # that over the ack latency. Under steady load from many producers requests keep arriving and the cut
    # never fires; below flush_idle_bytes it never fires either, so a trickle still waits for the
    # interval and PUTs stay at most one per flush_idle_bytes. 3 MiB, not 4: one such producer with
    # librdkafka's defaults (5 requests in flight, batch.size 1 MB) holds at most 5 MB and often barely
    # more than 4 MiB, and at a 4 MiB floor a round that fell short waited out the interval
    # (docs/benchmarks.md). The floor is for stores that charge per request (S3); on a local directory
    # the process default is 0 (strata/settings.py, ``idle_flush_floor``): a producer that waits for its
    # acks is answered once the quiet passes, whatever it sent.
    flush_idle_ms: int = 5
    flush_idle_bytes: int = 3 * MiB
    # The low-latency class's bound, and the class of topics that set none (agents/flush_policy.py).
    low_latency_ms: int = 20
    default_flush_class: str = STANDARD
    buffer_bytes: int = 64 * MiB
    cache_bytes: int = 64 * MiB
    # At least this many flushes may upload at once; more when the buffer holds more flush-size files
    # (``inflight_flushes``).
    max_inflight_flushes: int = 4
    idempotency_window_ms: int = 3_600_000
    topic_cache_ttl_s: float = 1.0
    # Kafka's producer.id.expiration.ms: how long idempotent producer state outlives its last append.
    producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS
    # Consumer groups: Kafka's group.* broker settings, and how often this agent applies due expiries and
    # rebalance deadlines to every group (a group whose members all died is moved on by some agent).
    group_limits: GroupLimits = field(default_factory=GroupLimits)
    group_sweep_interval_s: float = 1.0
    # Transactions: Kafka's transaction.max.timeout.ms and transactional.id.expiration.ms. Timed-out
    # transactions are aborted by the group sweep's loop, at its interval.
    txn_limits: TxnLimits = field(default_factory=TxnLimits)

    def __post_init__(self) -> None:
        for name in ("flush_interval_ms", "flush_bytes", "buffer_bytes"):
            if getattr(self, name) <= 0:
                raise SettingsError(f"STRATA_{name.upper()} must be positive, got {getattr(self, name)}")
        if self.flush_idle_bytes < 0:
            raise SettingsError(
                f"STRATA_FLUSH_IDLE_BYTES must be 0 (no floor) or more, got {self.flush_idle_bytes}"
            )
        if self.flush_idle_ms < 0:
            raise SettingsError(f"STRATA_FLUSH_IDLE_MS must be 0 (off) or positive, got {self.flush_idle_ms}")
        if self.low_latency_ms < 0:
            raise SettingsError(f"STRATA_LOW_LATENCY_MS must be 0 or positive, got {self.low_latency_ms}")
        if self.default_flush_class not in FLUSH_CLASSES:
            raise SettingsError(
                f"STRATA_FLUSH_CLASS must be one of {', '.join(FLUSH_CLASSES)},"
                f" got {self.default_flush_class!r}"
            )

    @property
    def flush_policy(self) -> FlushPolicy:
        return FlushPolicy(
            interval_s=self.flush_interval_ms / 1000,
            flush_bytes=self.flush_bytes,
            idle_s=self.flush_idle_ms / 1000,
            idle_bytes=self.flush_idle_bytes,
            low_latency_s=self.low_latency_ms / 1000,
        )

    @property
    def inflight_flushes(self) -> int:
        """Flushes that may upload at once: enough that the buffer's bound, not this count, is what stops
        cutting. With fewer, a backlog behind slow uploads grows into one file as large as the whole buffer,
        and a remote store's upload joins it into a second copy of that size (on S3 under overload, RSS
        jumped by about the flush's size at once); with these, files stay near ``flush_bytes``."""
        return max(self.max_inflight_flushes, -(-self.buffer_bytes // max(self.flush_bytes, 1)))


@dataclass(frozen=True, slots=True)
class CachedTopic:
    info: TopicInfo
    config: TopicConfig
    expires: float


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        store: AsyncObjectStore,
        metadata: AgentMetadata,
        metrics: Metrics,
        clock: Clock,
        rng: random.Random,
    ) -> None:
        self.config = config
        self.store = store
        self.metadata = metadata
        self.metrics = metrics
        self.clock = clock
        self.rng = rng
        self.buffer = ProduceBuffer(config.buffer_bytes)
        # The cache uses what the produce buffer does not: record memory stays within buffer_bytes.
        buffer = self.buffer
        self.cache = ObjectCache(config.cache_bytes, room=lambda: buffer.max_bytes - buffer.bytes_held)
        buffer.grew = self.cache.make_room
        self.watch = PartitionWatch()
        self.encoder = RequestEncoder(rng)
        self.sequencer = CommitSequencer()
        self.flusher = Flusher(
            store,
            metadata,
            self.cache,
            self.watch,
            metrics,
            clock,
            rng,
            self.sequencer,
            config.producer_id_expiration_ms,
        )
        self.fetcher = Fetcher(store, metadata, self.cache, self.watch, clock)
        self.groups = GroupCoordinator(metadata, clock, config.group_limits)
        self.transactions = TransactionCoordinator(metadata, clock, self.watch, config.txn_limits, metrics)
        self._topics: dict[str, CachedTopic] = {}
        self._reloads: dict[str, asyncio.Task[None]] = {}
        self._inflight_keys: dict[str, asyncio.Future[RecordOffsets]] = {}
        self._inflight_appends = InflightAppends()
        self._wakeup = asyncio.Event()
        # Flush slots: a count, not a semaphore, so that a size-triggered cut can take one synchronously.
        self._free_slots = config.inflight_flushes
        self._idle_cut = config.flush_idle_ms > 0
        self._policy = config.flush_policy
        # Set by ``senders_waiting`` until the next append or cut: the idle cut need not wait for quiet.
        self._senders_waiting = False
        # Set when the pipeline's allowed depth may have changed: a flush ended, or the buffer crossed
        # LOW_LATENCY_PIPELINE_BYTES. A cut waiting for a shallower pipeline re-checks on it.
        self._depth_changed = asyncio.Event()
        self._flush_tasks: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._housekeeping_task: asyncio.Task[None] | None = None
        self._sweep_task: asyncio.Task[None] | None = None
        self._closing = False
        # The event loop the agent runs on, once started: ``enqueue`` makes a future per request, and
        # ``asyncio.get_running_loop`` costs a getpid system call each time (Python 3.11).
        self._event_loop: asyncio.AbstractEventLoop | None = None
        metrics.bind_gauges(lambda: self.buffer.bytes_held, lambda: self.cache.size)

    # --- lifecycle ---------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._event_loop = asyncio.get_running_loop()
        self._loop_task = asyncio.create_task(self._flush_loop(), name="strata-flush-loop")
        self._housekeeping_task = asyncio.create_task(housekeeping(self), name="strata-housekeeping")
        self._sweep_task = asyncio.create_task(group_sweep(self), name="strata-group-sweep")

    async def close(self) -> None:
        """Flush what is buffered, wait for in-flight flushes, stop the loops."""
        self._closing = True
        self._wakeup.set()
        if self._loop_task is not None:
            await self._loop_task
        for task in (self._housekeeping_task, self._sweep_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        reloads = list(self._reloads.values())
        for task in reloads:
            task.cancel()
        await asyncio.gather(*reloads, return_exceptions=True)
        if self._flush_tasks:
            await asyncio.gather(*self._flush_tasks)

    # --- topics ------------------------------------------------------------------------------------------
    async def topic(self, name: str) -> CachedTopic:
        cached = self._topics.get(name)
        now = self.clock.monotonic()
        if cached is not None and cached.expires > now:
            return cached
        info = await asyncio.to_thread(self.metadata.get_topic, name)
        cached = CachedTopic(
            info, TopicConfig.from_overrides(info.configs), now + self.config.topic_cache_ttl_s
        )
        self._topics[name] = cached
        return cached

    def cached_topic(self, name: str) -> CachedTopic | None:
        """The topic from the cache without waiting, or None if it was never loaded (or was forgotten).

        An entry past its time to live is still returned, and a reload starts in the background: a front
        door admitting requests synchronously never waits for the metadata store while the topic is known.
        A config change or a topic deletion therefore takes effect on this path one reload later than on
        ``topic``; a produce to a deleted topic still fails at its commit.
        """
        cached = self._topics.get(name)
        if cached is not None and cached.expires <= self.clock.monotonic() and name not in self._reloads:
            task = asyncio.get_running_loop().create_task(self._reload_topic(name))
            self._reloads[name] = task
            task.add_done_callback(lambda _: self._reloads.pop(name, None))
        return cached

    async def _reload_topic(self, name: str) -> None:
        try:
            await self.topic(name)
        except UnknownTopic:
            self._topics.pop(name, None)
        except StrataError as exc:
            log.warning("reloading topic %r failed: %s", name, exc.message)

    def forget_topic(self, name: str) -> None:
        self._topics.pop(name, None)

    # --- produce -----------------------------------------------------------------------------------------
    async def prepare(self, topic: str, recs: Sequence[ProduceRecord]) -> ProduceRequest:
        """Validate, partition and encode records against the topic's current configuration."""
        return self.encode(await self.topic(topic), recs)

    def encode(self, cached: CachedTopic, recs: Sequence[ProduceRecord]) -> ProduceRequest:
        """``prepare`` against a topic the caller already looked up, without waiting."""
        return self.encoder.encode(cached.info, cached.config, recs, self.clock.now_ms())

    def encode_text(self, cached: CachedTopic, items: list[Any]) -> ProduceRequest | None:
        """``encode`` for records given as text (``RequestEncoder.encode_text``); None: use ``encode``."""
        return self.encoder.encode_text(cached.info, cached.config, items, self.clock.now_ms())

    async def produce_records(
        self, topic: str, recs: Sequence[ProduceRecord], idempotency_key: str | None = None
    ) -> list[tuple[int, int]]:
        """``prepare`` + ``produce`` for in-process callers that hold no reservation of their own."""
        reservation = self.buffer.reserve(0)  # refused at once if the buffer is already full
        offsets = await self.produce(await self.prepare(topic, recs), reservation, idempotency_key)
        return offsets.pairs()

    async def produce(
        self, request: ProduceRequest, reservation: Reservation, idempotency_key: str | None = None
    ) -> RecordOffsets:
        """Buffer a validated, encoded request; wait for its flush to commit; (partition, offset) per record.

        ``reservation`` is the memory the front door reserved for this request: the buffer consumes the
        request's size of it when the request enters the buffer, and the rest is released then; on every
        other path all of it is released here.
        """
        started = self.clock.monotonic()
        try:
            offsets = await self._produce(request, reservation, idempotency_key)
        finally:
            reservation.release()
        self.metrics.produce_records.inc(len(offsets))
        self.metrics.produce_latency.observe(self.clock.monotonic() - started)
        return offsets

    async def _produce(
        self, request: ProduceRequest, reservation: Reservation, idempotency_key: str | None
    ) -> RecordOffsets:
        if idempotency_key is None:
            queued = self.enqueue(request, reservation)
            # The request's bytes now count in the buffer; what else its front door reserved (an HTTP
            # body's parse expansion) is not held while it waits for the flush.
            reservation.release()
            # Shielded: a client that disconnects must not cancel the flush's bookkeeping.
            return await asyncio.shield(queued)
        future: asyncio.Future[RecordOffsets] = asyncio.get_running_loop().create_future()
        inflight = self._inflight_keys.get(idempotency_key)
        if inflight is not None:
            return await asyncio.shield(inflight)  # same key already on its way on this agent
        # Registered before the first await, so concurrent duplicates on this agent find it.
        self._inflight_keys[idempotency_key] = future
        future.add_done_callback(lambda _: self._inflight_keys.pop(idempotency_key, None))
        settled = False  # True once the future has an answer or belongs to a queued request
        try:
            not_before = self.clock.now_ms() - self.config.idempotency_window_ms
            previous = await asyncio.to_thread(self.metadata.lookup_idempotency, idempotency_key, not_before)
            if previous is not None:
                future.set_result(RecordOffsets.of_pairs(previous))
            else:
                self._enqueue(PendingRequest(request, idempotency_key, future), reservation)
            reservation.release()  # as above: only the queued bytes stay counted
            settled = True
        except StrataError as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: this request re-raises it below
            raise
        finally:
            if not settled and not future.done():  # cancelled before reaching the buffer
                future.set_exception(Unavailable("the original request was cancelled"))
                future.exception()
        # Shielded: a client that disconnects must not cancel a future other duplicates wait on.
        return await asyncio.shield(future)

    def enqueue(self, request: ProduceRequest, reservation: Reservation) -> asyncio.Future[RecordOffsets]:
        """Put ``request`` in the buffer now, consuming ``reservation``; the future gets its offsets.

        Synchronous, so a front door that admits a connection's requests one after another keeps their
        order. BufferFull if it does not fit; the reservation is then kept.

        A resend of an idempotent producer's append that is still in flight here follows the original's
        outcome and takes no buffer space (agents/inflight.py).
        """
        key = append_key(request)
        if key is not None and (follower := self._inflight_appends.follow(key)) is not None:
            return follower
        loop = self._event_loop or asyncio.get_running_loop()
        future: asyncio.Future[RecordOffsets] = loop.create_future()
        self._enqueue(PendingRequest(request, None, future), reservation)
        if key is not None:
            self._inflight_appends.track(key, future)
        return future

    def senders_waiting(self) -> None:
        """A front door's word that every sender it has is waiting for acks and can send nothing more
        before a flush answers some (Kafka's idempotent producers keep at most 5 requests in flight:
        broker/waiting.py). The idle cut then applies at once instead of after ``flush_idle_ms`` of quiet:
        the quiet is certain, and waiting it out only delays the acks that let the senders go on. Holds
        until the next append or cut; the floor (``flush_idle_bytes``) still applies."""
        if self._idle_cut and not self._senders_waiting:
            self._senders_waiting = True
            if self.buffer.open_bytes >= self.config.flush_idle_bytes:
                self._wakeup.set()

    @property
    def config_defaults(self) -> dict[str, str]:
        """Topic configs whose default is this agent's (shown by DescribeConfigs and the HTTP API)."""
        return {FLUSH_CLASS: self.config.default_flush_class}

    def flush_class(self, topic: str) -> str:
        """The topic's flush class: its ``strata.flush.class``, else this agent's default."""
        cached = self._topics.get(topic)
        chosen = cached.config.flush_class if cached is not None else None
        return chosen or self.config.default_flush_class

    def _enqueue(self, pending: PendingRequest, reservation: Reservation) -> None:
        urgent_before = self.buffer.urgent_at
        urgent = self.flush_class(pending.topic) == LOW_LATENCY
        self.buffer.add(pending, reservation, self.clock.monotonic(), urgent)
        self._senders_waiting = False
        open_bytes = self.buffer.open_bytes
        full = open_bytes >= self.config.flush_bytes
        if full and self._free_slots:
            # The size trigger cuts at once. Left to the flush loop's next turn, it let in whatever the
            # event loop read before that turn came: under heavy load, files far past the trigger, too
            # large for the fetch path's whole-file reads.
            self._cut(FlushCause.STANDARD)
        elif full or len(self.buffer) == 1 or (urgent and urgent_before is None):
            self._wakeup.set()  # a new deadline: the buffer's first record, or its first urgent one
        elif self._idle_cut and open_bytes - pending.size < self.config.flush_idle_bytes <= open_bytes:
            self._wakeup.set()  # the idle cut's deadline now applies
        if open_bytes - pending.size < LOW_LATENCY_PIPELINE_BYTES <= open_bytes:
            self._depth_changed.set()  # a low-latency cut waiting for the first flush may now overlap it

    # --- flushing ----------------------------------------------------------------------------------------
    async def _flush_loop(self) -> None:
        while True:
            if len(self.buffer) == 0:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            deadline, cause = self._deadline()
            remaining = deadline - self.clock.monotonic()
            if remaining > 0 and not self._closing:
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), remaining)
                except TimeoutError:
                    pass
                continue
            # Wait for a flush slot before draining, so the buffer keeps growing while uploads are busy. A
            # low-latency cut waits for a shallower pipeline (agents/flush_policy.py, low_latency_depth).
            # Then look again: a flush that ended may have cut the buffer already (``_flush``).
            if self._pipeline_full(cause):
                self._depth_changed.clear()
                await self._depth_changed.wait()
                continue
            self._cut(cause)

    def _deadline(self) -> tuple[float, FlushCause]:
        """When the open buffer (not empty) is due to be cut, and the class the cut counts under."""
        b = self.buffer
        assert b.first_append_at is not None  # the buffer is not empty
        assert b.last_append_at is not None
        return self._policy.deadline(
            b.open_bytes, b.first_append_at, b.last_append_at, b.urgent_at, self._senders_waiting
        )

    def _pipeline_full(self, cause: FlushCause) -> bool:
        in_flight = self.config.inflight_flushes - self._free_slots
        return pipeline_full(cause, self.buffer.open_bytes, in_flight, self.config.inflight_flushes)

    def _cut(self, cause: FlushCause) -> None:
        """Drain the open buffer into a flush of its own, in a free slot; ``cause``: the class it counts
        under."""
        self._senders_waiting = False
        self._free_slots -= 1
        first = self.buffer.first_append_at
        if first is not None:
            self.metrics.flush_step_seconds.labels("buffered").observe(self.clock.monotonic() - first)
        pending = self.buffer.drain()
        pending.flush_class = cause.value
        self._start_flush(pending)

    def _start_flush(self, pending: PendingFlush) -> None:
        # Not inline in _flush_loop: a local there would keep the last flush's requests (and their bytes,
        # no longer counted by the buffer) alive while the loop waits for the next one.
        task = asyncio.create_task(self._flush(pending))
        self._flush_tasks.add(task)
        task.add_done_callback(self._flush_tasks.discard)

    async def _flush(self, pending: PendingFlush) -> None:
        try:
            await self.flusher.flush(pending)
        finally:
            self.buffer.release(pending)
            self._free_slots += 1
            self._depth_changed.set()
            if self.buffer.open_bytes >= self.config.flush_bytes:
                self._wakeup.set()  # a size cut waited for this slot
        # A due cut that waited for this slot is made in this turn of the event loop, not a turn later by
        # the flush loop, behind every request read meanwhile (a low-latency buffer's usual cut).
        if len(self.buffer) and not self._closing:
            deadline, cause = self._deadline()
            if deadline <= self.clock.monotonic() and not self._pipeline_full(cause):
                self._cut(cause)

    # --- fetch -------------------------------------------------------------------------------------------
    async def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int
    ) -> FetchResult:
        return await self.fetcher.fetch(topic, partition, offset, max_bytes, max_wait_ms)

    async def fetch_chunks(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int,
        max_wait_ms: int,
        read_committed: bool = False,
    ) -> ChunksResult:
        """``fetch`` without decoding (see ``agents.chunks.ChunksResult``)."""
        return await self.fetcher.fetch_chunks(
            topic, partition, offset, max_bytes, max_wait_ms, read_committed
        )
