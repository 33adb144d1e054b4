"""Kafka's transaction errors (storage/metadata/txn_state.py), by their Kafka names."""

from __future__ import annotations

from storage.errors.base import ErrorKind, StrataError
from storage.errors.races import Conflict


class InvalidTxnState(StrataError):
    """The request does not fit the transaction's state (INVALID_TXN_STATE): ending a transaction that
    has not begun or ended the other way, or a transactional batch for a partition that is not in the
    producer's open transaction (KIP-890 part 1). Fatal for the producer."""

    kind = ErrorKind.INVALID
    code = 42217


class InvalidProducerIdMapping(StrataError):
    """The transactional id is unknown, or was given another producer id (INVALID_PRODUCER_ID_MAPPING):
    the client initialises again."""

    kind = ErrorKind.INVALID
    code = 42218


class InvalidTransactionTimeout(StrataError):
    """``transaction.timeout.ms`` is not in 1..``transaction.max.timeout.ms``
    (INVALID_TRANSACTION_TIMEOUT)."""

    kind = ErrorKind.INVALID
    code = 42219


class ConcurrentTransactions(Conflict):
    """Another request changes the transaction at this moment (CONCURRENT_TRANSACTIONS): retry."""

    code = 40911


class TransactionalIdNotFound(StrataError):
    """No transaction has this id (TRANSACTIONAL_ID_NOT_FOUND, DescribeTransactions)."""

    kind = ErrorKind.NOT_FOUND
    code = 40407
