"""Response bodies of the lake's status endpoints (``api/routes/lake.py``), from ``storage/lake_status.py``.

Times are milliseconds since the epoch (``*_ms``) except the lag, in seconds; the lag's definition is the
status module's (docs/lake.md, "Status").
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from storage.lake_status import LakeStatus
from storage.objectstore.base import DELETE, GET, HEAD, LIST, PUT


class LakePartitionOut(BaseModel):
    partition: int
    committed_offset: int | None = Field(
        description="the table holds every offset of the partition below this; null: none of it yet"
    )
    last_stable_offset: int
    lag_records: int = Field(description="last_stable_offset minus where the table is (offsets)")
    lag_seconds: float = Field(description="age of the oldest record the table lacks (0: none)")


class LakeRunOut(BaseModel):
    """The writer's last recorded run of the table."""

    at_ms: int = Field(description="when the run began: the commit interval counts from here")
    lag_records: int = Field(description="the lag the run left behind, as it measured it")
    error: str | None


class LakeRequestsOut(BaseModel):
    """Object-store requests the lake round sent for the topic's tables (pyiceberg's: data files,
    manifests, manifest lists, metadata files), by kind, since the lake was turned on for the topic. POSTs
    (a multipart upload's create and complete) count as PUT, as S3 bills them."""

    put: int = 0
    get: int = 0
    head: int = 0
    list: int = 0
    delete: int = 0


class LakeStoredOut(BaseModel):
    """What the topic's tables hold in the bucket: the table's location and its ``_dlq`` and ``_state``
    tables' (their data, manifest, manifest list and metadata files, and uploads no snapshot names yet)."""

    bytes: int
    files: int
    measured_ms: int = Field(
        description="the listing these figures start from; what the lake wrote since is added to them"
    )


class LakeStatusOut(BaseModel):
    topic: str
    mode: str = Field(description="strata.iceberg.mode: disabled, or raw")
    table: str | None = Field(description="the Iceberg table, namespace.table; null when disabled")
    commit_interval_ms: int | None = None
    committed_offsets: dict[str, int] = Field(
        default_factory=dict, description="partition -> next offset, from the table's last commit"
    )
    partitions: list[LakePartitionOut] = Field(default_factory=list)
    lag_records: int = 0
    lag_seconds: float = Field(default=0.0, description="the largest lag_seconds of the partitions")
    last_commit_ms: int | None = None
    last_snapshot_id: str | None = Field(
        default=None,
        description="the last commit's snapshot id, as a string: Iceberg's ids are 64-bit, beyond what"
        " JSON readers such as JavaScript hold exactly",
    )
    last_error: str | None = Field(default=None, description="the error of the last run, if it failed")
    last_run: LakeRunOut | None = None
    commit_requested: bool = Field(
        default=False, description="a commit was asked for and the writer has not done it yet"
    )
    writing: bool = Field(default=False, description="a writer holds the table's lease now")
    requests: LakeRequestsOut = Field(default_factory=LakeRequestsOut)
    stored: LakeStoredOut | None = Field(
        default=None, description="null until the tables are listed (after their first commit)"
    )


class LakeListOut(BaseModel):
    tables: list[LakeStatusOut]
    next_after: str | None = Field(default=None, description="the next page's after; null on the last page")


class LakeCommitOut(BaseModel):
    topic: str
    table: str
    commit_requested: bool = Field(
        description="true: the next lake round commits the table whatever its commit interval"
    )


def status_out(status: LakeStatus, now_ms: int) -> LakeStatusOut:
    last_run = None
    if status.last_run_ms is not None:
        last_run = LakeRunOut(
            at_ms=status.last_run_ms,
            lag_records=status.last_run_lag_records or 0,
            error=status.error,
        )
    return LakeStatusOut(
        topic=status.topic,
        mode=status.mode,
        table=status.table,
        commit_interval_ms=status.commit_interval_ms,
        committed_offsets={
            str(p.partition): p.committed_offset for p in status.partitions if p.committed_offset is not None
        },
        partitions=[
            LakePartitionOut(
                partition=p.partition,
                committed_offset=p.committed_offset,
                last_stable_offset=p.last_stable_offset,
                lag_records=p.lag_records,
                lag_seconds=p.lag_seconds,
            )
            for p in status.partitions
        ],
        lag_records=status.lag_records,
        lag_seconds=status.lag_seconds,
        last_commit_ms=status.last_commit_ms,
        last_snapshot_id=None if status.last_snapshot_id is None else str(status.last_snapshot_id),
        last_error=status.error,
        last_run=last_run,
        commit_requested=status.commit_requested,
        writing=status.lease_owner is not None
        and status.lease_expires_ms is not None
        and status.lease_expires_ms >= now_ms,
        requests=LakeRequestsOut(
            put=status.requests.get(PUT, 0),
            get=status.requests.get(GET, 0),
            head=status.requests.get(HEAD, 0),
            list=status.requests.get(LIST, 0),
            delete=status.requests.get(DELETE, 0),
        ),
        stored=None
        if status.stored is None
        else LakeStoredOut(
            bytes=status.stored.bytes, files=status.stored.objects, measured_ms=status.stored.measured_ms
        ),
    )
