"""The record browser: one page of a topic's records, from any start, across one partition or all of them.

A page is bounded twice, so that a partition of millions of records is never loaded whole: at most
``limit`` matching records, and at most ``max_scan`` records read (filters aside). Where a page stops, the
``cursor`` (``partition:offset`` pairs) says where the next one starts; the console's live tail is the same
request repeated with the cursor.

Reads go through the agent's fetch path (cache, coalesced GETs, the same CRC checks as any fetch). Across
partitions, each round reads one fetch's worth from every partition not yet at its high watermark, so that
one busy partition cannot hide the others. Gaps are the offsets, inside the scanned ranges, that hold no
record (compaction removed them): they are found from every record read, so filters do not create them.
"""

from __future__ import annotations

import asyncio
import base64
import math
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request

from agents.principals import Op, Resource
from api import authz
from api import console_models as out
from api.routes.common import ERRORS, CtxDep, TopicPath, topic_name
from storage import records
from storage.errors import BadRequest, UnknownPartition
from storage.metadata.rows import PartitionState

router = APIRouter()

# One fetch per partition and round. The first asks for about what the page needs (records decode in
# Python here, so reading 256 KiB of small records for a page of 50 cost ten times the page); each further
# round (a filter that matched little) doubles it, up to MAX_FETCH_BYTES.
MIN_FETCH_BYTES = 16 * 1024
MAX_FETCH_BYTES = 1024 * 1024
# Browsing "all partitions" keeps a position per partition in the cursor, which travels in the URL
# (uvicorn refuses request lines near 64 KiB, and a character may take 12 bytes percent-encoded): past
# this many partitions, the caller picks one. 256 positions of 11-digit offsets fit in MAX_CURSOR.
MAX_ALL_PARTITIONS = 256
MAX_CURSOR = 4_000
Start = Literal["beginning", "end", "offset", "timestamp"]


@router.get("/v1/topics/{topic}/browse", response_model=out.BrowseOut, responses=ERRORS)
async def browse(
    http: Request,
    ctx: CtxDep,
    topic: TopicPath,
    partition: Annotated[
        int | None, Query(ge=0, le=2**31 - 1, description="one partition; all if absent")
    ] = None,
    start: Annotated[Start, Query(description="where the page starts (ignored with a cursor)")] = "beginning",
    offset: Annotated[int | None, Query(ge=0, le=2**62, description="with start=offset")] = None,
    timestamp: Annotated[int | None, Query(ge=0, le=2**62, description="ms, with start=timestamp")] = None,
    cursor: Annotated[str | None, Query(max_length=MAX_CURSOR, description="from a previous page")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    max_scan: Annotated[int, Query(ge=1, le=100_000, description="records read at most")] = 10_000,
    key_contains: Annotated[str | None, Query(max_length=256)] = None,
    value_contains: Annotated[str | None, Query(max_length=256)] = None,
) -> out.BrowseOut:
    """A page of records (keys, values and header values in base64), the gaps met, and where it stopped.

    With ``start=end`` each partition starts ``limit`` records (all partitions: an equal share of it)
    before its high watermark; with ``start=timestamp``, at its first record at or after the timestamp
    (its high watermark if none). A start outside the log is clamped into it."""
    name = topic_name(topic)
    authz.check(http, Op.READ, Resource.TOPIC, name)
    states = {s.partition: s for s in await asyncio.to_thread(ctx.metadata.partition_states, name)}
    if partition is not None and partition not in states:
        raise UnknownPartition(
            f"topic {name!r} has {len(states)} partition(s); there is no partition {partition}"
        )
    if partition is None and len(states) > MAX_ALL_PARTITIONS:
        raise BadRequest(
            f"topic {name!r} has {len(states)} partitions: browse one of them "
            f"(all partitions at once is limited to {MAX_ALL_PARTITIONS})"
        )
    chosen = [partition] if partition is not None else sorted(states)
    if cursor is not None:
        positions = _parse_cursor(cursor, states)
    else:
        positions = await _starts(ctx, name, [states[p] for p in chosen], start, offset, timestamp, limit)
    key_needle = key_contains.encode() if key_contains else None
    value_needle = value_contains.encode() if value_contains else None

    found: list[tuple[int, records.Record]] = []
    gaps: list[out.GapOut] = []
    scanned = 0
    active = [p for p in sorted(positions) if positions[p] < states[p].high_watermark]
    fetch_bytes = min(MAX_FETCH_BYTES, max(MIN_FETCH_BYTES, limit * 256 // max(1, len(active))))
    while active and len(found) < limit and scanned < max_scan:
        still: list[int] = []
        for p in active:
            position = positions[p]
            fetched = await ctx.agent.fetch(name, p, position, fetch_bytes, 0)
            expected, stopped = position, False
            for record in fetched.records:
                if record.offset < position:
                    continue  # a fetch answers from the batch holding the position
                if record.offset > expected:
                    gaps.append(out.GapOut(partition=p, first=expected, last=record.offset - 1))
                expected = record.offset + 1
                scanned += 1
                if _matches(record, key_needle, value_needle):
                    found.append((p, record))
                if len(found) >= limit or scanned >= max_scan:
                    stopped = True
                    break
            if stopped:
                positions[p] = expected
                break
            # The fetch's next offset is past every offset it answered for: any it skipped hold no record.
            end = max(expected, fetched.next_offset)
            if end > expected:
                gaps.append(out.GapOut(partition=p, first=expected, last=end - 1))
            positions[p] = end
            if position < end < fetched.high_watermark:  # no progress: nothing more to read here now
                still.append(p)
        active = still if len(found) < limit and scanned < max_scan else []
        fetch_bytes = min(MAX_FETCH_BYTES, fetch_bytes * 2)

    found.sort(key=lambda item: (item[1].timestamp, item[0], item[1].offset))
    return out.BrowseOut(
        records=[_record_out(p, r) for p, r in found],
        gaps=gaps,
        positions=[
            out.PositionOut(
                partition=p,
                next_offset=positions[p],
                log_start_offset=states[p].log_start_offset,
                high_watermark=states[p].high_watermark,
            )
            for p in sorted(positions)
        ],
        cursor=",".join(f"{p}:{positions[p]}" for p in sorted(positions)),
        scanned=scanned,
        exhausted=all(positions[p] >= states[p].high_watermark for p in positions),
    )


async def _starts(
    ctx: CtxDep,
    topic: str,
    states: list[PartitionState],
    start: Start,
    offset: int | None,
    timestamp: int | None,
    limit: int,
) -> dict[int, int]:
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
            hit = await ctx.agent.fetcher.offset_for_timestamp(topic, s.partition, timestamp)
            at = s.high_watermark if hit is None else hit[0]
        positions[s.partition] = min(max(at, s.log_start_offset), s.high_watermark)
    return positions


def _parse_cursor(cursor: str, states: dict[int, PartitionState]) -> dict[int, int]:
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


def _matches(record: records.Record, key: bytes | None, value: bytes | None) -> bool:
    if key is not None and (record.key is None or key not in record.key):
        return False
    return value is None or (record.value is not None and value in record.value)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _record_out(partition: int, record: records.Record) -> out.BrowseRecordOut:
    return out.BrowseRecordOut(
        partition=partition,
        offset=record.offset,
        timestamp=record.timestamp,
        key=_b64(record.key),
        value=_b64(record.value),
        headers=[out.BrowseHeaderOut(name=h.key, value=_b64(h.value)) for h in record.headers],
    )
