"""Request and response bodies of the consumer-group endpoints (api/routes/groups.py): list, describe and
reset offsets. Strict like api/models.py: no coercion, unknown fields refused (42206)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, model_validator

from api.models import MAX_OFFSET, MAX_TIMESTAMP, GroupOffsetOut
from storage.topic_config import MAX_PARTITIONS

# Kafka's names of a classic group's states (ListGroups, DescribeGroups). Dead is Kafka's answer for a group
# it does not know; here such a group is 404 (40405), so no answer carries it today.
GroupState = Literal["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]
ResetTo = Literal["earliest", "latest", "timestamp", "offset"]
Partition = Annotated[StrictInt, Field(ge=0, le=MAX_PARTITIONS)]


class GroupSummaryOut(BaseModel):
    group: str
    state: GroupState
    protocol_type: str | None = Field(description='the members\' protocol type, e.g. "consumer"')
    protocol: str | None = Field(description="the protocol (assignor) chosen in the last rebalance")
    members: int


class GroupListOut(BaseModel):
    groups: list[GroupSummaryOut] = Field(description="by group id (code-point order)")
    next_after: str | None = Field(description="`after` for the next page; null on the last page")


class AssignedTopicOut(BaseModel):
    topic: str
    partitions: list[int]


class GroupMemberOut(BaseModel):
    member_id: str
    group_instance_id: str | None = Field(description="group.instance.id of a static member (KIP-345)")
    client_id: str
    client_host: str
    assignment: list[AssignedTopicOut] = Field(
        description='the partitions the leader assigned (only for protocol type "consumer"; empty from a '
        "rebalance's join until the leader's SyncGroup), topics the principal may not read left out"
    )


class GroupPartitionOut(BaseModel):
    topic: str
    partition: int
    committed_offset: int | None = Field(description="null: assigned, nothing committed")
    log_start_offset: int
    high_watermark: int
    lag: int | None = Field(description="high_watermark - committed_offset (at least 0); null if none")


class GroupOut(BaseModel):
    group: str
    state: GroupState
    protocol_type: str | None
    protocol: str | None
    generation: int
    members: list[GroupMemberOut]
    partitions: list[GroupPartitionOut] = Field(
        description="every partition with a committed offset or assigned to a member, by topic and "
        "partition; topics the principal may not read left out"
    )
    total_lag: int = Field(description="the sum of the partitions' known lags")


class OffsetResetIn(BaseModel):
    """``kafka-consumer-groups --reset-offsets`` for one topic: ``--to-earliest``, ``--to-latest``,
    ``--to-datetime`` (``timestamp``, ms since the epoch) or ``--to-offset``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    topic: StrictStr
    partitions: list[Partition] | None = Field(
        default=None, min_length=1, max_length=MAX_PARTITIONS, description="null: every partition"
    )
    to: ResetTo
    timestamp: Annotated[StrictInt, Field(ge=0, le=MAX_TIMESTAMP)] | None = Field(
        default=None,
        description='with "timestamp": the first offset whose record timestamp is >= this (ms), or the '
        "high watermark if no record is that late",
    )
    offset: Annotated[StrictInt, Field(ge=0, le=MAX_OFFSET)] | None = Field(
        default=None, description='with "offset": clamped to [log_start_offset, high_watermark]'
    )
    dry_run: StrictBool = Field(default=False, description="compute and answer the offsets, write nothing")

    @model_validator(mode="after")
    def _mode_arguments(self) -> OffsetResetIn:
        # Each argument belongs to exactly one mode: one given with another mode is a client's mistake
        # that would otherwise be ignored silently.
        if (self.to == "timestamp") != (self.timestamp is not None):
            raise ValueError('timestamp is required with to="timestamp", and allowed only with it')
        if (self.to == "offset") != (self.offset is not None):
            raise ValueError('offset is required with to="offset", and allowed only with it')
        return self


class OffsetResetOut(BaseModel):
    group: str
    dry_run: bool = Field(description="true: nothing was written")
    offsets: list[GroupOffsetOut] = Field(description="the offsets set (or that would be), by partition")
