"""The Spark reader's read_committed, sans Spark: the ``kafka.isolation.level`` option, the snapshot's
ranges (below the LSO) and aborted ranges per chunk against a fake metadata store, the task list's ``X``
lines, and the Python decoders' batch filter (the C-loop path and the reference give the same rows)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from crc32c import crc32c

from pipeline.decode import _decode_columns, decode_file_reference
from pipeline.options import InvalidReadOption, ReadOptions, parse_options
from pipeline.snapshot import ChunkTask, take_snapshot
from pipeline.tasklist import HEADER, encode_tasks
from storage import records
from storage.errors import CodecError
from storage.metadata.rows import ChunkRow, PartitionState, TopicInfo
from storage.metadata.txn_state import AbortedTxn
from tests.spark.batches import TRANSACTIONAL, batch, fix_crc

T0 = 1_700_000_000_000

# --- the option -----------------------------------------------------------------------------------------


def test_read_committed_is_the_default_and_read_uncommitted_is_asked_for() -> None:
    assert parse_options({"subscribe": "t"}).read_committed
    assert parse_options({"subscribe": "t", "kafka.isolation.level": "read_committed"}).read_committed
    # Option names are case-insensitive, as Spark's; so is the value here.
    assert not parse_options({"subscribe": "t", "Kafka.Isolation.Level": "READ_UNCOMMITTED"}).read_committed


@pytest.mark.parametrize("value", ["committed", "", "read-committed", 1, None])
def test_a_bad_isolation_level_names_the_option(value: object) -> None:
    with pytest.raises(InvalidReadOption, match=r"kafka\.isolation\.level must be read_committed"):
        parse_options({"subscribe": "t", "kafka.isolation.level": value})


# --- the snapshot ---------------------------------------------------------------------------------------


class FakeLog:
    """The four reads ``take_snapshot`` makes, over one topic, each call recorded in order."""

    def __init__(
        self, states: Sequence[PartitionState], chunks: Sequence[ChunkRow], aborted: list[AbortedTxn]
    ):
        self.states = list(states)
        self.chunks = list(chunks)
        self.aborted = aborted
        self.calls: list[tuple[Any, ...]] = []

    def get_topic(self, name: str) -> TopicInfo:
        return TopicInfo(name, len(self.states), {}, 0)

    def partition_states(self, topic: str) -> list[PartitionState]:
        self.calls.append(("states", topic))
        return self.states

    def find_chunks(self, topic: str, partition: int, offset: int, limit: int) -> list[ChunkRow]:
        self.calls.append(("chunks", partition, offset))
        found = [c for c in self.chunks if c.partition == partition and c.last_offset >= offset]
        return found[:limit]

    def aborted_txns(self, topic: str, partition: int, first: int, last: int) -> list[AbortedTxn]:
        self.calls.append(("aborted", partition, first, last))
        return [a for a in self.aborted if a.first_offset <= last and a.last_offset >= first]


def _chunk(chunk_id: int, base: int, last: int, partition: int = 0) -> ChunkRow:
    return ChunkRow(
        chunk_id, "t", partition, base, last, last - base + 1, "k", 100 * chunk_id, 10, 0, 0, 0, False
    )


def _log() -> FakeLog:
    """Partition 0: offsets 0..19 in chunks of 5; a transaction aborted over 2..9 (marker 9), one over
    11..12 (marker 12), and one open from 15 (the LSO). Partition 1: no marker ever."""
    states = [
        PartitionState("t", 0, 0, 20, open_txn_offset=15, last_marker_offset=14),
        PartitionState("t", 1, 0, 4),
    ]
    chunks = [_chunk(i, 5 * i, 5 * i + 4) for i in range(4)] + [_chunk(9, 0, 3, partition=1)]
    return FakeLog(states, chunks, [AbortedTxn(7, 2, 9), AbortedTxn(8, 11, 12)])


def _snapshot(log: FakeLog, **options: str) -> tuple[dict[int, tuple[int, int]], list[ChunkTask]]:
    snapshot = take_snapshot(log, parse_options({"subscribe": "t", **options}))  # type: ignore[arg-type]
    ranges = {p: r for (_, p), r in snapshot.ranges.items()}
    return ranges, sorted(snapshot.tasks.get("k", ()), key=lambda t: (t.partition, t.base_offset))


def test_read_committed_reads_below_the_lso_with_each_chunks_aborted_ranges() -> None:
    log = _log()
    ranges, tasks = _snapshot(log)
    assert ranges == {0: (0, 15), 1: (0, 4)}
    # The state first, then the aborted ranges (partition 1 has no marker: none asked), then the chunks.
    assert log.calls[:2] == [("states", "t"), ("aborted", 0, 0, 14)]
    assert all(c[0] == "chunks" for c in log.calls[2:])
    assert [(t.partition, t.start, t.end, t.aborted) for t in tasks] == [
        (0, 0, 5, (AbortedTxn(7, 2, 9),)),
        (0, 5, 10, (AbortedTxn(7, 2, 9),)),
        (0, 10, 15, (AbortedTxn(8, 11, 12),)),
        (1, 0, 4, ()),
    ]


def test_latest_is_the_lso_and_an_end_past_it_is_cut() -> None:
    assert _snapshot(_log(), startingOffsets="latest") == ({0: (15, 15), 1: (4, 4)}, [])
    ranges, tasks = _snapshot(_log(), endingOffsets='{"t":{"0":18}}')
    assert ranges[0] == (0, 15)
    assert max(t.end for t in tasks if t.partition == 0) == 15
    # A start past the LSO reads nothing; no aborted range is read for an empty range.
    log = _log()
    ranges, _ = _snapshot(log, startingOffsets='{"t":{"0":17}}')
    assert ranges[0] == (17, 17)
    assert not [c for c in log.calls if c[0] == "aborted"]
    # Past the high watermark is still an error, and so is an end before the start.
    with pytest.raises(InvalidReadOption, match="past the high watermark 20"):
        _snapshot(_log(), endingOffsets='{"t":{"0":21}}')
    with pytest.raises(InvalidReadOption, match="ending offset 16 is before starting offset 17"):
        _snapshot(_log(), startingOffsets='{"t":{"0":17}}', endingOffsets='{"t":{"0":16}}')


def test_a_range_past_every_marker_reads_no_aborted_ranges() -> None:
    log = _log()
    ranges, tasks = _snapshot(log, startingOffsets='{"t":{"0":14}}')  # the last marker is at 14
    assert ranges[0] == (14, 15)
    assert ("aborted", 0, 14, 14) in log.calls
    assert [(t.start, t.end, t.aborted) for t in tasks if t.partition == 0] == [(14, 15, ())]
    log = _log()
    _snapshot(log, startingOffsets='{"t":{"0":15}}')
    assert not [c for c in log.calls if c[0] == "aborted"]


def test_read_uncommitted_reads_to_the_high_watermark_with_no_aborted_ranges() -> None:
    log = _log()
    ranges, tasks = _snapshot(log, **{"kafka.isolation.level": "read_uncommitted"})
    assert ranges == {0: (0, 20), 1: (0, 4)}
    assert all(t.aborted == () for t in tasks)
    assert not [c for c in log.calls if c[0] == "aborted"]
    assert take_snapshot(log, ReadOptions(topics=("t",), read_committed=False)).ranges[("t", 0)] == (0, 20)  # type: ignore[arg-type]


# --- the task list --------------------------------------------------------------------------------------


def test_the_task_list_gives_each_chunk_its_aborted_ranges() -> None:
    tasks = {
        "a": (
            ChunkTask("t", 0, 0, 0, 5, 1, 0, 10, (AbortedTxn(7, 2, 9), AbortedTxn(2**40, 3, 4))),
            ChunkTask("t", 0, 10, 5, 5, 2, 10, 15),
        )
    }
    assert encode_tasks(tasks, lambda key: f"file:///b/{key}").split("\n") == [
        HEADER,
        "F\ta\tfile:///b/a",
        "C\tt\t0\t0\t0\t5\t1\t0\t10",
        "X\t7\t2\t9",
        f"X\t{2**40}\t3\t4",
        "C\tt\t0\t10\t5\t5\t2\t10\t15",
        "",
    ]
    assert HEADER == "strata-tasks 2"


# --- the decoders' batch filter -------------------------------------------------------------------------


def _recs(first: int, n: int, tag: str) -> list[records.Record]:
    return [records.Record(first + i, T0 + i, f"k{first + i}".encode(), tag.encode(), ()) for i in range(n)]


def _mixed_chunk(kind: str) -> bytes:
    """Relative offsets: 0-2 producer 7 transactional, 3 producer 7 not transactional, 4-5 producer 8
    transactional, 6-7 producer 7 transactional again (a later transaction)."""
    return (
        batch(_recs(0, 3, "aborted"), 0, kind, flags=TRANSACTIONAL, producer_id=7)
        + batch(_recs(3, 1, "plain"), 3, kind, producer_id=7)
        + batch(_recs(4, 2, "other"), 4, kind, flags=TRANSACTIONAL, producer_id=8)
        + batch(_recs(6, 2, "later"), 6, kind, flags=TRANSACTIONAL, producer_id=7)
    )


def _offsets_by_both(content: bytes, tasks: Sequence[ChunkTask]) -> list[int]:
    columns = _decode_columns(content, tasks, "k")
    reference = decode_file_reference(content, tasks, True, "k")
    assert columns is not None
    assert columns.column("offset").to_pylist() == reference.column("offset").to_pylist()
    assert columns.column("value").to_pylist() == reference.column("value").to_pylist()
    offsets: list[int] = reference.column("offset").to_pylist()
    return offsets


@pytest.mark.parametrize("kind", ["none", "zstd", "lz4"])
def test_both_python_decoders_drop_exactly_the_aborted_transactional_batches(kind: str) -> None:
    data = _mixed_chunk(kind)
    base = 1000  # the range is absolute: the chunk's base offset + the batch's relative baseOffset

    def task(*aborted: AbortedTxn, start: int = base, end: int = base + 8) -> ChunkTask:
        return ChunkTask("t", 0, base, 0, len(data), crc32c(data), start, end, aborted)

    assert _offsets_by_both(data, [task()]) == list(range(base, base + 8))
    # Producer 7's first transaction aborted (marker at 1003): its batch goes, the non-transactional
    # batch of the same producer id and its later transaction stay.
    assert _offsets_by_both(data, [task(AbortedTxn(7, base, base + 3))]) == [1003, 1004, 1005, 1006, 1007]
    # Another producer's range, or a range of relative offsets, drops nothing.
    assert _offsets_by_both(data, [task(AbortedTxn(9, base, base + 3))]) == list(range(base, base + 8))
    assert _offsets_by_both(data, [task(AbortedTxn(7, 0, 3))]) == list(range(base, base + 8))
    # A range that starts inside a batch does not hold its base offset: the batch stays.
    assert _offsets_by_both(data, [task(AbortedTxn(7, base + 1, base + 3))]) == list(range(base, base + 8))
    # Both of producer 8's and the later one of 7's, with [start, end) cutting the chunk.
    both = task(AbortedTxn(8, base + 4, base + 8), AbortedTxn(7, base + 6, base + 9), start=base + 2)
    assert _offsets_by_both(data, [both]) == [1002, 1003]


def test_an_aborted_batch_that_fails_its_crc_still_fails_the_read() -> None:
    data = bytearray(_mixed_chunk("none"))
    data[70] ^= 0x01  # inside the first (aborted) batch's records: its batch CRC no longer matches
    task = ChunkTask("t", 0, 0, 0, len(data), crc32c(bytes(data)), 0, 8, (AbortedTxn(7, 0, 3),))
    assert _decode_columns(bytes(data), [task], "k") is None  # the C loop declines; the reference decides
    with pytest.raises(CodecError, match="record batch at position 0 fails its CRC-32C check"):
        decode_file_reference(bytes(data), [task], False, "k")
    # Behind a good batch CRC, damaged records of an aborted batch are never read, by either decoder.
    fix_crc(data, 0, len(batch(_recs(0, 3, "aborted"), 0, flags=TRANSACTIONAL, producer_id=7)))
    task = ChunkTask("t", 0, 0, 0, len(data), crc32c(bytes(data)), 0, 8, (AbortedTxn(7, 0, 3),))
    assert _offsets_by_both(bytes(data), [task]) == [3, 4, 5, 6, 7]
