"""Deleting a partition's records below an offset: Kafka's DeleteRecords, for both front doors.

The partition's log start moves up to the offset asked for, and the chunk rows wholly below it go, as
retention does (``CompactionCatalog.apply_retention``): files left without live chunks become obsolete and
GC deletes them after its grace period. Records below the new log start that share a chunk with later
ones stay in that chunk's bytes, but no reader serves them: fetches below the log start
are out of range, a fetch from it skips the offsets before it (as Kafka's clients skip the front of a
batch), and the Spark reader starts at the log start.

The rules are Kafka's (``Partition.deleteRecordsOnLeader``):
- a topic whose ``cleanup.policy`` does not include ``delete`` refuses (POLICY_VIOLATION);
- ``before`` None (Kafka's offset -1) means the high watermark;
- an offset below 0 or past the high watermark is out of range, and nothing changes;
- the log start never moves back: an offset at or below it changes nothing and answers the log start.
"""

from __future__ import annotations

from typing import Protocol

from storage.errors import OffsetOutOfRange, PolicyViolation
from storage.metadata.rows import PartitionState, TopicInfo
from storage.topic_config import TopicConfig


class RecordsDeleter(Protocol):
    """The metadata store's part in it."""

    def get_topic(self, name: str) -> TopicInfo: ...

    def partition_state(self, topic: str, partition: int) -> PartitionState: ...

    def apply_retention(self, topic: str, partition: int, new_log_start: int, now_ms: int) -> int: ...


def delete_records(
    metadata: RecordsDeleter, topic: str, partition: int, before: int | None, now_ms: int
) -> PartitionState:
    """Delete the records of ``topic``/``partition`` below ``before`` (None: the high watermark); the
    partition's state afterwards, whose ``log_start_offset`` is Kafka's low watermark. Blocking (metadata
    calls): front doors run it in a thread.

    Raises UnknownTopic, UnknownPartition, PolicyViolation or OffsetOutOfRange, changing nothing.
    """
    config = TopicConfig.from_overrides(metadata.get_topic(topic).configs)
    if not config.deletes:
        raise PolicyViolation(
            f"records of {topic}/{partition} cannot be deleted: the topic's cleanup.policy is "
            f"{','.join(sorted(config.cleanup_policy))!r}, which does not include 'delete'"
        )
    state = metadata.partition_state(topic, partition)
    target = state.high_watermark if before is None else before
    # The high watermark only grows, so an offset within it now stays within it.
    if not 0 <= target <= state.high_watermark:
        raise OffsetOutOfRange(
            f"cannot delete records of {topic}/{partition} below offset {target}: it must be between 0 and "
            f"the high watermark {state.high_watermark}"
        )
    if target <= state.log_start_offset:
        return state
    metadata.apply_retention(topic, partition, target, now_ms)
    return metadata.partition_state(topic, partition)
