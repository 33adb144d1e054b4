"""The metadata roles the coordinators any agent can play use: consumer groups (``GroupStore``), idempotent
producers' ids (``ProducerStore``), transactions (``TransactionStore``), and the agents shown to Kafka
clients as one cluster (``AgentRegistry``). Part of ``storage.metadata.base``'s roles; the lost-race rule
there holds here too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from storage.errors import StrataError
from storage.metadata.rows import (
    GroupOffset,
    GroupRow,
    LiveAgent,
    OffsetToCommit,
    ProducerIdAndEpoch,
)
from storage.metadata.txn_state import ActiveProducer, EndedTxn, Txn, TxnDescription

T = TypeVar("T")


class GroupStore(Protocol):
    """Consumer group coordinator state: one row per group, changed only by ``update_group``'s
    read-modify-write, so any agent coordinates any group (agents/group_coordinator.py)."""

    def expire_group_offsets(self, now_ms: int, retention_ms: int) -> int:
        """Kafka's offsets.retention.minutes: a group Empty for ``retention_ms`` loses its offsets and its
        row (Kafka's group goes Dead); offsets committed without a group expire one by one,
        ``retention_ms`` after their commit. Returns the offsets removed."""
        ...

    def update_group(self, group: str, change: Callable[[GroupRow | None], tuple[GroupRow | None, T]]) -> T:
        """In one write transaction holding the group's row: ``change`` gets the stored row (None if
        none) and returns the row to store (None deletes it) and a result, which this returns. Nothing is
        written when ``change`` raises, or returns the row it got."""
        ...

    def load_group(self, group: str) -> GroupRow | None: ...

    def group_offsets(self, group: str) -> list[GroupOffset]: ...

    def list_groups(self, active_only: bool = False) -> list[tuple[str, GroupRow | None]]:
        """Every group with a state row or committed offsets (None: offsets only), by group id; with
        ``active_only``, only the groups whose phase is not Empty (what the sweep needs)."""
        ...

    def commit_group_offsets(
        self,
        group: str,
        offsets: Sequence[tuple[str, int, int]],
        now_ms: int,
        check: Callable[[GroupRow | None], None] | None = None,
    ) -> None:
        """Upsert (topic, partition, offset) for the group, all or nothing. Raises UnknownTopic/
        UnknownPartition. ``check`` gets the group's coordinator row in the same transaction (None if it
        has none) and refuses by raising; then nothing is written."""
        ...

    def commit_offsets(
        self,
        group: str,
        check: Callable[[GroupRow | None], None],
        offsets: Sequence[OffsetToCommit],
        now_ms: int,
    ) -> dict[tuple[str, int], StrataError]:
        """Upsert the offsets of existing partitions in one transaction, after ``check`` accepted the
        group's row as it is while the row is held (a raise commits nothing). Returns the partitions
        refused (UnknownTopic, UnknownPartition); the others are committed."""
        ...

    def delete_group(self, group: str, check: Callable[[GroupRow | None], None]) -> bool:
        """Delete the group's row and committed offsets if ``check`` accepts the row; False if the group
        had neither."""
        ...

    def delete_group_offsets(
        self, group: str, check: Callable[[GroupRow | None], None], partitions: Sequence[tuple[str, int]]
    ) -> None:
        """OffsetDelete: forget the group's offsets of ``partitions`` if ``check`` accepts the row."""
        ...


class ProducerStore(Protocol):
    """Idempotent producers' ids and epochs. The sequence checks run inside ``LogStore.commit_flush``, and
    ``LogStore.expire_producers`` forgets both."""

    def init_producer_id(self, current: ProducerIdAndEpoch | None, now_ms: int) -> ProducerIdAndEpoch:
        """A new producer id at epoch 0, or, for ``current`` (KIP-360), the same id at the next epoch.

        ``current`` is an id this store handed out and not yet forgot: at its latest epoch or newer,
        the epoch is bumped (a new id at epoch 0 once the epoch is exhausted); at the epoch before the
        latest, it is a retry of the bump that produced the latest, which is returned unchanged. Older
        epochs raise ProducerFenced. An id the store does not know gets a new id.
        """
        ...


class TransactionStore(Protocol):
    """Kafka's transaction coordinator as rows (``sql/transactions.py``; the rules in ``txn_state``): each
    method is one SQL transaction, so any agent coordinates any transactional id. The producer checks
    raise InvalidProducerIdMapping and ProducerFenced; the state checks InvalidTxnState."""

    def init_transactional_producer(
        self,
        transactional_id: str,
        timeout_ms: int,
        max_timeout_ms: int,
        expected: ProducerIdAndEpoch | None,
        now_ms: int,
    ) -> tuple[ProducerIdAndEpoch, list[tuple[str, int]]]:
        """InitProducerId with a transactional id: the producer id and epoch to use, and the partitions
        that got an ABORT marker (an open transaction of the previous incarnation, aborted first)."""
        ...

    def add_partitions_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Sequence[tuple[str, int]],
        now_ms: int,
    ) -> dict[tuple[str, int], StrataError]:
        """Add the partitions to the open transaction (opening one), all or none: the unknown ones are
        returned, and then none is added."""
        ...

    def add_offsets_to_txn(
        self, transactional_id: str, producer_id: int, epoch: int, group: str, now_ms: int
    ) -> None:
        """Add the group to the open transaction (opening one)."""
        ...

    def txn_offset_commit(
        self,
        transactional_id: str,
        group: str,
        producer_id: int,
        epoch: int,
        check: Callable[[GroupRow | None], None],
        offsets: Sequence[OffsetToCommit],
        now_ms: int,
    ) -> dict[tuple[str, int], StrataError]:
        """Offsets pending until the transaction ends, after ``check`` accepted the group's row; the
        partitions refused (unknown) are returned."""
        ...

    def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool, now_ms: int
    ) -> EndedTxn:
        """Commit or abort the open transaction: markers, the aborted index, the pending offsets."""
        ...

    def abort_timed_out_transactions(self, now_ms: int, limit: int = 100) -> list[tuple[str, int]]:
        """Abort (and fence) the transactions open longer than their timeout; the partitions marked."""
        ...

    def abort_transaction(self, transactional_id: str, now_ms: int) -> list[tuple[str, int]]:
        """Fence the producer and abort its open transaction (an operator's abort); the partitions marked.
        Raises TransactionalIdNotFound, or InvalidTxnState when nothing is open."""
        ...

    def expire_transactional_ids(self, before_ms: int) -> int: ...

    def open_transactions(self, now_ms: int) -> tuple[int, int | None]:
        """How many transactions are open, and when the oldest began (None: none is open)."""
        ...

    def describe_transaction(self, transactional_id: str) -> TxnDescription:
        """Raises TransactionalIdNotFound."""
        ...

    def list_transactions(self) -> list[Txn]: ...

    def describe_transactions(self) -> list[TxnDescription]:
        """Every transactional id described, by id: ``describe_transaction`` for all of them in one read."""
        ...

    def pending_txn_offsets(self, group: str) -> set[tuple[str, int]]:
        """The partitions with offsets of an open transaction for ``group``."""
        ...

    def describe_producers(self, topic: str, partition: int) -> list[ActiveProducer]:
        """The producers the partition remembers; raises UnknownTopic/UnknownPartition."""
        ...


class AgentRegistry(Protocol):
    """Agents shown to Kafka clients as one cluster (broker/cluster.py)."""

    def register_agent(
        self, agent_id: str, host: str, port: int, wanted_node_id: int, now_ms: int, timeout_ms: int
    ) -> int:
        """Register or heartbeat ``agent_id``; returns its node id: the one it has, else ``wanted_node_id``
        if no live agent holds it, else the smallest free one. Rows not heartbeaten for ``timeout_ms`` are
        deleted first (dead agents)."""
        ...

    def live_agents(self, now_ms: int, timeout_ms: int) -> list[LiveAgent]:
        """Agents heartbeaten within ``timeout_ms``, by node id."""
        ...

    def deregister_agent(self, agent_id: str) -> None: ...
