"""The record browser's scan (agents/browse.py) over a fake fetch path: bounds, gaps, fairness, cursors."""

from __future__ import annotations

import pytest

from agents.browse import Gap, Needles, parse_cursor, scan_page, start_positions
from agents.chunks import FetchResult
from storage.errors import BadRequest
from storage.metadata.rows import PartitionState
from storage.records import Record


class FakeLog:
    """Partitions of records at the given offsets (others are holes); a fetch answers whole records from
    the first offset >= the one asked, a few at a time, and moves past holes at its end as the agent does."""

    def __init__(self, offsets: dict[int, list[int]], per_fetch: int = 3) -> None:
        self.offsets = offsets
        self.per_fetch = per_fetch
        self.fetches: list[tuple[int, int]] = []

    def hwm(self, p: int) -> int:
        return max(self.offsets[p], default=-1) + 1

    def states(self) -> dict[int, PartitionState]:
        return {p: PartitionState("t", p, 0, self.hwm(p)) for p in self.offsets}

    async def fetch(self, topic: str, p: int, offset: int, max_bytes: int, wait_ms: int) -> FetchResult:
        self.fetches.append((p, offset))
        found = [o for o in self.offsets[p] if o >= offset][: self.per_fetch]
        records = [Record(o, 1000 + o, f"k{o % 3}".encode(), f"v{o}".encode()) for o in found]
        following = [o for o in self.offsets[p] if o > (found[-1] if found else offset - 1)]
        next_offset = following[0] if following else self.hwm(p)
        return FetchResult(records, max(next_offset, offset), self.hwm(p), 0)

    async def find(self, topic: str, p: int, timestamp: int) -> tuple[int, int] | None:
        hits = [o for o in self.offsets[p] if 1000 + o >= timestamp]
        return (hits[0], 1000 + hits[0]) if hits else None


async def test_a_page_stops_at_its_limit_and_the_next_starts_where_it_stopped() -> None:
    log = FakeLog({0: list(range(10))})
    page = await scan_page(log.fetch, "t", log.states(), {0: 0}, 4, 1000, Needles())
    assert [r.offset for _, r in page.records] == [0, 1, 2, 3]
    assert page.positions == {0: 4}
    again = await scan_page(log.fetch, "t", log.states(), page.positions, 4, 1000, Needles())
    assert [r.offset for _, r in again.records] == [4, 5, 6, 7]


async def test_holes_inside_and_after_the_records_read_are_gaps() -> None:
    log = FakeLog({0: [0, 1, 5, 6, 9]}, per_fetch=10)
    page = await scan_page(log.fetch, "t", log.states(), {0: 0}, 50, 1000, Needles())
    assert [r.offset for _, r in page.records] == [0, 1, 5, 6, 9]
    assert page.gaps == [Gap(0, 2, 4), Gap(0, 7, 8)]
    assert page.positions == {0: 10}


async def test_filters_do_not_create_gaps_and_the_scan_budget_bounds_the_reads() -> None:
    log = FakeLog({0: list(range(100))})
    page = await scan_page(log.fetch, "t", log.states(), {0: 0}, 50, 20, Needles(key=b"k1"))
    assert page.scanned == 20
    assert [r.offset for _, r in page.records] == [o for o in range(20) if o % 3 == 1]
    assert page.gaps == []
    assert page.positions == {0: 20}


async def test_every_partition_reads_once_per_round_so_a_busy_one_cannot_hide_the_others() -> None:
    log = FakeLog({0: list(range(1000)), 1: [0, 1], 2: list(range(5))}, per_fetch=2)
    page = await scan_page(log.fetch, "t", log.states(), {0: 0, 1: 0, 2: 0}, 7, 1000, Needles())
    assert [p for p, _ in log.fetches[:3]] == [0, 1, 2]
    assert {p for p, _ in page.records} == {0, 1, 2}


async def test_starts_clamp_into_the_log_and_follow_timestamps() -> None:
    log = FakeLog({0: list(range(10)), 1: []})
    states = list(log.states().values())
    assert await start_positions(log.find, "t", states, "end", None, None, 4) == {0: 6, 1: 0}
    assert await start_positions(log.find, "t", states, "offset", 50, None, 4) == {0: 10, 1: 0}
    assert await start_positions(log.find, "t", states, "timestamp", None, 1007, 4) == {0: 7, 1: 0}
    with pytest.raises(BadRequest):
        await start_positions(log.find, "t", states, "offset", None, None, 4)


def test_a_cursor_is_parsed_clamped_and_checked() -> None:
    states = FakeLog({0: list(range(10)), 1: [0]}).states()
    assert parse_cursor("0:4,1:99", states) == {0: 4, 1: 1}
    for bad in ("0", "0:x", "x:1", "7:1", "0:-1"):
        with pytest.raises(BadRequest):
            parse_cursor(bad, states)
