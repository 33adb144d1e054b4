"""The metadata role of the lake writers (``LakeStore``): one row per lake-enabled topic in ``lake_tables``
(migration 13, ``storage/metadata/schema_lake.py``), holding the writer's lease and its last status.

The lease is the rule "one writer per table": ``lease_lake_table`` hands the row to one owner until its lease
expires, as jobs are leased (``storage/metadata/sql/jobs.py``); the owner extends it with
``heartbeat_lake_table`` and gives it back with ``finish_lake_run``. A lease is not what makes a commit
exactly-once (a writer whose lease ran out may still be running): the Iceberg commit is a compare-and-set of
the table's metadata, and the offsets a snapshot covers are in its summary. The status columns are a copy
for display and are never read back as the truth; retention's hold (``planner/lake_hold.py``) reads
``committed_offsets`` only as a lower bound of the table's, which they are (recorded after the commit, and
reset when the row is leased for another table).

The row also carries what the lake costs, recorded by the lake round at the end of each step
(``record_lake_usage``, ``pipeline/lake/meter.py``): the requests sent for the topic's tables, and what they
hold; the totals of every topic's requests are a row of their own, which outlives a topic's row.

Lost races raise (``storage.metadata.base``): ``LeaseLost`` from ``heartbeat_lake_table`` and
``finish_lake_run``; ``ClaimRefused`` from ``lease_lake_table`` when another topic's row names the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from storage.metadata.rows import TopicInfo


@dataclass(frozen=True, slots=True)
class LakeTableRow:
    topic: str
    table_identifier: str
    mode: str
    delete_with_topic: bool
    topic_created_ms: int
    committed_offsets: Mapping[int, int] = field(default_factory=dict)  # partition -> next offset
    last_snapshot_id: int | None = None
    last_commit_ms: int | None = None
    last_run_ms: int | None = None  # when the last run began (its lease was taken)
    lag_records: int = 0
    error: str | None = None
    lease_owner: str | None = None
    lease_expires_ms: int | None = None
    commit_requested: bool = False
    # What the topic's lake round sent, by request kind (record_lake_usage), since the row was made.
    requests: Mapping[str, int] = field(default_factory=dict)
    # What its tables hold; None until a listing measured it (see LakeUsage).
    stored: LakeFootprint | None = None


@dataclass(frozen=True, slots=True)
class LakeClaim:
    """What a writer states about the table when it leases it: copied into the row."""

    topic: str
    table_identifier: str
    mode: str
    delete_with_topic: bool
    topic_created_ms: int


@dataclass(frozen=True, slots=True)
class LakeRunResult:
    """A writer's run, recorded by ``finish_lake_run``. ``committed`` is None when the run did not learn
    the table's offsets (it failed before reading them): the previous status then stays."""

    committed: Mapping[int, int] | None
    snapshot_id: int | None
    commit_ms: int | None  # when a snapshot of this run was committed (None: none was)
    lag_records: int
    error: str | None
    # Whether a commit was asked for when the run leased the row: only then does the run answer the
    # request. One asked for while the run was in flight stands, since the run may have read the topic
    # before it.
    request_seen: bool = False
    # When the run began: the row's ``last_run_ms``, from which the commit interval counts (None: now).
    started_ms: int | None = None


@dataclass(frozen=True, slots=True)
class LakeFootprint:
    """What a topic's lake tables hold: objects and bytes under their locations. ``measured_ms``: the
    listing these figures start from (what the lake wrote since is added to them)."""

    objects: int
    bytes: int
    measured_ms: int


@dataclass(frozen=True, slots=True)
class LakeUsage:
    """What the lake sent for one topic in one scope of its round (``pipeline/lake/meter.py``).

    How it moves the row's stored figures: a ``footprint`` (a listing made at the scope's end) replaces
    them; otherwise the objects and bytes written are added, unless something was deleted (pyiceberg does
    not say how large a deleted file was), which makes them unknown until the next listing. Unknown stays
    unknown (NULL in SQL) until a listing.
    """

    requests: Mapping[str, int] = field(default_factory=dict)  # by kind: PUT, GET, HEAD, LIST, DELETE
    objects_written: int = 0  # uploads completed
    bytes_written: int = 0
    bytes_read: int = 0
    deletes: int = 0  # objects pyiceberg deleted (their sizes unknown)
    footprint: LakeFootprint | None = None  # a listing at the scope's end: replaces the stored figures

    @property
    def empty(self) -> bool:
        """Nothing to record: no request, no object, no listing."""
        return not any(self.requests.values()) and not self.objects_written and self.footprint is None


@dataclass(frozen=True, slots=True)
class LakeUsageTotals:
    """The whole lake's figures: requests sent by every topic's lake round ever (never decreasing), and what
    the tables of the topics with a row hold now (``unmeasured``: rows whose tables were never listed)."""

    requests: Mapping[str, int]
    stored_objects: int
    stored_bytes: int
    tables: int
    unmeasured: int


class LakeStore(Protocol):
    def lake_topics(self) -> list[TopicInfo]:
        """The topics whose ``strata.iceberg.mode`` is set to something other than ``disabled``, by name."""
        ...

    def lake_tables(self) -> list[LakeTableRow]:
        """Every row, by topic."""
        ...

    def lease_lake_table(
        self, claim: LakeClaim, owner: str, now_ms: int, lease_ms: int
    ) -> LakeTableRow | None:
        """Lease the topic's row to ``owner`` until now_ms + lease_ms, creating it if absent and updating
        its table, mode and topic facts from ``claim``. None when another owner's lease has not expired.
        Raises ClaimRefused when another topic's row names the same table."""
        ...

    def heartbeat_lake_table(self, topic: str, owner: str, now_ms: int, lease_ms: int) -> None:
        """Extend ``owner``'s lease (never shortening it). Raises LeaseLost unless ``owner`` holds it."""
        ...

    def finish_lake_run(self, topic: str, owner: str, now_ms: int, result: LakeRunResult) -> None:
        """Record the run's status and release the lease. A run that saw a commit asked for when it leased
        the row (``result.request_seen``) and learned the table's offsets (``result.committed`` set: it
        committed, or had nothing to commit) clears ``commit_requested``. Raises LeaseLost, writing
        nothing, unless ``owner`` holds the lease."""
        ...

    def request_lake_commit(self, topic: str) -> bool:
        """Ask for a commit at the next round whatever the interval; False if the topic has no row."""
        ...

    def record_lake_usage(
        self, topic: str, topic_created_ms: int, now_ms: int, usage: LakeUsage
    ) -> LakeFootprint | None:
        """Add ``usage`` to the row of the topic as created at ``topic_created_ms`` and to the totals, in one
        transaction; the row's stored figures after it (None: unknown, or no such row). Requests whose row
        is gone (the topic was deleted meanwhile) still count in the totals. No lease needed: increments."""
        ...

    def lake_usage_totals(self) -> LakeUsageTotals:
        """The totals row and the sums of the rows' stored figures, read in one transaction."""
        ...

    def forget_lake_table(self, topic: str, topic_created_ms: int) -> None:
        """Delete the row of the topic as it was when created at ``topic_created_ms`` (a row the topic's
        newer incarnation wrote since is kept)."""
        ...
