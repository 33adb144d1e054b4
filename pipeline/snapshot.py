"""The driver's view of what a read covers: a metadata snapshot of live chunks per partition.

Taken once, on the driver, before any executor reads a byte: it names exactly the live files, and within
them the chunk byte ranges and offset ranges to decode. Files are immutable, and a file that compaction
replaces stays in the bucket for the GC grace period (``STRATA_GC_GRACE_MS``, 10 min by default), which
is what protects the files of a read from GC: a Spark read must finish within that grace period.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pipeline.options import EARLIEST, LATEST, InvalidReadOption, ReadOptions
from storage.errors import UnknownPartition
from storage.metadata.base import LogStore
from storage.metadata.rows import PartitionState

_PAGE = 1000


@dataclass(frozen=True, slots=True)
class ChunkTask:
    """Decode chunk bytes [position, position+length) of a file; keep offsets in [start, end)."""

    topic: str
    partition: int
    base_offset: int
    position: int
    length: int
    crc: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    tasks: Mapping[str, tuple[ChunkTask, ...]]  # object key -> its chunks to decode, by position
    ranges: Mapping[tuple[str, int], tuple[int, int]]  # (topic, partition) -> [start, end)

    @property
    def object_keys(self) -> list[str]:
        return sorted(self.tasks)


def take_snapshot(metadata: LogStore, options: ReadOptions) -> Snapshot:
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    for topic, partitions in _partitions(metadata, options).items():
        states = {s.partition: s for s in metadata.partition_states(topic)}
        for partition in partitions:
            state = states.get(partition)
            if state is None:
                raise UnknownPartition(f"topic {topic!r} has no partition {partition}")
            start = _resolve(options.starting, state, ending=False)
            end = _resolve(options.ending, state, ending=True)
            if end < start:
                raise InvalidReadOption(
                    f"{topic}/{partition}: ending offset {end} is before starting offset {start}"
                )
            ranges[(topic, partition)] = (start, end)
    tasks: dict[str, list[ChunkTask]] = {}
    for (topic, partition), (start, end) in sorted(ranges.items()):
        offset = start
        while offset < end:
            chunks = metadata.find_chunks(topic, partition, offset, _PAGE)
            for chunk in chunks:
                if chunk.base_offset >= end:
                    break
                tasks.setdefault(chunk.object_key, []).append(
                    ChunkTask(
                        topic,
                        partition,
                        chunk.base_offset,
                        chunk.position,
                        chunk.length,
                        chunk.crc,
                        max(start, chunk.base_offset),
                        min(end, chunk.last_offset + 1),
                    )
                )
            if len(chunks) < _PAGE or chunks[-1].base_offset >= end:
                break
            offset = chunks[-1].last_offset + 1
    return Snapshot({key: tuple(sorted(ts, key=lambda t: t.position)) for key, ts in tasks.items()}, ranges)


def _partitions(metadata: LogStore, options: ReadOptions) -> dict[str, tuple[int, ...]]:
    if options.topics:
        return {t: tuple(range(metadata.get_topic(t).partitions)) for t in options.topics}
    out: dict[str, tuple[int, ...]] = {}
    for topic, partitions in options.assign.items():
        count = metadata.get_topic(topic).partitions
        for p in partitions:
            if p >= count:
                raise UnknownPartition(f"topic {topic!r} has partitions 0..{count - 1}, not {p}")
        out[topic] = partitions
    return out


def _resolve(spec: str | Mapping[str, Mapping[int, int]], state: PartitionState, *, ending: bool) -> int:
    if isinstance(spec, str):
        return state.high_watermark if spec == "latest" else state.log_start_offset
    wanted = spec.get(state.topic, {}).get(state.partition, LATEST if ending else EARLIEST)
    if wanted == EARLIEST:
        return state.log_start_offset
    if wanted == LATEST:
        return state.high_watermark
    if wanted > state.high_watermark:
        raise InvalidReadOption(
            f"{state.topic}/{state.partition}: offset {wanted} is past the high watermark "
            f"{state.high_watermark}"
        )
    # Below the log start, records are gone (retention): read from the first that exists, as Kafka's
    # source does with failOnDataLoss=false.
    return max(wanted, state.log_start_offset)
