"""LoopHistogram (agents/loop_histogram.py) against prometheus_client's Histogram, the reference: the same
exposition for the same observations (bar Histogram's ``_created`` sample), values on the bounds included."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from agents.loop_histogram import LoopHistogram
from tests.examples import examples

BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 1.0, 30.0)


def _exposition(registry: CollectorRegistry) -> list[str]:
    return [line for line in generate_latest(registry).decode().splitlines() if "_created" not in line]


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(BOUNDS),  # on a bound: counted in that bound's bucket (le)
            st.floats(min_value=0, max_value=100, allow_nan=False),
        ),
        max_size=50,
    )
)
def test_same_exposition_as_histogram(values: list[float]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    fast = LoopHistogram("x_seconds", "doc", BOUNDS, ours)
    reference = Histogram("x_seconds", "doc", buckets=BOUNDS, registry=theirs)
    for value in values:
        fast.observe(value)
        reference.observe(value)
    assert _exposition(ours) == _exposition(theirs)


def test_bounds_must_increase() -> None:
    with pytest.raises(ValueError, match="must increase"):
        LoopHistogram("y_seconds", "doc", (0.1, 0.05), CollectorRegistry())
