"""planner/throttle.py: compaction's read rate limit (Kafka's log.cleaner.io.max.bytes.per.second)."""

from __future__ import annotations

import pytest

from planner.throttle import MIN_BYTES_PER_SECOND, ReadThrottle
from storage.clock import ManualClock
from storage.errors import SettingsError

MiB = 1024 * 1024


def test_unlimited_never_sleeps() -> None:
    clock = ManualClock()
    throttle = ReadThrottle(0, clock)
    throttle.take(10**12)
    assert (clock.monotonic(), throttle.slept) == (0.0, 0.0)


def test_one_second_of_burst_then_the_rate() -> None:
    clock = ManualClock()
    throttle = ReadThrottle(2 * MiB, clock)
    throttle.take(2 * MiB)  # the full bucket: no wait
    assert clock.monotonic() == 0.0
    for _ in range(10):
        throttle.take(MiB)  # each MiB past the bucket costs half a second
    assert clock.monotonic() == pytest.approx(5.0)
    assert throttle.slept == pytest.approx(5.0)


def test_idle_time_refills_but_never_past_one_second() -> None:
    clock = ManualClock()
    throttle = ReadThrottle(MiB, clock)
    throttle.take(MiB)
    clock.advance(100.0)  # a long idle stretch earns one second of reading, not a hundred
    throttle.take(MiB)
    assert throttle.slept == 0.0
    throttle.take(MiB)
    assert throttle.slept == pytest.approx(1.0)


def test_the_wait_is_not_paid_twice() -> None:
    """A debt slept off counts as refill for the next take: 4 MiB at 1 MiB/s after the burst is 3 s."""
    clock = ManualClock()
    throttle = ReadThrottle(MiB, clock)
    for _ in range(4):
        throttle.take(MiB)
    assert clock.monotonic() == pytest.approx(3.0)


@pytest.mark.parametrize("rate", [1, MIN_BYTES_PER_SECOND - 1, -5])
def test_a_rate_too_low_to_finish_a_chunk_within_a_lease_is_refused(rate: int) -> None:
    with pytest.raises(SettingsError, match="at least"):
        ReadThrottle(rate, ManualClock())
