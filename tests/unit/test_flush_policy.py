"""The flush policy's deadlines and the class each cut counts under (agents/flush_policy.py)."""

from __future__ import annotations

from agents.flush_policy import (
    LOW_LATENCY_DEPTH,
    LOW_LATENCY_PIPELINE_BYTES,
    FlushCause,
    FlushPolicy,
    low_latency_depth,
    pipeline_full,
)
from strata.settings import LOCAL_LOW_LATENCY_MS, S3_LOW_LATENCY_MS, Settings

POLICY = FlushPolicy(interval_s=0.25, flush_bytes=8000, idle_s=0.005, idle_bytes=3000, low_latency_s=0.02)


def test_standard_records_wait_for_the_interval() -> None:
    assert POLICY.deadline(100, 10.0, 10.1, None, False) == (10.25, FlushCause.STANDARD)


def test_a_low_latency_record_brings_the_cut_forward_and_owns_it() -> None:
    # Standard records since 10.0, the first low-latency one at 10.1: due at 10.12, counted low-latency.
    due, cause = POLICY.deadline(100, 10.0, 10.1, 10.1, False)
    assert (round(due, 6), cause) == (10.12, FlushCause.LOW_LATENCY)


def test_a_standard_rule_due_first_keeps_the_cut_standard() -> None:
    # The interval falls before the low-latency bound: the cut is the standard class's.
    assert POLICY.deadline(100, 10.0, 10.24, 10.24, False) == (10.25, FlushCause.STANDARD)
    # The idle cut over its floor (quiet since 10.1) falls before it too.
    due, cause = POLICY.deadline(4000, 10.0, 10.1, 10.1, False)
    assert (round(due, 6), cause) == (10.105, FlushCause.STANDARD)


def test_a_full_buffer_is_due_at_once_as_standard() -> None:
    assert POLICY.deadline(8000, 10.0, 10.1, 10.1, False) == (10.0, FlushCause.STANDARD)


def test_senders_waiting_over_the_floor_is_due_at_the_last_arrival() -> None:
    assert POLICY.deadline(4000, 10.0, 10.1, None, True) == (10.1, FlushCause.STANDARD)
    # Below the floor the word changes nothing.
    assert POLICY.deadline(100, 10.0, 10.1, None, True) == (10.25, FlushCause.STANDARD)


def test_a_second_low_latency_flush_overlaps_the_first_only_with_enough_bytes() -> None:
    assert low_latency_depth(0) == 1
    assert low_latency_depth(LOW_LATENCY_PIPELINE_BYTES - 1) == 1
    assert low_latency_depth(LOW_LATENCY_PIPELINE_BYTES) == LOW_LATENCY_DEPTH == 2


def test_the_pipeline_is_full_at_the_cut_class_depth() -> None:
    small, big = 100, LOW_LATENCY_PIPELINE_BYTES
    # A low-latency cut waits for the flush in flight, unless it holds enough bytes for a second.
    assert not pipeline_full(FlushCause.LOW_LATENCY, small, 0, 8)
    assert pipeline_full(FlushCause.LOW_LATENCY, small, 1, 8)
    assert not pipeline_full(FlushCause.LOW_LATENCY, big, 1, 8)
    assert pipeline_full(FlushCause.LOW_LATENCY, big, 2, 8)
    # A standard cut uses every slot.
    assert not pipeline_full(FlushCause.STANDARD, small, 7, 8)
    assert pipeline_full(FlushCause.STANDARD, small, 8, 8)


def test_a_zero_bound_makes_a_low_latency_record_due_on_arrival() -> None:
    # The local default: the cut comes at the flush loop's next turn, with whatever was read alongside.
    policy = FlushPolicy(interval_s=0.25, flush_bytes=8000, idle_s=0.005, idle_bytes=3000, low_latency_s=0.0)
    assert policy.deadline(100, 10.0, 10.1, 10.1, False) == (10.1, FlushCause.LOW_LATENCY)
    assert policy.deadline(100, 10.0, 10.1, None, False) == (10.25, FlushCause.STANDARD)


def test_the_low_latency_bound_defaults_to_none_locally_and_a_put_on_s3() -> None:
    assert Settings(data_dir="/tmp/strata-data").low_latency_bound_ms == LOCAL_LOW_LATENCY_MS == 0
    assert Settings(bucket="s3://b").low_latency_bound_ms == S3_LOW_LATENCY_MS == 20
    assert Settings(bucket="s3://b", low_latency_ms=0).low_latency_bound_ms == 0
