"""The record browser's scan: one page of a topic's records from given positions, across one partition or
several, bounded by a record limit and a scan budget, with the gaps it met.

A page is bounded twice, so that a partition of millions of records is never loaded whole: at most
``limit`` matching records, and at most ``max_scan`` records read (filters aside). Where a page stops,
``positions`` say where the next one starts.

Reads go through the fetch path it is given (the agent's: cache, coalesced GETs, the same CRC checks as any
fetch). Across partitions, each round reads one fetch's worth from every partition not yet at its high
watermark, so that one busy partition cannot hide the others. Gaps are the offsets, inside the scanned
ranges, that hold no record (compaction or retention removed them): they are found from every record read,
so filters do not create them. The HTTP door (api/routes/browse.py) parses the request and renders the page.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from agents.chunks import FetchResult
from storage.errors import BadRequest
from storage.metadata.rows import PartitionState
from storage.records import Record

# One fetch per partition and round. The first asks for about what the page needs (records decode in
# Python here, so reading far more small records than a page shows costs many times the page); each
# further round (a filter that matched little) doubles it, up to MAX_FETCH_BYTES.
MIN_FETCH_BYTES = 16 * 1024
MAX_FETCH_BYTES = 1024 * 1024
Start = Literal["beginning", "end", "offset", "timestamp"]

# (topic, partition, offset, max_bytes, max_wait_ms) -> what a fetch from ``offset`` answers.
Fetch = Callable[[str, int, int, int, int], Awaitable[FetchResult]]
# (topic, partition, timestamp) -> (offset, timestamp) of the first record at or after it, or None.
FindOffset = Callable[[str, int, int], Awaitable[tuple[int, int] | None]]


@dataclass(frozen=True, slots=True)
class Gap:
    """Offsets ``first..last`` of ``partition`` that hold no record."""

    partition: int
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Needles:
    """The page's filters: a record matches when its key and value contain these bytes (None: any)."""

    key: bytes | None = None
    value: bytes | None = None

    def match(self, record: Record) -> bool:
        if self.key is not None and (record.key is None or self.key not in record.key):
            return False
        return self.value is None or (record.value is not None and self.value in record.value)


@dataclass(slots=True)
class Page:
    """The records found, as (partition, record) in the order the scan met them, the gaps, where each
    partition's scan stopped, and how many records were read."""

    records: list[tuple[int, Record]] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    positions: dict[int, int] = field(default_factory=dict)
    scanned: int = 0


async def start_positions(
    find_offset: FindOffset,
    topic: str,
    states: list[PartitionState],
    start: Start,
    offset: int | None,
    timestamp: int | None,
    limit: int,
) -> dict[int, int]:
    """Where each partition's page starts. ``end``: ``limit`` records before the high watermark (an
    equal share of it across several partitions); ``timestamp``: the first record at or after it (the
    high watermark if none). A start outside the log is clamped into it."""
    if start == "offset" and offset is None:
        raise BadRequest("start=offset needs an offset")
    if start == "timestamp" and timestamp is None:
        raise BadRequest("start=timestamp needs a timestamp (ms)")
    nonempty = sum(1 for s in states if s.high_watermark > s.log_start_offset) or 1
    back = limit if len(states) == 1 else math.ceil(limit / nonempty)
    positions: dict[int, int] = {}
    for s in states:
        if start == "beginning":
            at = s.log_start_offset
        elif start == "end":
            at = s.high_watermark - back
        elif start == "offset":
            assert offset is not None
            at = offset
        else:
            assert timestamp is not None
            hit = await find_offset(topic, s.partition, timestamp)
            at = s.high_watermark if hit is None else hit[0]
        positions[s.partition] = min(max(at, s.log_start_offset), s.high_watermark)
    return positions


def parse_cursor(cursor: str, states: dict[int, PartitionState]) -> dict[int, int]:
    """``p:o,p:o``: each position clamped into its partition's log (it may have moved since)."""
    positions: dict[int, int] = {}
    for part in cursor.split(","):
        p_text, sep, o_text = part.partition(":")
        if not sep or not p_text.isdigit() or not o_text.isdigit():
            raise BadRequest(f"invalid cursor {cursor[:64]!r}: expected partition:offset pairs")
        p, at = int(p_text), int(o_text)
        if p not in states:
            raise BadRequest(f"invalid cursor: there is no partition {p}")
        s = states[p]
        positions[p] = min(max(at, s.log_start_offset), s.high_watermark)
    return positions


async def scan_page(
    fetch: Fetch,
    topic: str,
    states: dict[int, PartitionState],
    positions: dict[int, int],
    limit: int,
    max_scan: int,
    needles: Needles,
) -> Page:
    """Read from ``positions`` until ``limit`` records match, ``max_scan`` are read, or every partition
    reaches its high watermark (as ``states`` gave it)."""
    page = Page(positions=dict(positions))
    active = [p for p in sorted(positions) if positions[p] < states[p].high_watermark]
    fetch_bytes = min(MAX_FETCH_BYTES, max(MIN_FETCH_BYTES, limit * 256 // max(1, len(active))))
    while active and len(page.records) < limit and page.scanned < max_scan:
        still: list[int] = []
        for p in active:
            before = page.positions[p]
            fetched = await fetch(topic, p, before, fetch_bytes, 0)
            if _take(page, p, fetched, limit, max_scan, needles):
                break
            if before < page.positions[p] < fetched.high_watermark:  # no progress: nothing more here now
                still.append(p)
        active = still if len(page.records) < limit and page.scanned < max_scan else []
        fetch_bytes = min(MAX_FETCH_BYTES, fetch_bytes * 2)
    return page


def _take(page: Page, p: int, fetched: FetchResult, limit: int, max_scan: int, needles: Needles) -> bool:
    """Add one fetch's records of partition ``p`` to the page and move its position; True when the page
    is full (its limit or its scan budget reached)."""
    position = page.positions[p]
    expected = position
    for record in fetched.records:
        if record.offset < position:
            continue  # a fetch answers from the batch holding the position
        if record.offset > expected:
            page.gaps.append(Gap(p, expected, record.offset - 1))
        expected = record.offset + 1
        page.scanned += 1
        if needles.match(record):
            page.records.append((p, record))
        if len(page.records) >= limit or page.scanned >= max_scan:
            page.positions[p] = expected
            return True
    # The fetch's next offset is past every offset it answered for: any it skipped hold no record.
    end = max(expected, fetched.next_offset)
    if end > expected:
        page.gaps.append(Gap(p, expected, end - 1))
    page.positions[p] = end
    return False
