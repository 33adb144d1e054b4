"""The small-file rewrite's time partitions (pipeline/lake/rewrite.py): a partition value's time range for
each time transform, and the values Arrow shows (days as dates) read back as counts since the epoch."""

from __future__ import annotations

from datetime import UTC, date, datetime

from pipeline.lake.rewrite import _ordinal, _range_ms


def _ms(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp() * 1000)  # type: ignore[misc]


def test_time_partition_ranges() -> None:
    assert _range_ms("hour", 0) == (0, 3_600_000)
    assert _range_ms("day", 20_000) == (_ms(2024, 10, 4), _ms(2024, 10, 5))
    assert _range_ms("month", 0) == (0, _ms(1970, 2, 1))
    assert _range_ms("month", 11) == (_ms(1970, 12, 1), _ms(1971, 1, 1))
    assert _range_ms("month", 12 * 54 + 1) == (_ms(2024, 2, 1), _ms(2024, 3, 1))
    assert _range_ms("year", 54) == (_ms(2024, 1, 1), _ms(2025, 1, 1))
    assert _range_ms("bucket[4]", 1) is None
    assert _range_ms("identity", 1) is None


def test_partition_values_as_ordinals() -> None:
    assert _ordinal(date(1970, 1, 2)) == 1
    assert _ordinal(date(2024, 10, 4)) == 20_000
    assert _ordinal(473_000) == 473_000
    assert _ordinal(None) is None
    assert _ordinal("2024-10-05") is None
    assert _ordinal(datetime(2024, 10, 5, tzinfo=UTC)) is None
