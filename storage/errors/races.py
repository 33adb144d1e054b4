"""Lost races (``CONFLICT``): someone else changed the state first, and nothing was written."""

from __future__ import annotations

from storage.errors.base import ErrorKind, StrataError

# --- conflict: lost a race; nothing was written ---------------------------------------------------------


class Conflict(StrataError):
    """Base of the "lost a race" errors: the state changed underneath, and the operation wrote nothing.

    Raised as one of its subclasses; catch it to handle every lost race alike. By default a conflict is
    retriable: after re-reading the state, the same request may succeed.
    """

    kind = ErrorKind.CONFLICT
    code = 40901
    retriable = True


class CommitConflict(Conflict):
    """An optimistic metadata commit lost a race (inputs changed underneath it).

    Repeating the request may succeed (``commit_flush`` raises it when an idempotency key expired
    mid-commit); a compaction job that gets it is abandoned and planned again instead.
    """


class TopicExists(Conflict):
    code = 40002
    retriable = False


class LeaseLost(Conflict):
    """Another worker took the job over (our lease expired); this attempt must not commit."""

    code = 40902
    retriable = False


class IdempotencyConflict(Conflict):
    """Raised by ``commit_flush`` when some idempotency keys were committed by someone else first.

    Nothing was written. ``existing`` maps each such key to the offsets it already has; the caller
    answers those requests with them and commits the rest without their records.
    """

    code = 40903
    retriable = False  # the conflict is the answer: the request was committed already

    def __init__(self, existing: dict[str, list[tuple[int, int]]]) -> None:
        super().__init__(f"{len(existing)} idempotency key(s) already committed")
        self.existing = existing


class ProducerConflict(Conflict):
    """Raised by ``commit_flush`` when some idempotent producer batches are not new, in-sequence appends.

    Nothing was written. ``duplicates`` maps the index of an append (``ProducerBatch.append``) that
    repeats one of the producer's last 5 committed batches to that batch's original base offset;
    ``rejected`` maps an append that must not be written to its error (``OutOfOrderSequence``,
    ``InvalidProducerEpoch`` or a retriable ``Unavailable``). The caller answers those appends and commits
    the rest without them: the rest were checked as if those appends were absent.
    """

    code = 40905
    retriable = False  # the conflict is the answer

    def __init__(self, duplicates: dict[int, int], rejected: dict[int, StrataError]) -> None:
        super().__init__(f"{len(duplicates)} duplicate and {len(rejected)} rejected producer append(s)")
        self.duplicates = duplicates
        self.rejected = rejected
        # (topic, partition) -> log start offset, as the refused commit saw it: for the duplicates' answers.
        self.log_starts: dict[tuple[str, int], int] = {}


class OutOfOrderSequence(StrataError):
    """An idempotent producer's batch does not continue its sequence (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER).

    Not retriable as sent: the producer must resend its earlier batches first (Kafka clients do).
    """

    kind = ErrorKind.INVALID
    code = 42210


class InvalidProducerEpoch(StrataError):
    """A batch's producer epoch is older than the one the partition has seen (INVALID_PRODUCER_EPOCH)."""

    kind = ErrorKind.INVALID
    code = 42211


class ProducerFenced(StrataError):
    """InitProducerId with an epoch that a newer InitProducerId replaced (PRODUCER_FENCED)."""

    kind = ErrorKind.INVALID
    code = 42212


class ClaimRefused(Conflict):
    """Raised by ``create_job``: an input file is claimed by another active job, or is no longer live; and
    by ``lease_lake_table``: another topic's lake writer has the same Iceberg table.

    Retriable: once the other job finished, a new plan may claim the files.
    """

    code = 40904
