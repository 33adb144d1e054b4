"""The transaction coordinator any agent can be (Kafka's ``TransactionCoordinator``), over the metadata
store's ``TransactionStore``: each call is one metadata transaction, so there is no coordinator election,
no transaction log topic and no marker fan-out; FindCoordinator answers with the agent asked.

What lives here rather than in the store: the limits (``transaction.max.timeout.ms``,
``transactional.id.expiration.ms``), waking this agent's long-polling fetches when markers move a
partition's LSO (other agents see it on their 100 ms re-read), the group checks of TxnOffsetCommit
(``group_state``), the timeout sweep every agent runs (rows another agent is sweeping are skipped), and
the metrics.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from agents import group_state as gs
from agents.group_coordinator import group_of
from agents.metrics import Metrics
from agents.watch import PartitionWatch
from storage.clock import Clock
from storage.errors import StrataError
from storage.metadata.coordination import TransactionStore
from storage.metadata.rows import GroupRow, OffsetToCommit, ProducerIdAndEpoch
from storage.metadata.txn_state import (
    TRANSACTION_MAX_TIMEOUT_MS,
    TRANSACTIONAL_ID_EXPIRATION_MS,
    ActiveProducer,
    EndedTxn,
    Txn,
    TxnDescription,
)

log = logging.getLogger("strata.transactions")


@dataclass(frozen=True, slots=True)
class TxnLimits:
    """Kafka's broker settings for transactions, with its defaults."""

    max_timeout_ms: int = TRANSACTION_MAX_TIMEOUT_MS
    id_expiration_ms: int = TRANSACTIONAL_ID_EXPIRATION_MS


class TransactionCoordinator:
    def __init__(
        self,
        store: TransactionStore,
        clock: Clock,
        watch: PartitionWatch,
        limits: TxnLimits,
        metrics: Metrics,
    ) -> None:
        self.store = store
        self.clock = clock
        self.watch = watch
        self.limits = limits
        self.metrics = metrics

    async def init_producer(
        self, transactional_id: str, timeout_ms: int, expected: ProducerIdAndEpoch | None
    ) -> ProducerIdAndEpoch:
        given, aborted = await asyncio.to_thread(
            self.store.init_transactional_producer,
            transactional_id,
            timeout_ms,
            self.limits.max_timeout_ms,
            expected,
            self.clock.now_ms(),
        )
        if aborted:
            self.metrics.txn_ends.labels("abort").inc()
            self.watch.notify(aborted)
        return given

    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], StrataError]:
        return await asyncio.to_thread(
            self.store.add_partitions_to_txn,
            transactional_id,
            producer_id,
            epoch,
            partitions,
            self.clock.now_ms(),
        )

    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group: str) -> None:
        await asyncio.to_thread(
            self.store.add_offsets_to_txn, transactional_id, producer_id, epoch, group, self.clock.now_ms()
        )

    async def commit_offsets(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        epoch: int,
        member: tuple[str, str | None, int] | None,
        offsets: Sequence[OffsetToCommit],
    ) -> dict[tuple[str, int], StrataError]:
        """TxnOffsetCommit. ``member``: (member id, instance id, generation) from v3 on (KIP-447), checked
        as an OffsetCommit's; before v3 the request names no member and nothing is checked, as Kafka."""

        def check(row: GroupRow | None) -> None:
            if member is not None:
                member_id, instance_id, generation = member
                gs.check_commit(group_of(group_id, row), member_id, instance_id, generation)

        return await asyncio.to_thread(
            self.store.txn_offset_commit,
            transactional_id,
            group_id,
            producer_id,
            epoch,
            check,
            offsets,
            self.clock.now_ms(),
        )

    async def end(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> EndedTxn:
        started = self.clock.monotonic()
        ended = await asyncio.to_thread(
            self.store.end_txn, transactional_id, producer_id, epoch, commit, self.clock.now_ms()
        )
        self.metrics.txn_end_seconds.observe(self.clock.monotonic() - started)
        if ended.changed:
            self.metrics.txn_ends.labels("commit" if commit else "abort").inc()
            self.watch.notify(ended.partitions)
        return ended

    async def sweep(self) -> None:
        """Abort the transactions past their timeout (every agent runs this; each row is swept once)."""
        now = self.clock.now_ms()
        marked = await asyncio.to_thread(self.store.abort_timed_out_transactions, now)
        if marked:
            self.metrics.txn_ends.labels("timeout").inc()
            self.watch.notify(marked)
            log.info("aborted timed-out transactions; %d partition(s) marked", len(marked))
        count, oldest = await asyncio.to_thread(self.store.open_transactions, now)
        self.metrics.txn_open.set(count)
        self.metrics.txn_oldest_open_seconds.set(0 if oldest is None else max(now - oldest, 0) / 1000)

    async def abort(self, transactional_id: str) -> None:
        """An operator's abort (kafka-transactions --abort): fence the producer, abort what it has open."""
        marked = await asyncio.to_thread(self.store.abort_transaction, transactional_id, self.clock.now_ms())
        self.metrics.txn_ends.labels("abort").inc()
        self.watch.notify(marked)

    async def expire(self) -> int:
        before = self.clock.now_ms() - self.limits.id_expiration_ms
        return await asyncio.to_thread(self.store.expire_transactional_ids, before)

    async def describe(self, transactional_id: str) -> TxnDescription:
        return await asyncio.to_thread(self.store.describe_transaction, transactional_id)

    async def list_all(self) -> list[Txn]:
        return await asyncio.to_thread(self.store.list_transactions)

    async def describe_all(self) -> list[TxnDescription]:
        return await asyncio.to_thread(self.store.describe_transactions)

    async def pending_offsets(self, group_id: str) -> set[tuple[str, int]]:
        return await asyncio.to_thread(self.store.pending_txn_offsets, group_id)

    async def producers(self, topic: str, partition: int) -> list[ActiveProducer]:
        return await asyncio.to_thread(self.store.describe_producers, topic, partition)
