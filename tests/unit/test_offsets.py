"""agents/offsets.py's per-batch answer, and api/_recordjson.c's render_offsets against orjson."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.offsets import FIRST_RECORD, RecordOffsets, order_of, order_pairs
from api._recordjson import render_offsets

_LONG = st.integers(-(2**62), 2**62)


@st.composite
def _answers(draw: st.DrawFn) -> RecordOffsets:
    nbatch = draw(st.integers(1, 6))
    partitions = draw(st.lists(st.integers(0, 2**31 - 1), min_size=nbatch, max_size=nbatch))
    bases = draw(st.lists(_LONG, min_size=nbatch, max_size=nbatch))
    pairs = draw(st.lists(st.tuples(st.integers(0, nbatch - 1), st.integers(0, 2**31 - 1)), max_size=40))
    return RecordOffsets(partitions, bases, order_of(pairs))


def test_pairs_expand_per_batch() -> None:
    answer = RecordOffsets([7, 2], [100, 40], order_of([(0, 0), (1, 0), (0, 1), (1, 3)]))
    assert answer.pairs() == [(7, 100), (2, 40), (7, 101), (2, 43)]
    assert len(answer) == 4
    assert answer[1] == (2, 40)
    assert list(answer) == answer.pairs()
    assert answer == [(7, 100), (2, 40), (7, 101), (2, 43)]
    assert [answer[i] for i in range(-4, 4)] == answer.pairs() * 2  # one pair read per index
    assert answer[1:3] == answer.pairs()[1:3]
    with pytest.raises(IndexError):
        answer[4]
    with pytest.raises(IndexError):
        answer[-5]
    assert order_pairs(FIRST_RECORD) == [(0, 0)]


def test_of_pairs_round_trips() -> None:
    pairs = [(3, 10), (0, 0), (3, 11)]
    assert RecordOffsets.of_pairs(pairs).pairs() == pairs
    assert RecordOffsets.of_pairs([]).pairs() == []


@given(_answers())
def test_render_offsets_is_orjson(answer: RecordOffsets) -> None:
    out = bytearray(b'{"offsets":')
    count = render_offsets(out, answer.order, answer.partitions, answer.bases)
    expected = orjson.dumps([{"partition": p, "offset": o} for p, o in answer.pairs()])
    assert count == len(answer)
    assert bytes(out) == b'{"offsets":' + expected


@pytest.mark.parametrize(
    ("order", "partitions", "bases"),
    [
        (order_of([(1, 0)]), [0], [0]),  # batch 1 of a one-batch answer
        (order_of([(-1, 0)]), [0], [0]),
        (order_of([(0, -2)]), [0], [0]),
        (order_of([(0, 0)]), [0, 1], [0]),  # lengths differ
        (b"\x00\x00\x00", [0], [0]),  # not int32 pairs
    ],
)
def test_render_offsets_refuses_a_bad_order(order: bytes, partitions: list[int], bases: list[int]) -> None:
    out = bytearray(b"{")
    with pytest.raises(ValueError, match=r"order|batch|bases"):
        render_offsets(out, order, partitions, bases)
    assert out == bytearray(b"{")  # nothing appended that a caller could send
