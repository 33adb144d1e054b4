"""The parts of a lake commit read in pieces that are plain functions: the spans a read is fetched in
(pipeline/lake/source.plan_spans), a state table's changes reduced piece by piece
(pipeline/lake/upsert.reduce_changes), and when the round finds a table due (pipeline/lake/round.due_at)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from pipeline.lake.round import _due, behind, due_at
from pipeline.lake.source import plan_spans
from pipeline.lake.upsert import reduce_changes
from pipeline.snapshot import ChunkTask
from storage.lake_config import COMMIT_INTERVAL
from storage.metadata.lake_state import LakeTableRow
from storage.metadata.rows import TopicInfo


def chunk(partition: int, position: int, length: int) -> ChunkTask:
    return ChunkTask("t", partition, 0, position, length, 0, 0, 1)


def test_spans_keep_each_object_in_runs_of_at_most_the_span_size() -> None:
    chunks = [
        ("b", chunk(0, 0, 40)),
        ("a", chunk(1, 100, 30)),
        ("a", chunk(0, 0, 30)),
        ("a", chunk(2, 130, 30)),
        ("b", chunk(1, 40, 200)),  # longer than a span: a span of its own
        ("b", chunk(2, 240, 10)),
    ]
    spans = plan_spans(chunks, 100)
    assert [(s.key, s.low, s.high, [t.partition for t in s.tasks]) for s in spans] == [
        ("a", 0, 30, [0]),  # the next chunk of a would end at 130: past 100 bytes from 0
        ("a", 100, 160, [1, 2]),
        ("b", 0, 40, [0]),
        ("b", 40, 240, [1]),
        ("b", 240, 250, [2]),
    ]
    spanned = sorted((s.key, t.position) for s in spans for t in s.tasks)
    assert spanned == sorted((k, t.position) for k, t in chunks)  # every chunk, once
    assert plan_spans([], 100) == ()


def test_an_objects_chunks_within_the_span_size_are_one_get() -> None:
    chunks = [("k", chunk(p, p * 10, 10)) for p in range(8)]
    (span,) = plan_spans(chunks, 1000)
    assert (span.low, span.high, span.size, len(span.tasks)) == (0, 80, 80, 8)


CHANGES = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("value", pa.binary()),
        pa.field("deleted", pa.bool_()),
    ]
)


def changes(rows: list[tuple[bytes | None, int, bytes | None]]) -> pa.Table:
    return pa.table(
        {
            "key": [k for k, _, _ in rows],
            "partition": [0] * len(rows),
            "offset": [o for _, o, _ in rows],
            "value": [v for _, _, v in rows],
            "deleted": [v is None for _, _, v in rows],
        },
        schema=CHANGES,
    )


def as_dict(table: pa.Table) -> dict[bytes, tuple[int, bytes | None]]:
    return {r["key"]: (r["offset"], r["value"]) for r in table.to_pylist()}


@pytest.mark.parametrize("seed", range(5))
def test_changes_reduced_piece_by_piece_equal_the_changes_reduced_at_once(seed: int) -> None:
    rng = random.Random(seed)
    rows = [
        (rng.choice([None, b"a", b"b", b"c", b"d"]), offset, rng.choice([None, b"x", b"y"]))
        for offset in range(60)
    ]
    at_once = reduce_changes(changes(rows))
    held = reduce_changes(changes([]))
    cuts = sorted(rng.sample(range(1, 60), 4))
    for low, high in zip([0, *cuts], [*cuts, 60], strict=True):
        held = reduce_changes(pa.concat_tables([held, changes(rows[low:high])]))
    assert as_dict(held) == as_dict(at_once)
    latest = {k: (o, v) for k, o, v in rows if k is not None}  # the last record of each key wins
    assert as_dict(at_once) == latest


INFO = TopicInfo("t", 1, {COMMIT_INTERVAL: "10000"}, 0)


def row(
    last_run_ms: int | None, lag: int = 0, error: str | None = None, requested: bool = False
) -> LakeTableRow:
    return LakeTableRow(
        "t",
        "strata.t",
        "raw",
        True,
        0,
        last_run_ms=last_run_ms,
        lag_records=lag,
        error=error,
        commit_requested=requested,
    )


def test_a_table_is_due_an_interval_after_its_last_run_began_or_at_once_when_behind() -> None:
    assert due_at(INFO, row(50_000)) == 60_000
    assert (_due(INFO, row(50_000), 59_999), _due(INFO, row(50_000), 60_000)) == (False, True)
    # Behind: the last run committed and the cap left offsets for later.
    assert behind(row(50_000, lag=7))
    assert due_at(INFO, row(50_000, lag=7)) == 0
    assert _due(INFO, row(50_000, lag=7), 50_001)
    # A failed run keeps the lag it found, and waits for its interval.
    assert not behind(row(50_000, lag=7, error="boom"))
    assert due_at(INFO, row(50_000, lag=7, error="boom")) == 60_000
    # Never run, or a commit asked for: due at once.
    assert _due(INFO, None, 0)
    assert _due(INFO, row(None), 0)
    assert _due(INFO, row(50_000, requested=True), 50_001)
