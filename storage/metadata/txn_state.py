"""A transactional id's coordinator state and Kafka's rules on it (``TransactionCoordinator``), sans IO.

The SQL layer (``sql/transactions.py``) reads a ``Txn`` under its row lock, asks these functions what a
request may do, and writes the outcome in the same transaction. The rules are transaction version 1's
(KIP-98), the version every client Strata serves speaks:
- InitProducerId: a timeout outside 1..``transaction.max.timeout.ms`` is INVALID_TRANSACTION_TIMEOUT. A new
  id gets a new producer id at epoch 0; a known one the same id at the next epoch (a new id at epoch 0 once
  the epoch is exhausted), which fences every earlier incarnation. With the caller's producer id and
  epoch (KIP-360): the current pair is bumped, the pair before it (a bump whose answer was lost) is
  answered with the current one again, any other pair is PRODUCER_FENCED. An open transaction is aborted
  first, in the same metadata transaction (Kafka answers CONCURRENT_TRANSACTIONS and aborts behind it;
  every client retries that, so answering at once differs only by a round trip).
- AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit: an unknown id, or another producer id, is
  INVALID_PRODUCER_ID_MAPPING; another epoch is PRODUCER_FENCED (the handlers answer
  INVALID_PRODUCER_EPOCH to versions before KIP-588's).
- EndTxn: Ongoing ends as asked; a repeat of the end that happened (a retry whose answer was lost) is
  NONE; anything else, Empty included, is INVALID_TXN_STATE.
Kafka's Prepare states do not exist here: one SQL transaction takes Ongoing to CompleteCommit or
CompleteAbort, so no request ever finds a transaction half ended (no CONCURRENT_TRANSACTIONS for that).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from storage.errors import (
    InvalidProducerIdMapping,
    InvalidTransactionTimeout,
    InvalidTxnState,
    ProducerFenced,
)
from storage.metadata.rows import ProducerIdAndEpoch

# Kafka's TransactionMetadata.isEpochExhausted: at this epoch or above, a bump hands out a new id instead.
EPOCH_EXHAUSTED = 2**15 - 2
# Kafka's broker defaults.
TRANSACTION_MAX_TIMEOUT_MS = 900_000
TRANSACTIONAL_ID_EXPIRATION_MS = 7 * 24 * 3600 * 1000


class TxnState(StrEnum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


@dataclass(frozen=True, slots=True)
class Txn:
    """One ``transactions`` row."""

    transactional_id: str
    producer_id: int
    epoch: int
    last_producer_id: int
    last_epoch: int
    state: TxnState
    timeout_ms: int
    started_ms: int | None
    updated_ms: int


@dataclass(frozen=True, slots=True)
class TxnPartition:
    """A partition of an open transaction; ``first_offset`` None until a flush commit wrote data there."""

    topic: str
    partition: int
    first_offset: int | None


@dataclass(frozen=True, slots=True)
class TxnDescription:
    """A transaction as DescribeTransactions and ListTransactions show it."""

    txn: Txn
    partitions: list[TxnPartition] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A COMMIT or ABORT marker: one offset of a partition, served as a control batch by Kafka's Fetch."""

    offset: int
    producer_id: int
    epoch: int
    is_commit: bool
    timestamp_ms: int
    # Set by the clean that first found none of the transaction's records left (compacted partitions):
    # a clean after it drops the marker. None: not yet.
    delete_horizon_ms: int | None = None


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction's range in a partition: its first offset and its ABORT marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """A producer a partition remembers, as DescribeProducers shows it."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp_ms: int
    txn_start_offset: int  # -1: no open transaction here


@dataclass(frozen=True, slots=True)
class EndedTxn:
    """What EndTxn did: the partitions that got a marker (their readers are woken), and whether anything
    changed (False for a repeated end, which is answered NONE)."""

    partitions: list[tuple[str, int]]
    changed: bool


def check_timeout(timeout_ms: int, max_timeout_ms: int) -> None:
    if not 0 < timeout_ms <= max_timeout_ms:
        raise InvalidTransactionTimeout(
            f"transaction.timeout.ms {timeout_ms} is not in 1..{max_timeout_ms} (transaction.max.timeout.ms)"
        )


def next_incarnation(txn: Txn, expected: ProducerIdAndEpoch | None) -> tuple[ProducerIdAndEpoch | None, bool]:
    """InitProducerId on a known id: (the pair to hand out, None for a new producer id at epoch 0;
    whether it is a retry, answered with the current pair and nothing changed)."""
    if expected is not None:
        current = (txn.producer_id, txn.epoch)
        if (expected.producer_id, expected.epoch) == (txn.last_producer_id, txn.last_epoch) != current:
            return ProducerIdAndEpoch(txn.producer_id, txn.epoch), True
        if (expected.producer_id, expected.epoch) != current:
            raise ProducerFenced(
                f"transactional id {txn.transactional_id!r}: producer {expected.producer_id} epoch"
                f" {expected.epoch} was replaced by producer {txn.producer_id} epoch {txn.epoch}"
            )
    if txn.epoch >= EPOCH_EXHAUSTED:
        return None, False
    return ProducerIdAndEpoch(txn.producer_id, txn.epoch + 1), False


def bumped(txn: Txn, to: ProducerIdAndEpoch, now_ms: int, retry_from_current: bool) -> Txn:
    """``txn`` given to ``to``, its transaction (ended already) forgotten: state Empty.

    ``retry_from_current``: the producer that holds the current pair asked for the bump (KIP-360), so a
    retry with that pair is answered with ``to`` again. A new incarnation (no pair given) and a fence
    leave no pair to retry with, as Kafka's ``prepareIncrementProducerEpoch``: otherwise a zombie could
    present its old pair and be handed the new producer's epoch.
    """
    last = (txn.producer_id, txn.epoch) if retry_from_current else (-1, -1)
    return replace(
        txn,
        producer_id=to.producer_id,
        epoch=to.epoch,
        last_producer_id=last[0],
        last_epoch=last[1],
        state=TxnState.EMPTY,
        started_ms=None,
        updated_ms=now_ms,
    )


def fenced_pair(txn: Txn) -> ProducerIdAndEpoch | None:
    """The pair a fence moves ``txn`` to (an aborting sweep): the next epoch, None once exhausted (then
    the row gets a new producer id)."""
    if txn.epoch >= EPOCH_EXHAUSTED:
        return None
    return ProducerIdAndEpoch(txn.producer_id, txn.epoch + 1)


def check_producer(txn: Txn | None, transactional_id: str, producer_id: int, epoch: int) -> Txn:
    """The row, if the request's producer id and epoch are its current ones."""
    if txn is None:
        raise InvalidProducerIdMapping(f"transactional id {transactional_id!r} is unknown; initialise it")
    if producer_id != txn.producer_id:
        raise InvalidProducerIdMapping(
            f"transactional id {transactional_id!r} belongs to producer {txn.producer_id}, not {producer_id}"
        )
    if epoch != txn.epoch:
        raise ProducerFenced(
            f"transactional id {transactional_id!r}: epoch {epoch} was replaced by epoch {txn.epoch}"
        )
    return txn


def begun(txn: Txn, now_ms: int) -> Txn:
    """``txn`` with a transaction open (AddPartitionsToTxn, AddOffsetsToTxn); an open one stays as it is."""
    if txn.state is TxnState.ONGOING:
        return txn
    return replace(txn, state=TxnState.ONGOING, started_ms=now_ms, updated_ms=now_ms)


def end_decision(txn: Txn, commit: bool) -> bool:
    """EndTxn: True to end the open transaction, False for a repeated end (NONE); else INVALID_TXN_STATE."""
    if txn.state is TxnState.ONGOING:
        return True
    if (txn.state, commit) in ((TxnState.COMPLETE_COMMIT, True), (TxnState.COMPLETE_ABORT, False)):
        return False
    wanted = "commit" if commit else "abort"
    raise InvalidTxnState(
        f"transactional id {txn.transactional_id!r} is {txn.state.value}; it has no transaction to {wanted}"
    )


def ended(txn: Txn, commit: bool, now_ms: int) -> Txn:
    state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    return replace(txn, state=state, started_ms=None, updated_ms=now_ms)


def timed_out(txn: Txn, now_ms: int) -> bool:
    return (
        txn.state is TxnState.ONGOING
        and txn.started_ms is not None
        and now_ms > txn.started_ms + txn.timeout_ms
    )
