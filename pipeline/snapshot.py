"""The driver's view of what a read covers: a metadata snapshot of live chunks per partition.

Taken once, on the driver, before any executor reads a byte: it names exactly the live files, and within
them the chunk byte ranges and offset ranges to decode. Files are immutable, and a file that compaction
replaces stays in the bucket for the GC grace period (``STRATA_GC_GRACE_MS``, 10 min by default), which
is what protects the files of a read from GC: a Spark read must finish within that grace period.

read_committed (``kafka.isolation.level``, the default) reads below each partition's last stable offset
(LSO) instead of its high watermark: "latest" is the LSO, and an explicit end past it is cut there (a start
past it reads nothing), as Kafka's source reading committed data never gets records past the LSO. Each
chunk task carries the aborted transactions whose range meets its [start, end), and the decoders drop
their batches. Why that is every aborted range the read can meet: the partition's state (high watermark
and LSO) is read first, in one statement, and the aborted ranges and chunks after it. Every offset below
that LSO belongs to a transaction that had ended when the state was read, and a transaction's end writes
its aborted range in the same metadata transaction that moves the LSO past it, so the later read sees
every aborted range below the LSO read, and nothing at or past it is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pipeline.options import EARLIEST, LATEST, InvalidReadOption, ReadOptions
from storage.errors import UnknownPartition
from storage.metadata.base import LogStore
from storage.metadata.rows import PartitionState
from storage.metadata.txn_state import AbortedTxn

_PAGE = 1000


@dataclass(frozen=True, slots=True)
class ChunkTask:
    """Decode chunk bytes [position, position+length) of a file; keep offsets in [start, end), without
    the batches of the ``aborted`` transactions (read_committed: those whose range meets [start, end))."""

    topic: str
    partition: int
    base_offset: int
    position: int
    length: int
    crc: int
    start: int
    end: int
    aborted: tuple[AbortedTxn, ...] = ()


@dataclass(frozen=True, slots=True)
class Snapshot:
    tasks: Mapping[str, tuple[ChunkTask, ...]]  # object key -> its chunks to decode, by position
    ranges: Mapping[tuple[str, int], tuple[int, int]]  # (topic, partition) -> [start, end)

    @property
    def object_keys(self) -> list[str]:
        return sorted(self.tasks)


def take_snapshot(metadata: LogStore, options: ReadOptions) -> Snapshot:
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    aborted: dict[tuple[str, int], list[AbortedTxn]] = {}
    for topic, partitions in _partitions(metadata, options).items():
        states = {s.partition: s for s in metadata.partition_states(topic)}
        for partition in partitions:
            state = states.get(partition)
            if state is None:
                raise UnknownPartition(f"topic {topic!r} has no partition {partition}")
            start, end = _range(options, state)
            ranges[(topic, partition)] = (start, end)
            # After the state (the module doc says why). An aborted range ends at its ABORT marker: none
            # can meet [start, end) unless a marker lies at or past start.
            if options.read_committed and end > start and state.last_marker_offset >= start:
                aborted[(topic, partition)] = metadata.aborted_txns(topic, partition, start, end - 1)
    tasks: dict[str, list[ChunkTask]] = {}
    for (topic, partition), (start, end) in sorted(ranges.items()):
        ranges_here = aborted.get((topic, partition), [])
        offset = start
        while offset < end:
            chunks = metadata.find_chunks(topic, partition, offset, _PAGE)
            for chunk in chunks:
                if chunk.base_offset >= end:
                    break
                first, stop = max(start, chunk.base_offset), min(end, chunk.last_offset + 1)
                tasks.setdefault(chunk.object_key, []).append(
                    ChunkTask(
                        topic,
                        partition,
                        chunk.base_offset,
                        chunk.position,
                        chunk.length,
                        chunk.crc,
                        first,
                        stop,
                        _meeting(ranges_here, first, stop),
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


def _range(options: ReadOptions, state: PartitionState) -> tuple[int, int]:
    """The partition's [start, end) to read."""
    hwm = state.high_watermark
    start = _resolve(options.starting, state, state.last_stable_offset if options.read_committed else hwm)
    end = _resolve(options.ending, state, hwm, ending=True)
    if end < start:
        raise InvalidReadOption(
            f"{state.topic}/{state.partition}: ending offset {end} is before starting offset {start}"
        )
    if options.read_committed:
        # Nothing at or past the LSO is read (it may belong to an open transaction): "latest" is the LSO,
        # an end past it is cut there, and a start past it reads nothing, as a read_committed consumer
        # positioned there gets nothing until the LSO moves on.
        end = max(start, min(end, state.last_stable_offset))
    return start, end


def _meeting(aborted: list[AbortedTxn], start: int, end: int) -> tuple[AbortedTxn, ...]:
    """The aborted ranges that meet [start, end). A batch with a record in [start, end) lies wholly inside
    its transaction's range (first offset .. marker), so these are all a task needs."""
    return tuple(a for a in aborted if a.first_offset < end and a.last_offset >= start)


def _resolve(
    spec: str | Mapping[str, Mapping[int, int]], state: PartitionState, latest: int, *, ending: bool = False
) -> int:
    """An offset of ``startingOffsets`` or ``endingOffsets``; ``latest`` is what "latest" means."""
    if isinstance(spec, str):
        return latest if spec == "latest" else state.log_start_offset
    wanted = spec.get(state.topic, {}).get(state.partition, LATEST if ending else EARLIEST)
    if wanted == EARLIEST:
        return state.log_start_offset
    if wanted == LATEST:
        return latest
    if wanted > state.high_watermark:
        raise InvalidReadOption(
            f"{state.topic}/{state.partition}: offset {wanted} is past the high watermark "
            f"{state.high_watermark}"
        )
    # Below the log start, records are gone (retention): read from the first that exists, as Kafka's
    # source does with failOnDataLoss=false.
    return max(wanted, state.log_start_offset)
